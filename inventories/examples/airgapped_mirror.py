"""An air-gapped site: the hosts reach only the site's mirrors and its proxy, never the internet.

    pyinfra inventories/examples/airgapped_mirror.py deploy/gpu_node.py --dry \
        --group-data inventories/group_data

Every URL the deploy fetches from is a key; point each at the mirror that serves a copy of it.
A login or token in a URL never reaches a command line or pyinfra's output (it goes on stdin,
or into a mode-600 file). How: docs/howto/air-gapped.md. Every key:
docs/reference/inventory-keys.md.
"""

_ssh = {"ssh_user": "gpuadmin", "_sudo": True}

_mirrors = {
    # A mirror of https://developer.download.nvidia.com/compute/cuda/repos (same layout:
    # <distro>/<arch>/). A mirror that re-signs the repository needs its own key and fingerprint:
    "nvidia_repo_url": "https://mirror.site.example/nvidia/cuda/repos",
    # "nvidia_repo_key_url": "https://mirror.site.example/nvidia/site-signing-key.pub",
    # "nvidia_repo_key_fingerprint": "<the 40 hex digits of that key>",
    # A PyPI mirror serving the TensorFlow and nvidia-* wheels of the hashed lock.
    "pip_index_url": "https://pypi.site.example/simple/",
    # apt fetches the OS archive (and the NVIDIA mirror) through the site's proxy.
    "apt_proxy": "http://proxy.site.example:3128",
    # A copy of nccl-tests' source archive; nccl_tests_sha256 still checks it.
    "nccl_tests_url": "https://mirror.site.example/github/NVIDIA/nccl-tests/v2.17.6.tar.gz",
    # A venv needs only the pip index; conda would also need "miniforge_url" (with its
    # "miniforge_sha256") and "conda_channel_url" (a conda-forge mirror).
    "python_env": "venv",
}

gpu_nodes = (
    ["gpu-01.site.example", "gpu-02.site.example"],
    {**_ssh, **_mirrors, "gpu_count": 8},
)

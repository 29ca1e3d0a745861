"""The sandbox's stand-in NVIDIA apt repository: real package names and versions, no GPU code.

Example::

    from gpufleet.sandbox.standins import build_nvidia_repo
    info = build_nvidia_repo(www, repo_distro="ubuntu2204", repo_arch="x86_64",
                             kernel_release=os.uname().release)
"""

from gpufleet.sandbox.standins.model import StandinError
from gpufleet.sandbox.standins.repo import RepoInfo, build_nvidia_repo

__all__ = ["RepoInfo", "StandinError", "build_nvidia_repo"]

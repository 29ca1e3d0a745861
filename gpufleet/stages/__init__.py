"""gpufleet's provisioning stages: one pyinfra ``@deploy`` each, wired in order by the deploy.

=====================  ===============================================================
stage                  what it does on a host
=====================  ===============================================================
preflight              refuses, before anything changes, an unsupported OS/arch, no GPU
                       (unless ``gpu_less``), Secure Boot without a signing plan, a
                       foreign driver (unless ``replace_foreign_driver``), too little
                       disk, GPU processes while the driver would change (unless
                       ``force_driver_change``); the host is failed, the others go on
run_start              the host's deploy lock (a second deploy is refused; a stale lock
                       taken over); an interrupted dpkg finished before any apt operation
nvidia_repo            apt proxy (secret-safe), signing key checked by fingerprint,
                       deb822 source with Signed-By; ``apt-get update`` only on change
driver                 headers + DKMS, nouveau blacklisted (initramfs on change), the
                       distro's own driver builds blocked, other branch removed first,
                       branch locked (pinning package, else apt preferences + hold),
                       unattended-upgrades blacklist, persistenced and (with NVSwitch)
                       Fabric Manager running (started by the reboot when one is due)
cuda_stack             CUDA toolkit, cuDNN and NCCL at the matrix's versions, held
dcgm                   DCGM (datacenter-gpu-manager-4 core + cuda<major>) pinned, held,
                       nvidia-dcgm running; data-centre GPUs on Ubuntu 22.04/24.04
nccl_tests             nccl-tests built from a pinned, sha256-checked source release
                       (no MPI) on hosts with 2+ GPUs, for the full tier's all-reduce
python_env             conda (Miniforge, sha256-checked) or venv (system Python or uv);
                       pip install under constraints; activation + gpufleet-python;
                       import self-check
validation_payload     the validation suite at ``<payload_dir>/<version>`` + ``current``
run_end                the deploy lock released, then the reboot per ``reboot``: last but for
                       the warm-up, so a host that does not come back holds the others only
                       at that wait
xla_warm_up            every XLA-compiled step of the quick and full tiers compiled once into
                       root's XLA cache (the installed driver running by now), marked per
                       TensorFlow, payload and GPUs; a no-op without GPUs
=====================  ===============================================================

Reboot policy (``reboot``): ``auto`` reboots only when nouveau is loaded or the loaded NVIDIA
module differs from the installed one (decided when the operation runs); ``never`` reports
"reboot pending"; ``always`` reboots on every run. ``pyinfra --serial`` or ``--parallel N``
turn a fleet run into a rolling one, a few hosts at a time.

Mirrors and air-gapped sites: ``nvidia_repo_url`` (laid out as upstream,
``<url>/<distro>/<arch>/``), ``nvidia_repo_key_url`` and ``nvidia_repo_key_fingerprint``,
``miniforge_url`` and ``miniforge_sha256``, ``pip_index_url`` (+ ``pip_trusted_host``) and
``apt_proxy``; credentials in these URLs are handled as pyinfra ``HiddenValue``.

Use from your own deploy::

    from gpufleet.stages.node import node_plan
    from gpufleet.stages.preflight import preflight
    from gpufleet.stages.nvidia_repo import nvidia_repo
    from gpufleet.stages.driver import driver

    plan = node_plan()
    if preflight(plan=plan):
        nvidia_repo(plan=plan)
        driver(plan=plan)
"""

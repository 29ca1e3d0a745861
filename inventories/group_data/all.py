"""The fleet's declared defaults: every host gets these unless its group or host data differs.

Every key is a NodeSpec key (gpufleet/spec/model.py, docs/reference/inventory-keys.md); an
unknown key stops the run before any host is touched. Keys of your own must start with x_.
"""

# How pyinfra reaches the hosts (ssh_user, _sudo) is set per inventory: prod.py, staging.py.

# --- What to install ---------------------------------------------------------------------
tf_version = "2.21.0"  # TensorFlow release; CUDA, cuDNN, NCCL and wheel pins follow from it
driver_branch = 580  # long-term branch, the last one that still drives V100 (Volta)
kernel_module_flavor = "auto"  # open modules for Turing and newer, proprietary for Volta
install_cuda_toolkit = True  # system CUDA toolkit (nvcc, for building custom ops)
install_cudnn = True  # system cuDNN, pinned to what TF was built with
install_nccl = True  # system NCCL runtime and headers (nccl-tests builds against them)
dcgm = "auto"  # DCGM on data-centre GPUs, Ubuntu 22.04/24.04 only (its docs); on / off
nccl_tests = "auto"  # nccl-tests built on hosts with 2+ GPUs; nccl_tests_url/_sha256 for mirrors
fabric_manager = "auto"  # started on hosts whose PCI bus shows NVSwitch bridges
persistenced = True  # keep the driver loaded between jobs

# --- Python environment ------------------------------------------------------------------
python_env = "conda"  # Miniforge (conda-forge only); "venv" uses the system Python or uv
python_version = "3.11"  # inside TF 2.21's supported range 3.10..3.13
env_prefix = "/opt/gpufleet"  # Miniforge and the environments live below this
env_name = "tf"  # -> /opt/gpufleet/miniforge3/envs/tf
tensorflow_package = "tensorflow[and-cuda]"  # the nvidia-* wheels are pinned by constraints
require_cuda_build = True  # the python_env stage fails unless TF reports a CUDA build

# --- Repositories and mirrors (point these at your mirror for air-gapped sites) -----------
nvidia_repo_url = "https://developer.download.nvidia.com/compute/cuda/repos"  # or a mirror
# nvidia_repo_key_url = "https://mirror.example.net/nvidia/3bf863cc.pub"
# pip_index_url = "https://pypi-mirror.example.net/simple"
# apt_proxy = "http://proxy.example.net:3128"

# --- Changes that disturb running work ---------------------------------------------------
reboot = "auto"  # reboot only when the running driver is not the installed one
reboot_timeout_s = 900  # GPU servers with many devices take long to POST
force_driver_change = False  # refuse a driver change while GPU processes run
replace_foreign_driver = False  # refuse hosts with a runfile or distro driver
secure_boot_plan = "none"  # refuse Secure Boot hosts unless a module-signing plan is set
min_free_disk_gib = 25  # driver + CUDA + cuDNN + NCCL + environment

# --- Validation --------------------------------------------------------------------------
payload_dir = "/opt/gpufleet/validation"  # the validation suite, versioned, with current ->

"""The Python environment: Miniforge or venv, TensorFlow from a hashed lock, activation."""

from __future__ import annotations

from pyinfra.api import DeployError, deploy
from pyinfra.api.hiddenvalue import HiddenValue

from gpufleet.matrix import locks
from gpufleet.matrix.os_python import OLD_VENV_PIP, PEP600_PIP, os_key
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import files as gpufleet_files
from gpufleet.operations import python
from gpufleet.spec import NodeSpec, urls
from gpufleet.stages import op_keys
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.templates import render

WRAPPER = "/usr/local/bin/gpufleet-python"
# What gpufleet's own code run on the host needs in the environment besides TensorFlow: NVML
# for the workloads' utilization sampler (validation/host/nvml_sampler.py) and, before Python 3.11's
# tomllib, tomli for validation/verdicts/thresholds.py. The same pins as pyproject.toml's
# dependencies (tests/unit/test_stages_files.py checks); scripts/make-locks puts them in every lock.
HOST_REQUIREMENTS = ("nvidia-ml-py==13.590.48", "tomli==2.5.0; python_version < '3.11'")
# uv (use_uv), pinned like everything else the deploy installs: its 2026-11 release on PyPI.
UV_REQUIREMENT = "uv==0.13.8"
# pip for venvs whose OS bundles one too old for today's wheels (focal's python3.9-venv brings
# pip 20.0.2, which predates PEP 600's manylinux_2_27/_2_28 tags that numpy and ml-dtypes use,
# so it finds no wheel for them): the newest pip that still runs on Python 3.9.
PIP_REQUIREMENT = "pip==26.0.1"


def env_file(spec: NodeSpec) -> str:
    """The shell file holding the environment's CUDA-wheel settings."""
    return f"{spec.env_dir}/etc/gpufleet/env.sh"


@deploy("gpufleet python_env")
def python_env(plan: NodePlan | None = None):
    """
    Build the Python environment (conda by default, or venv), write its activation and the
    ``gpufleet-python`` wrapper, then pip-install TensorFlow from the release's hashed lock
    (``gpufleet/matrix/locks``: every package pinned, every file's sha256 checked, the
    ``nvidia-*`` wheels at the matrix's versions), and check that it imports (as a CUDA build,
    when required).

    .. code:: python

        python_env()
    """
    plan = plan or node_plan()
    spec, resolution = plan.spec, plan.require_resolution()
    if spec.python_env == "conda":
        _conda(plan)
    else:
        _venv(plan)

    settings = render("gpufleet-env.sh.j2", env_dir=spec.env_dir)
    with op_keys.keyed(env_file(spec)):  # the path differs between conda and venv hosts
        gpufleet_files.content(
            name=f"{env_file(spec)}: CUDA wheel settings "
            "(LD_LIBRARY_PATH, XLA_FLAGS, ptxas, TF_FORCE_GPU_ALLOW_GROWTH)",
            path=env_file(spec),
            text=settings,
        )
    if spec.python_env == "conda":
        activate = f"{spec.env_dir}/etc/conda/activate.d/gpufleet.sh"
        with op_keys.keyed(activate):
            gpufleet_files.content(
                name=f"{activate}: conda activate.d loads them",
                path=activate,
                text=render("conda-activate.sh.j2", env_dir=spec.env_dir, env_file=env_file(spec)),
            )
    gpufleet_files.content(
        name=f"{WRAPPER}: gpufleet-python wrapper",
        path=WRAPPER,
        text=render("gpufleet-python.j2", env_dir=spec.env_dir, env_file=env_file(spec)),
        mode="755",
    )

    requirement = f"{spec.tensorflow_package}=={resolution.tf_version}"
    try:
        lock = locks.lock_text(spec.tensorflow_package, resolution.tf_version)
    except locks.LockError as exc:
        raise DeployError(str(exc)) from None
    lock_path = f"{spec.env_dir}/etc/gpufleet/requirements.lock.txt"
    with op_keys.keyed(lock_path):
        gpufleet_files.content(
            name=f"{lock_path}: hashed pip lock for {requirement}",
            path=lock_path,
            text=lock,
        )
    python.pip_install_checked(
        name="pip install TensorFlow from the hashed lock (--require-hashes), check it imports",
        python=spec.python_bin,
        requirement=requirement,
        tf_version=resolution.tf_version,
        lock=lock_path,
        lock_text=lock,
        stamp=f"{spec.env_dir}/etc/gpufleet/installed.txt",
        check_python=WRAPPER,
        index_url=spec.pip_index_url_hidden,
        trusted_host=spec.pip_trusted_host,
        require_cuda_build=spec.require_cuda_build,
        proxy=spec.apt_proxy_hidden,
    )


def _conda(plan: NodePlan) -> None:
    spec, machine = plan.spec, plan.state.arch
    sha256 = spec.miniforge_sha256.get(machine)
    if not sha256:
        # Never an unchecked installer: refuse the host before anything is downloaded.
        raise DeployError(
            f"miniforge_sha256 has no entry for this host's architecture {machine!r} (it has "
            f"{', '.join(sorted(spec.miniforge_sha256)) or 'none'}); gpufleet runs no Miniforge "
            f"installer it cannot check. Fix: add miniforge_sha256['{machine}'] from the "
            "release's .sha256 file."
        )
    python.miniforge(
        name="Miniforge (installer sha256 checked, then run, in one command)",
        url=spec.miniforge_installer_url_hidden(machine),
        sha256=sha256,
        root=spec.conda_root,
        proxy=spec.apt_proxy_hidden,
    )
    if spec.conda_channel_url:
        condarc = f"{spec.conda_root}/.condarc"
        alias = spec.conda_channel_url
        text = render("condarc.j2", conda_root=spec.conda_root, channel_alias=alias)
        gpufleet_files.content(
            name=f"{condarc}: conda-forge from the mirror conda_channel_url (channel_alias)",
            path=condarc,
            # Root-only, and never in pyinfra's output: the mirror's URL may hold a login.
            text=HiddenValue(text) if urls.has_secret(alias) else text,
            mode="600",
        )
    python.conda_env(
        name="conda environment",
        conda=f"{spec.conda_root}/bin/conda",
        env_dir=spec.env_dir,
        python_version=spec.python_version,
    )


def _venv(plan: NodePlan) -> None:
    spec = plan.spec
    # The OS archive's interpreter (python3, or e.g. python3.9 on Ubuntu 20.04, whose python3
    # is too old for current TensorFlow) and its venv module, packaged apart on Debian/Ubuntu.
    interpreter = spec.venv_interpreter or "python3"
    with op_keys.keyed(interpreter):  # one operation (and name) per interpreter
        gpufleet_apt.install(
            name=f"system Python with venv ({interpreter})",
            packages=[interpreter, f"{interpreter}-venv"],
        )
    uv = None
    if spec.use_uv:
        tools = f"{spec.env_prefix}/tools"
        python.venv(
            name="tool venv for uv",
            env_dir=tools,
        )
        try:
            uv_lock = locks.tool_lock_text(UV_REQUIREMENT)
        except locks.LockError as exc:
            raise DeployError(str(exc)) from None
        uv_lock_path = f"{tools}/gpufleet-uv.lock.txt"
        gpufleet_files.content(
            name=f"{uv_lock_path}: hashed pip lock for {UV_REQUIREMENT}",
            path=uv_lock_path,
            text=uv_lock,
        )
        python.pip_tool(
            name="uv in the tool venv (hashed lock)",
            python=f"{tools}/bin/python",
            package=UV_REQUIREMENT,
            executable=f"{tools}/bin/uv",
            lock=uv_lock_path,
            lock_text=uv_lock,
            index_url=spec.pip_index_url_hidden,
            trusted_host=spec.pip_trusted_host,
            proxy=spec.apt_proxy_hidden,
        )
        uv = f"{tools}/bin/uv"
    python.venv(
        name="virtual environment",
        env_dir=spec.env_dir,
        python=interpreter,
        uv=uv,
        python_version=spec.python_version if uv else "",
        proxy=spec.apt_proxy_hidden,
    )
    if uv is None and os_key(plan.state.os_id, plan.state.os_version) in OLD_VENV_PIP:
        try:
            pip_lock = locks.tool_lock_text(PIP_REQUIREMENT)
        except locks.LockError as exc:
            raise DeployError(str(exc)) from None
        pip_lock_path = f"{spec.env_dir}/etc/gpufleet/pip.lock.txt"
        gpufleet_files.content(
            name=f"{pip_lock_path}: hashed pip lock for {PIP_REQUIREMENT}",
            path=pip_lock_path,
            text=pip_lock,
        )
        python.pip_at_least(
            name=f"pip >= {PEP600_PIP} in the venv (the OS's is older), from its hashed lock",
            python=spec.python_bin,
            minimum=PEP600_PIP,
            requirement=PIP_REQUIREMENT,
            lock=pip_lock_path,
            lock_text=pip_lock,
            index_url=spec.pip_index_url_hidden,
            trusted_host=spec.pip_trusted_host,
            proxy=spec.apt_proxy_hidden,
        )

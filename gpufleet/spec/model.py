"""NodeSpec: the typed, validated view of a host's inventory data; every default lives here."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpufleet import matrix
from gpufleet.spec import urls
from gpufleet.spec.checks import type_name, type_ok, value_errors
from gpufleet.spec.combinations import combination_errors
from gpufleet.spec.defaults import (
    MINIFORGE_SHA256,
    MINIFORGE_URL,
    MINIFORGE_VERSION,
    NCCL_TESTS_SHA256,
    NCCL_TESTS_URL,
    NVIDIA_REPO_KEY_FINGERPRINT,
    PYINFRA_KEY_PREFIXES,
    USER_KEY_PREFIX,
)
from gpufleet.spec.fields import key_field as _key  # short: it declares every key below
from gpufleet.spec.fields import key_meta as _meta
from gpufleet.spec.fields import key_table

if TYPE_CHECKING:  # the suite imports the spec on hosts, which have no pyinfra
    from pyinfra.api.hiddenvalue import HiddenValue


class SpecError(ValueError):
    """An inventory value that cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class NodeSpec:
    """Everything a host's inventory may declare, typed and checked; defaults in the table.

    {KEY_TABLE}

    Example::

        spec = NodeSpec.from_host_data({"tf_version": "2.21.0", "python_env": "venv"})
        spec.env_dir  # "/opt/gpufleet/venvs/tf"
    """

    # What to install
    tf_version: str = _key("2.21.0", "TensorFlow release to install (a key of the matrix)")
    driver_branch: int | None = _key(
        None, "NVIDIA driver branch, e.g. 580; unset: 580, or newer if the GPUs need it"
    )
    cuda_version: str | None = _key(
        None, "system CUDA toolkit version, e.g. '12.5'; unset: the one TF was built with"
    )
    kernel_module_flavor: str = _key(
        "auto",
        "driver kernel modules; auto: open for Turing and newer, proprietary for Volta",
        ("auto", "open", "proprietary"),
    )
    install_cuda_toolkit: bool = _key(True, "install the system CUDA toolkit (cuda-toolkit-X-Y)")
    install_cudnn: bool = _key(True, "install system cuDNN (runtime and dev packages)")
    install_nccl: bool = _key(True, "install system NCCL (libnccl2 and libnccl-dev)")
    dcgm: str = _key(
        "auto",
        "NVIDIA DCGM (datacenter-gpu-manager-4, nvidia-dcgm); auto: with data-centre GPUs",
        ("auto", "on", "off"),
    )
    nccl_tests: str = _key(
        "auto",
        "build nccl-tests (all_reduce_perf) for the full tier; auto: hosts with 2+ GPUs",
        ("auto", "on", "off"),
    )
    dcgm_diag_level: int | None = _key(
        None, "dcgmi diag level (1-4); default 1 in the quick tier, 3 in the full tier"
    )
    nccl_tests_min_bytes: str = _key("8", "all_reduce_perf's smallest message size (-b)")
    nccl_tests_max_bytes: str = _key("8G", "all_reduce_perf's largest message size (-e)")
    nccl_tests_url: str = _key(NCCL_TESTS_URL, "nccl-tests source archive (or a mirror of it)")
    nccl_tests_sha256: str = _key(NCCL_TESTS_SHA256, "sha256 of that archive")
    fabric_manager: str = _key(
        "auto",
        "NVIDIA Fabric Manager; auto: when an NVSwitch is on the PCI bus or the GPUs are HGX B200",
        ("auto", "on", "off"),
    )
    persistenced: bool = _key(True, "enable nvidia-persistenced")
    # Python environment
    python_env: str = _key("conda", "Python environment kind", ("conda", "venv"))
    python_version: str = _key(
        "3.11", "Python of the conda (or uv) environment; venv without uv uses the system Python"
    )
    python_interpreter: str | None = _key(
        None, "OS interpreter a venv without uv is built on, e.g. 'python3.9'; unset: python3"
    )
    use_uv: bool = _key(False, "build the venv with uv instead of python -m venv (venv only)")
    env_name: str = _key("tf", "name of the Python environment")
    env_prefix: str = _key("/opt/gpufleet", "directory holding Miniforge and the environments")
    tensorflow_package: str = _key(
        "tensorflow[and-cuda]",
        "pip requirement installed at tf_version (the sandbox: tensorflow-cpu)",
    )
    require_cuda_build: bool = _key(
        True, "fail the python_env stage unless TensorFlow reports a CUDA build"
    )
    pip_index_url: str | None = _key(
        None, "pip index URL (mirror); unset: PyPI; may carry credentials", secret=True
    )
    pip_trusted_host: str | None = _key(None, "host pip trusts without TLS verification (mirror)")
    miniforge_url: str | None = _key(
        None,
        "Miniforge installer URL; unset: the GitHub release of miniforge_version",
        secret=True,
    )
    conda_channel_url: str | None = _key(
        None,
        "conda-forge mirror for air-gapped sites: the base URL serving conda-forge/ "
        "(channel_alias in the Miniforge's .condarc, mode 600); unset: conda.anaconda.org; "
        "may carry credentials",
        secret=True,
    )
    miniforge_version: str = _key(MINIFORGE_VERSION, "pinned Miniforge release")
    miniforge_sha256: dict[str, str] = field(
        default_factory=lambda: dict(MINIFORGE_SHA256),
        hash=False,
        metadata=_meta("sha256 of the installer per architecture (x86_64, aarch64)"),
    )
    # NVIDIA repository
    nvidia_repo_url: str = _key(
        "https://developer.download.nvidia.com/compute/cuda/repos",
        "base URL of NVIDIA's CUDA apt repository (or a mirror)",
        secret=True,
    )
    nvidia_repo_key_url: str | None = _key(
        None,
        "repository signing key URL; unset: <repo>/<distro>/<arch>/3bf863cc.pub",
        secret=True,
    )
    nvidia_repo_key_fingerprint: str = _key(
        NVIDIA_REPO_KEY_FINGERPRINT, "fingerprint the downloaded signing key must have"
    )
    apt_timeout_s: int = _key(120, "s an apt request may go unanswered (1 retry); update: 4x")
    apt_proxy: str | None = _key(
        None, "HTTP proxy for apt, e.g. http://user:pw@proxy:3128 (kept secret)", secret=True
    )
    cache_os_archive: bool = _key(True, "apt's OS archive through the fleet cache too")
    cache_fallback_direct: bool = _key(False, "go to upstream when the fleet cache is down")
    cache_upstream_proxy: str | None = _key(None, "HTTP proxy of the cache's apt-cacher-ng")
    # Driver changes, reboots, Secure Boot
    reboot: str = _key(
        "auto",
        "reboot policy: auto only when needed, never (report it), always",
        ("auto", "never", "always"),
    )
    reboot_timeout_s: int = _key(600, "seconds to wait for a rebooted host to come back")
    force_driver_change: bool = _key(False, "change the driver even while GPU processes run")
    replace_foreign_driver: bool = _key(
        False, "remove a runfile or other-branch driver instead of refusing"
    )
    secure_boot_plan: str = _key(
        "none", "module signing when Secure Boot is on", ("none", "ubuntu-signed", "mok")
    )
    mok_key_path: str | None = _key(None, "MOK private key signing modules (plan mok)")
    mok_cert_path: str | None = _key(None, "MOK certificate (DER) enrolled (plan mok)")
    kernel_headers_package: str = _key(
        "auto", "headers metapackage; auto: from the running kernel's flavour"
    )
    min_free_disk_gib: int = _key(
        25, "free GiB needed on each filesystem the deploy writes to (/, apt cache, env, payload)"
    )
    deploy_stamp: bool = _key(True, "skip planning a host while its last empty plan still holds")
    # Hardware expectations
    gpu_count: int | None = _key(None, "expected number of GPUs; unset: whatever is found")
    gpu_less: bool = _key(False, "host has no GPU on purpose (CPU-only)")
    # Validation and monitoring
    payload_dir: str = _key("/opt/gpufleet/validation", "where validation workloads are installed")
    results_dir: str = _key("/var/lib/gpufleet/results", "where result JSON documents are kept")
    periodic_checks: bool = _key(True, "install the periodic drift/health checks timer")
    periodic_schedule: str = _key("daily", "systemd OnCalendar= of the periodic checks")
    node_exporter: bool = _key(False, "write Prometheus textfile metrics")
    textfile_dir: str = _key(
        "/var/lib/prometheus/node-exporter", "node-exporter textfile collector directory"
    )
    # The cluster tier (gpufleet validate --tier cluster)
    interconnect_gbps: int = _key(
        10, "host-to-host link speed in Gbit/s the cluster tier judges iperf3 against"
    )
    cluster_address: str | None = _key(
        None, "address the other hosts reach this one at (TF workers, iperf3); unset: ssh host"
    )
    nccl_tests_mpi: bool = _key(
        False, "also build nccl-tests with MPI (<nccl-tests dir>-mpi): the cluster tier's NCCL part"
    )
    nccl_fabric_gbps: int | None = _key(
        None, "GPU fabric per host in Gbit/s (all NICs NCCL uses); unset: interconnect_gbps"
    )
    nccl_transport: str = _key(
        "auto", "NCCL's transport between hosts; auto: any", ("auto", "ib", "efa", "socket")
    )
    nccl_socket_ifname: str | None = _key(None, "NCCL_SOCKET_IFNAME for the cluster tier's NCCL")
    nccl_ib_hca: str | None = _key(None, "NCCL_IB_HCA for the cluster tier's NCCL, e.g. 'mlx5'")
    # Scheduler (gpufleet.scheduler): health check drains, validate and rollout drain/resume
    scheduler: str = _key("none", "the fleet's scheduler", ("none", "slurm"))
    slurm_controller: str | None = _key(None, "slurmctld's host name or address")
    slurm_health_interval: int = _key(300, "Slurm HealthCheckInterval (s) of the health check")
    slurm_partition: str | None = _key(
        None, "partition the cluster tier's srun jobs go to; unset: Slurm's default partition"
    )
    slurm_reservation: str | None = _key(None, "reservation validate's Slurm jobs run in")
    slurm_constraint: str | None = _key(None, "node features validate's Slurm jobs require")
    slurm_spool_dir: str = _key("/var/lib/gpufleet/slurm-validate", "validate jobs' results")
    thresholds: dict[str, Any] = field(
        default_factory=dict, hash=False, metadata=_meta("validation threshold overrides by name")
    )
    calibration_file: str | None = _key(None, "control-node calibration TOML: full-tier floors")

    @classmethod
    def from_host_data(cls, data: Mapping[str, Any]) -> NodeSpec:
        """Build a NodeSpec from host data, refusing unknown keys, bad types and bad values."""
        return from_host_data(data)

    @property
    def nccl_tests_dir(self) -> str:
        """Where nccl-tests is built, one folder per source archive:
        ``/opt/gpufleet/nccl-tests/38974e703421``."""
        return f"/opt/gpufleet/nccl-tests/{self.nccl_tests_sha256[:12]}"

    @property
    def conda_root(self) -> str:
        """The Miniforge installation: ``/opt/gpufleet/miniforge3``."""
        return f"{self.env_prefix}/miniforge3"

    @property
    def env_dir(self) -> str:
        """The Python environment's directory on the host."""
        if self.python_env == "conda":
            return f"{self.conda_root}/envs/{self.env_name}"
        return f"{self.env_prefix}/venvs/{self.env_name}"

    @property
    def venv_interpreter(self) -> str | None:
        """The system interpreter a plain venv is built on (``python3``); None for conda/uv."""
        if self.python_env != "venv" or self.use_uv:
            return None
        return self.python_interpreter or "python3"

    @property
    def python_bin(self) -> str:
        return f"{self.env_dir}/bin/python"

    def miniforge_installer_url(self, machine: str) -> str:
        """The installer URL for a host's ``uname -m``."""
        if self.miniforge_url:
            return self.miniforge_url
        return MINIFORGE_URL.format(version=self.miniforge_version, arch=machine)

    def miniforge_installer_url_hidden(self, machine: str) -> HiddenValue | str:
        """``miniforge_installer_url``, a ``HiddenValue`` when it carries a login or query."""
        url = self.miniforge_installer_url(machine)
        return urls.hidden(url) or url

    @property
    def apt_proxy_hidden(self) -> HiddenValue | str | None:
        """apt_proxy rebuilt from its parts (``urls.proxy_url``), hidden if it has a login."""
        return urls.hidden(urls.proxy_url(self.apt_proxy)) if self.apt_proxy else None

    @property
    def pip_index_url_hidden(self) -> HiddenValue | str | None:
        """pip_index_url, a ``HiddenValue`` when it carries a login or a query (a token)."""
        return urls.hidden(self.pip_index_url)

    def resolve(
        self, *, os_id: str, os_version: str, arch: str, gpu_device_ids: Sequence[str]
    ) -> matrix.Resolution:
        """``matrix.resolve`` with this spec's versions; raises ``matrix.MatrixError``."""
        uses_python_version = self.python_env == "conda" or self.use_uv
        return matrix.resolve(
            self.tf_version,
            os_id=os_id,
            os_version=os_version,
            arch=arch,
            gpu_device_ids=() if self.gpu_less else gpu_device_ids,
            driver_branch=self.driver_branch,
            cuda_version=self.cuda_version,
            kernel_module_flavor=self.kernel_module_flavor,
            python_version=self.python_version if uses_python_version else None,
            require_cuda_build=self.require_cuda_build,
        )


FIELDS = {f.name: f for f in dataclasses.fields(NodeSpec)}
_DEFAULTS = NodeSpec()
KEY_DOCS: dict[str, str] = {name: f.metadata["doc"] for name, f in FIELDS.items()}
_TYPES = typing.get_type_hints(NodeSpec)


def defaults() -> dict[str, Any]:
    """Every key with its default value."""
    return {name: getattr(_DEFAULTS, name) for name in FIELDS}


def is_ignored_key(key: str) -> bool:
    """Keys gpufleet leaves alone: pyinfra's own and the user's ``x_`` keys."""
    return key.startswith(PYINFRA_KEY_PREFIXES) or key.startswith(USER_KEY_PREFIX)


def _unknown_key_error(key: str) -> SpecError:
    close = difflib.get_close_matches(key, list(FIELDS), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return SpecError(
        f"unknown inventory key {key!r}.{hint} Fix: use one of the documented keys "
        f"(docs/reference/inventory-keys.md), or prefix keys of your own with {USER_KEY_PREFIX!r}."
    )


def _show(key: str, value: Any) -> str:
    if key in urls.URL_KEYS and isinstance(value, str):
        return repr(urls.redacted(value))  # login and query hidden, the rest helps the fix
    return "'***'" if FIELDS[key].metadata["secret"] else repr(value)


def _field_errors(key: str, value: Any) -> list[str]:
    hint = _TYPES[key]
    if not type_ok(value, hint):
        fix = f"give {type_name(hint)} (default {_default_repr(key)})"
        if isinstance(value, (int, float)) and type_ok("x", hint):
            # `pyinfra --data python_version=3.10` parses the value as JSON: the float 3.1
            fix = f"quote it, e.g. {key} = '{value}' (on the command line: --data '{key}=\"...\"')"
        return [
            f"{key} = {_show(key, value)} has the wrong type ({type(value).__name__}); expected "
            f"{type_name(hint)}. Fix: {fix}."
        ]
    choices = FIELDS[key].metadata["choices"]
    if choices and value not in choices:
        return [
            f"{key} = {value!r} is not one of {', '.join(choices)}. Fix: set {key} to one of "
            f"them (default {_default_repr(key)})."
        ]
    return value_errors(key, value, _show(key, value))


def _default_repr(key: str) -> str:
    return repr(getattr(_DEFAULTS, key))


def from_host_data(data: Mapping[str, Any]) -> NodeSpec:
    """Validate host data into a NodeSpec; every problem found is reported in one SpecError."""
    errors: list[str] = []
    values: dict[str, Any] = {}
    for key, value in data.items():
        if is_ignored_key(key):
            continue
        if key not in FIELDS:
            errors.append(str(_unknown_key_error(key)))
            continue
        found = _field_errors(key, value)
        errors.extend(found)
        if not found:
            values[key] = value
    if not errors:
        spec = NodeSpec(**values)
        errors.extend(combination_errors(spec))
    if errors:
        if len(errors) == 1:
            raise SpecError(errors[0])
        raise SpecError(
            f"{len(errors)} inventory problems:\n" + "\n".join(f"  - {e}" for e in errors)
        )
    return spec


_CACHE: dict[str, tuple[dict[str, Any], NodeSpec]] = {}


def spec_for_host(host: Any) -> NodeSpec:
    """The NodeSpec of a pyinfra host, built once per host name (and rebuilt if its data changed).

    Example: ``spec = spec_for_host(host)`` in a ``@deploy``; raises ``SpecError``.
    """
    data = host.data.dict() if hasattr(host.data, "dict") else dict(host.data)
    cached = _CACHE.get(host.name)
    if cached is not None and cached[0] == data:
        return cached[1]
    try:
        spec = from_host_data(data)
    except SpecError as exc:
        raise SpecError(f"host {host.name}: {exc}") from None
    _CACHE[host.name] = (data, spec)
    return spec


def _table() -> str:
    rows = [(name, _default_repr(name), KEY_DOCS[name]) for name in FIELDS]
    return key_table(
        [(n, "MINIFORGE_SHA256" if n == "miniforge_sha256" else d, doc) for n, d, doc in rows]
    )


NodeSpec.__doc__ = (NodeSpec.__doc__ or "").replace("{KEY_TABLE}", _table().replace("\n", "\n    "))

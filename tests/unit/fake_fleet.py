"""@fake hosts for whole-deploy plan tests: canned answers to gpufleet's probe and pyinfra's facts.

A ``FakeGpuHost`` describes a machine (OS, kernel, PCI devices, what is installed); its
``data()`` is pyinfra host data for the ``@fake`` connector, whose ``fake_responses`` answer
each fact command by substring. A provisioned host answers as a host that a previous run
completed, so its plan must hold no change.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from gpufleet import __version__, matrix
from gpufleet.matrix import locks
from gpufleet.matrix.dcgm import DCGM_SERVICE, dcgm_unsupported_reason
from gpufleet.operations.kernel import blacklist_text
from gpufleet.operations.xla_cache import marker_text
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.stages import driver as driver_stage
from gpufleet.stages import host_config, monitoring
from gpufleet.stages import nccl_tests as nccl_tests_stage
from gpufleet.stages import nvidia_repo as repo_stage
from gpufleet.stages import python_env as env_stage
from gpufleet.stages.cluster_tools import cluster_packages
from gpufleet.stages.host_probe import DRIVER_MARKER, DRIVER_PACKAGE_PATTERNS
from gpufleet.stages.node import disk_paths
from gpufleet.stages.validation_payload import payload_archive, payload_paths
from gpufleet.templates import render
from validation.workloads import xla_cache

PROBE = "##gpufleet-probe:"
A100 = "20b2"  # NVIDIA A100-SXM4-80GB
H100 = "2330"  # NVIDIA H100 80GB HBM3 (SXM)
V100 = "1db4"  # Tesla V100-PCIE-16GB
NVSWITCH_A100 = "1af1"
NVSWITCH_H100 = "22a3"
MODULE_STATE = "echo loaded=$(cat /sys/module/nvidia/version"
NO_MARKER = "-"  # FakeGpuHost.xla_marker: the warm-up never completed (no marker file)

OS_RELEASE = {
    ("ubuntu", "20.04"): "Ubuntu 20.04.6 LTS",
    ("ubuntu", "22.04"): "Ubuntu 22.04.4 LTS",
    ("ubuntu", "24.04"): "Ubuntu 24.04.1 LTS",
    ("debian", "12"): "Debian GNU/Linux 12 (bookworm)",
    ("centos", "7"): "CentOS Linux 7 (Core)",
}


@dataclass
class FakeGpuHost:
    """One machine as gpufleet's probe and pyinfra's facts would see it."""

    os_id: str = "ubuntu"
    os_version: str = "22.04"
    arch: str = "x86_64"
    kernel: str = "5.15.0-91-generic"
    gpus: tuple[str, ...] = (A100,) * 8
    nvswitches: tuple[str, ...] = ()
    secure_boot: bool | None = False
    packages: dict[str, str] = field(default_factory=dict)
    marker_branch: int | None = None
    loaded_driver: str | None = None
    nouveau: bool = False
    runfile: bool = False
    gpu_processes: tuple[str, ...] = ()
    free_gib: int = 500
    # Path of the deploy -> (free GiB, mount point) where it is not on / (free_gib).
    mounts: dict[str, tuple[int, str]] = field(default_factory=dict)
    dpkg_audit: tuple[str, ...] = ()  # what `dpkg --audit` prints (an interrupted dpkg)
    env_problems: tuple[str, ...] = ()  # what EnvProblems finds in a provisioned env
    provisioned: bool = False
    # A provisioned host booted into a kernel its DKMS build skipped: no NVIDIA module at all.
    module_missing: bool = False
    unheld: tuple[str, ...] = ()  # packages a completed run held, released since
    repo_signer: str = ""  # RepositorySigner's answer, e.g. "other FPR" (default: the pinned key)
    # What a provisioned GPU host's XLA warm-up marker holds (default: this run's marker;
    # NO_MARKER: none, another text: an older TensorFlow's or payload's).
    xla_marker: str | None = None
    # The probe's configuration sections (gpufleet.stages.host_config), each "##gpufleet-probe:
    # NAME" line followed by what the host printed there: foreign sources, pins, overrides...
    config_lines: tuple[str, ...] = ()
    inventory: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> NodeSpec:
        return NodeSpec.from_host_data(self.inventory)

    def resolution(self) -> matrix.Resolution:
        return self.spec().resolve(
            os_id=self.os_id,
            os_version=self.os_version,
            arch=self.arch,
            gpu_device_ids=[*self.gpus, *self.nvswitches],
        )

    def data(self, host_name: str = "") -> dict[str, Any]:
        """pyinfra host data; ``host_name`` (``@fake/NAME``) is needed for a provisioned host,
        whose periodic checks' expectations file names it."""
        responses: dict[str, Any] = {}
        packages = dict(self.packages)
        marker, loaded = self.marker_branch, self.loaded_driver
        if self.provisioned:
            resolution = self.resolution()
            # What a completed run installed, then whatever this host was given on top.
            packages = {**_driver_packages(resolution, bool(self.nvswitches)), **packages}
            marker, loaded = resolution.driver_branch, resolution.driver_version
            loaded = None if self.module_missing else loaded
            responses.update(self._provisioned_responses(resolution, packages, host_name))
        else:
            responses["dpkg -l"] = [f"ii  {n}  {v}  amd64  -" for n, v in packages.items()]
            responses[MODULE_STATE] = [
                f"loaded={loaded or ''}",
                f"installed={loaded or ''}",
                f"nouveau={'yes' if self.nouveau else 'no'}",
            ]
        held = responses.get("apt-mark showhold", [])
        responses = {
            # FileDigests (several files in one round trip) answers from the same files.
            "gpufleet-digests": digests_answer(responses),
            PROBE: self._probe(packages, marker, loaded, held),
            **responses,
        }
        return {
            **self.inventory,
            "fake_delay": 0,
            "fake_delay_jitter": 0,
            "fake_responses": responses,
        }

    def _probe(
        self, packages: dict[str, str], marker: int | None, loaded: str | None, held: list[str]
    ) -> list[str]:
        name = OS_RELEASE[(self.os_id, self.os_version)]
        lines = [f"{PROBE}os", f"ID={self.os_id}", f'VERSION_ID="{self.os_version}"']
        lines += [f'PRETTY_NAME="{name}"', f"{PROBE}arch", self.arch, f"{PROBE}kernel", self.kernel]
        lines.append(f"{PROBE}pci")
        lines += [f"0000:{0x10 + i:02x}:00.0 0x030200 0x{d}" for i, d in enumerate(self.gpus)]
        lines += [f"0000:{0x80 + i:02x}:00.0 0x068000 0x{d}" for i, d in enumerate(self.nvswitches)]
        lines.append(f"{PROBE}secure_boot")
        if self.secure_boot is not None:
            lines.append("1" if self.secure_boot else "0")
        lines += [f"{PROBE}loaded", *([loaded] if loaded else [])]
        lines += [f"{PROBE}installed_module", *([loaded] if loaded else [])]
        lines += [f"{PROBE}nouveau", *(["loaded"] if self.nouveau else [])]
        lines += [f"{PROBE}runfile", *(["/usr/bin/nvidia-uninstall"] if self.runfile else [])]
        lines.append(f"{PROBE}packages")
        lines += [f"ii  {name} {version}" for name, version in probe_packages(packages).items()]
        lines += [f"{PROBE}held", *held]
        lines += [f"{PROBE}marker", *([str(marker)] if marker else [])]
        lines += [f"{PROBE}gpu_processes", *self.gpu_processes]
        lines.append(f"{PROBE}disk")
        try:
            paths = disk_paths(self.spec())
        except SpecError:  # hosts whose inventory the deploy must refuse
            paths = disk_paths(NodeSpec())
        for path in paths:
            gib, mount = self.mounts.get(path, (self.free_gib, "/"))
            lines.append(f"{path}\t/dev/nvme0n1p2 976762584 1000 {gib * 1024 * 1024} 1% {mount}")
        lines += [f"{PROBE}dpkg", *self.dpkg_audit]
        lines += [f"{PROBE}env", *(["present"] if self.provisioned else [])]
        return [*lines, *self.config_lines]

    def _gets_dcgm(self, spec: NodeSpec, resolution: matrix.Resolution) -> bool:
        """What the dcgm stage decides for this host (its GPUs, distro and ``dcgm`` key)."""
        if spec.dcgm == "off" or dcgm_unsupported_reason(resolution.repo_distro):
            return False
        models = [matrix.gpu_by_device_id(d) for d in self.gpus]
        return spec.dcgm == "on" or any(m and not m.is_nvswitch for m in models)

    def _gets_nccl_tests(self, spec: NodeSpec) -> bool:
        """What the nccl_tests stage decides for this host (GPU count and keys)."""
        if spec.nccl_tests == "off" or not (spec.install_cuda_toolkit and spec.install_nccl):
            return False
        return spec.nccl_tests == "on" or len(self.gpus) >= 2

    def _provisioned_responses(
        self, resolution: matrix.Resolution, driver_packages: dict[str, str], host_name: str
    ) -> dict[str, Any]:
        spec = self.spec()
        responses: dict[str, Any] = {}
        managed = _managed_files(self, spec, resolution)
        if spec.periodic_checks:
            if not host_name:
                raise ValueError("a provisioned FakeGpuHost needs its host name: data('@fake/x')")
            managed.update(_periodic_files(spec, host_name))
        for path, (text, mode) in managed.items():
            digest = hashlib.sha256(text.encode()).hexdigest()
            responses[f"stat -c %a {path}"] = [mode, f"{digest}  {path}"]
        responses[f"--show-keys {repo_stage.KEYRING}"] = [spec.nvidia_repo_key_fingerprint]
        responses["gpufleet-signer"] = [
            self.repo_signer or f"good {spec.nvidia_repo_key_fingerprint}"
        ]

        installed = {"ca-certificates": "20230311", "curl": "7.81.0-1", "gnupg": "2.2.27-3"}
        installed.update({"dkms": "2.8.7-2", "python3": "3.10.6-1", "python3-venv": "3.10.6-1"})
        headers = driver_stage.headers_packages(
            self.os_id, self.os_version, self.kernel, spec.kernel_headers_package
        )
        installed.update({name: "5.15.0-91.101" for name in headers})
        installed.update(driver_packages)
        units = ["nvidia-persistenced.service", "nvidia-fabricmanager.service"]
        if spec.periodic_checks:
            units.append(monitoring.TIMER)
            if spec.node_exporter:
                installed[monitoring.NODE_EXPORTER] = "1.3.1-1"
                units.append(f"{monitoring.NODE_EXPORTER}.service")
        installed[resolution.cuda_toolkit_package] = f"{resolution.cuda}.1-1"
        tools, _pinned = cluster_packages(self.os_id, self.os_version)  # the cluster tier's
        installed.update({n: v or "1.0-1" for n, _, v in (t.partition("=") for t in tools)})
        fabric = set(resolution.fabric_packages)  # held with or without a pinning package
        held = [n for n in driver_packages if resolution.pinning_package is None or n in fabric]
        if self._gets_nccl_tests(spec):
            installed.update({tool: "1.0-1" for tool in nccl_tests_stage.BUILD_TOOLS})
            responses[f"if [ -e {spec.nccl_tests_dir}/bin/all_reduce_perf ]"] = ["yes"]
        dcgm = list(resolution.dcgm_packages) if self._gets_dcgm(spec, resolution) else []
        if dcgm:
            units.append(f"{DCGM_SERVICE}.service")
        for spec_string in [*resolution.cudnn_packages, *resolution.nccl_packages, *dcgm]:
            name, _, version = spec_string.partition("=")
            installed[name] = version or "1.0-1"
            held.append(name)
        responses["dpkg -l"] = [f"ii  {n}  {v}  amd64  stand-in" for n, v in installed.items()]
        responses["apt-mark showhold"] = sorted(set(held) - set(self.unheld))
        version = resolution.driver_version
        responses[MODULE_STATE] = [
            f"loaded={version}",
            f"installed={version}",
            "nouveau=no",
        ]
        for unit in units:
            state = "waiting" if unit.endswith(".timer") else "running"
            responses[f"SubState {unit}"] = [f"Id={unit}", f"SubState={state}"]
            responses[f"UnitFileState {unit}"] = [f"Id={unit}", "UnitFileState=enabled"]
        dest, _ = payload_paths(spec.payload_dir)
        responses[f"cat {dest}/.gpufleet-payload"] = [
            f"digest={hashlib.sha256(payload_archive()).hexdigest()}",
            f"link={__version__}",
        ]
        stamp = f"{spec.env_dir}/etc/gpufleet/installed.txt"
        lock = locks.lock_text(spec.tensorflow_package, resolution.tf_version)
        responses[f"cat {stamp}"] = [
            f"requirement {spec.tensorflow_package}=={resolution.tf_version}",
            f"lock-sha256 {hashlib.sha256(lock.encode()).hexdigest()}",
        ]
        # EnvProblems' script (run by the env's python) reads pip's RECORD files.
        responses["importlib.metadata as md"] = [*self.env_problems, "gpufleet-env: checked"]
        for path in (f"{spec.conda_root}/bin/conda", f"{spec.env_dir}/bin/python"):
            responses[f"if [ -e {path} ]"] = ["yes"]
        return responses


def probe_packages(installed: dict[str, str]) -> dict[str, str]:
    """What the probe's ``dpkg-query -W PATTERN...`` lists of ``installed``: the packages a
    pattern matches (dpkg matches package names with fnmatch, case-sensitive)."""
    return {
        name: version
        for name, version in installed.items()
        if any(fnmatchcase(name, pattern) for pattern in DRIVER_PACKAGE_PATTERNS)
    }


def _driver_packages(resolution: matrix.Resolution, nvswitch: bool) -> dict[str, str]:
    names = list(resolution.driver_packages)
    if nvswitch:
        names += resolution.fabric_packages
    packages = {name: f"{resolution.driver_version}-1" for name in names}
    if resolution.pinning_package:
        # NVIDIA's pinning packages are versioned by the branch alone (SOURCES.md of the
        # sandbox stand-ins: nvidia-driver-pinning-610=610-2ubuntu1).
        packages[resolution.pinning_package] = f"{resolution.driver_branch}-1ubuntu1"
    return packages


def _managed_files(
    fake: FakeGpuHost, spec: NodeSpec, resolution: matrix.Resolution
) -> dict[str, tuple[str, str]]:
    """Path -> (content, mode) of every file a completed run leaves."""
    uri = repo_stage.source_uri(spec, resolution.repo_distro, resolution.repo_arch)
    env_file = env_stage.env_file(spec)
    managed = {
        host_config.SOURCES: (
            render(
                "nvidia-cuda.sources.j2",
                uri=uri,
                keyring=repo_stage.KEYRING,
                distro=resolution.repo_distro,
                arch=resolution.repo_arch,
            ),
            "644",
        ),
        host_config.NOUVEAU_BLACKLIST: (blacklist_text("nouveau"), "644"),
        host_config.DISTRO_DRIVER_BLOCK: (
            render(
                "distro-nvidia-driver.pref.j2",
                origin=driver_stage.ARCHIVE_ORIGINS[fake.os_id],
            ),
            "644",
        ),
        DRIVER_MARKER: (f"{resolution.driver_branch}\n", "644"),
        driver_stage.UNATTENDED_UPGRADES: (
            render("unattended-upgrades-nvidia.conf.j2", prefixes=driver_stage.UPGRADE_BLACKLIST),
            "644",
        ),
        env_file: (render("gpufleet-env.sh.j2", env_dir=spec.env_dir), "644"),
        f"{spec.env_dir}/etc/conda/activate.d/gpufleet.sh": (
            render("conda-activate.sh.j2", env_dir=spec.env_dir, env_file=env_file),
            "644",
        ),
        env_stage.WRAPPER: (
            render("gpufleet-python.j2", env_dir=spec.env_dir, env_file=env_file),
            "755",
        ),
        f"{spec.env_dir}/etc/gpufleet/requirements.lock.txt": (
            locks.lock_text(spec.tensorflow_package, resolution.tf_version),
            "644",
        ),
    }
    if fake.gpus and not spec.gpu_less and fake.xla_marker != NO_MARKER:
        marker = fake.xla_marker or warm_marker(spec, resolution, fake.gpus)
        managed[f"{xla_cache.ROOT_DIRECTORY}/{xla_cache.MARKER}"] = (f"{marker}\n", "644")
    if resolution.pinning_package is None:
        managed[host_config.DRIVER_PREFERENCES] = (
            render("nvidia-driver.pref.j2", branch=resolution.driver_branch),
            "644",
        )
    return managed


def warm_marker(spec: NodeSpec, resolution: matrix.Resolution, gpus: tuple[str, ...]) -> str:
    """The marker the XLA warm-up stage expects on a host with these GPUs, in this run."""
    payload = hashlib.sha256(payload_archive()).hexdigest()
    return marker_text(f"{spec.tensorflow_package}=={resolution.tf_version}", payload, gpus)


def _periodic_files(spec: NodeSpec, host_name: str) -> dict[str, tuple[str, str]]:
    """Path -> (content, mode) of what the monitoring stage's periodic checks leave."""
    units = monitoring.unit_texts(spec, textfile=spec.node_exporter)
    files = {path: (text, "644") for path, text in units.items() if text is not None}
    files[monitoring.EXPECTATIONS] = (monitoring.expectations_text(host_name, spec), "644")
    if (
        spec.node_exporter
        and spec.textfile_dir.rstrip("/") != monitoring.NODE_EXPORTER_TEXTFILE_DIR
    ):
        flag = f"--collector.textfile.directory={spec.textfile_dir}"
        files[host_config.NODE_EXPORTER_DROPIN] = (
            render(
                "periodic/node-exporter-textfile.conf.j2",
                textfile_dir=spec.textfile_dir,
                textfile_flag=monitoring.systemd_quote(flag),
            ),
            "644",
        )
    return files


def digests_answer(responses: dict[str, Any]) -> list[str]:
    """What ``FileDigests`` prints for the files the ``FileDigest`` answers describe."""
    lines = []
    for key, answer in responses.items():
        if isinstance(key, str) and key.startswith("stat -c %a ") and len(answer) == 2:
            path = key.removeprefix("stat -c %a ")
            lines.append(f"{path}\t{answer[0]}\t{answer[1].split()[0]}")
    return lines


def write_inventory(path: Path, hosts: dict[str, FakeGpuHost]) -> Path:
    """A pyinfra inventory file with one ``@fake/<name>`` host per entry."""
    lines = [
        '"""Generated by tests/unit/fake_fleet.py: @fake GPU hosts."""',
        "import re  # noqa: F401",
        "",
        "fleet = [",
    ]
    for name, fake in hosts.items():
        host_name = f"@fake/{name}"
        lines.append(f"    ({host_name!r}, {fake.data(host_name)!r}),")
    lines.append("]")
    path.write_text("\n".join(lines) + "\n")
    return path


def root() -> Path:
    return Path(__file__).resolve().parents[2]

"""Faults of issue 11 as unit and @fake tests: an interrupted dpkg, a damaged environment, a
full filesystem off /, two deploys at once, apt's retry, holds, a host lost or not back."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpufleet.drift.sentences import sentence_for
from gpufleet.operations import connection, kernel
from gpufleet.operations.env_check import _ENV_CHECK, EnvProblems
from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import HostState, PciDevice, parse_probe
from gpufleet.stages.node import NodePlan
from gpufleet.stages.preflight import refusals
from tests.unit.deploy_plan_fleet import run_pyinfra
from tests.unit.fake_fleet import FakeGpuHost, write_inventory

S = "##gpufleet-probe:"
AUDIT = (
    "The following packages have been unpacked but not yet configured.",
    "libtsan2:amd64              GNU Compiler Collection (GCC) thread sanitizer",
)


# --- 1. dpkg interrupted -------------------------------------------------------------------


def test_probe_reads_an_interrupted_dpkg():
    # dpkg --audit's wording as dpkg 1.21 prints it (faults.md, fault 2).
    clean = parse_probe([f"{S}os", "ID=ubuntu", f"{S}dpkg"])
    broken = parse_probe([f"{S}os", "ID=ubuntu", f"{S}dpkg", *AUDIT])
    assert not clean.dpkg_interrupted
    assert broken.dpkg_interrupted
    assert broken.dpkg_problems == AUDIT


@pytest.fixture(scope="module")
def fault_plan(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    hosts = {
        "dpkg-broken": FakeGpuHost(dpkg_audit=AUDIT),
        "done-dpkg-broken": FakeGpuHost(provisioned=True, dpkg_audit=AUDIT),
        "done-tf-deleted": FakeGpuHost(
            provisioned=True, env_problems=("broken tensorflow 1840 tensorflow/__init__.py",)
        ),
        "nouveau": FakeGpuHost(nouveau=True),
        "env-on-small-fs": FakeGpuHost(
            mounts={
                "/opt/gpufleet": (1, "/opt/gpufleet"),
                "/opt/gpufleet/validation": (1, "/opt/gpufleet"),
            }
        ),
    }
    inventory = write_inventory(tmp_path_factory.mktemp("faults") / "inventory.py", hosts)
    result = run_pyinfra(inventory, "--dry", "--json")
    return result, json.loads(result.stdout)["plan"]


def _changes(plan: list[dict], host: str) -> list[str]:
    return [
        op["name"]
        for op in plan
        if f"@fake/{host}" in op["hosts_with_change"] + op["hosts_with_conditional_change"]
    ]


def test_dpkg_repair_comes_before_the_first_apt_operation(fault_plan):
    _, plan = fault_plan
    ops = _changes(plan, "dpkg-broken")
    repair = "gpufleet run_start | dpkg repaired (an interrupted dpkg finished before apt runs)"
    assert ops[0] == repair, ops
    # On a provisioned host it is the one change, and drift says what it means.
    assert _changes(plan, "done-dpkg-broken") == [repair]
    assert sentence_for(repair).startswith("dpkg was interrupted")


# --- 2, 3. the environment's real state ---------------------------------------------------


def test_a_deleted_package_shows_in_the_plan_despite_the_stamp(fault_plan):
    _, plan = fault_plan
    ops = _changes(plan, "done-tf-deleted")
    assert ops == [
        "gpufleet python_env | pip install TensorFlow from the hashed lock (--require-hashes), "
        "check it imports"
    ]
    assert "damaged" in sentence_for(ops[0])


def _fake_env(tmp_path: Path, files: dict[str, bytes], recorded: dict[str, int]) -> str:
    """A real venv (no pip) holding one hand-made distribution, ``demo-pkg 1.0``."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    info = site / "demo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    for name, data in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    rows = [f"{name},,{size}" for name, size in recorded.items()]  # sizes only: no hashes
    (info / "RECORD").write_text("\n".join([*rows, "demo_pkg-1.0.dist-info/RECORD,,"]) + "\n")
    return str(env / "bin" / "python")


def _check(python: str, *requirements: str) -> list[str]:
    command = EnvProblems().command(python=python, requirements=list(requirements))
    output = subprocess.run(
        ["sh", "-c", command.get_raw_value()], capture_output=True, text=True, check=True
    ).stdout
    return EnvProblems().process(output.splitlines())


def test_env_check_finds_missing_and_truncated_files(tmp_path):
    files = {"demo/__init__.py": b"x = 1\n", "demo/core.py": b"y = 2\n"}
    sizes = {name: len(data) for name, data in files.items()}
    python = _fake_env(tmp_path, files, sizes)
    assert _check(python, "demo-pkg==1.0") == []
    assert _check(python, "demo_pkg==2.0") == ["version demo-pkg 1.0"]
    assert _check(python, "absent==1.0") == ["missing absent"]
    site = next(Path(python).parents[1].glob("lib/python3*/site-packages"))
    (site / "demo" / "core.py").write_bytes(b"y")  # cut off mid-write (ENOSPC)
    assert _check(python, "demo-pkg==1.0") == ["broken demo-pkg 1 demo/core.py"]
    (site / "demo" / "core.py").unlink()
    (site / "demo" / "__init__.py").unlink()  # rm -rf site-packages/demo
    assert _check(python, "demo-pkg==1.0") == ["broken demo-pkg 2 demo/__init__.py"]


def test_env_check_without_python_is_a_problem(tmp_path):
    assert _check(str(tmp_path / "none" / "python"), "tensorflow==2.21.0") == [
        "gpufleet-env: no python"
    ]
    assert "import" in _ENV_CHECK


# --- 11. free disk on every path ------------------------------------------------------------


def test_preflight_names_the_short_filesystem(fault_plan):
    result, plan = fault_plan
    lines = [
        line
        for line in result.stderr.splitlines()
        if "@fake/env-on-small-fs]" in line and "refused" in line
    ]
    assert lines, result.stderr[-3000:]
    assert (
        "1.0 GiB free on /opt/gpufleet (holding /opt/gpufleet, /opt/gpufleet/validation)"
        in lines[0]
    )
    assert "Fix:" in lines[0]
    assert _changes(plan, "env-on-small-fs") == []


def test_preflight_passes_when_every_path_has_room():
    spec = NodeSpec.from_host_data({})
    free = {p: (10**9, "/") for p in ("/", "/var/cache/apt", spec.env_prefix, spec.payload_dir)}
    state = HostState(
        os_id="ubuntu",
        os_version="22.04",
        arch="x86_64",
        kernel="5.15.0-91-generic",
        pci=(PciDevice("0000:18:00.0", "0302", "20b2"),),
        free_disk=free,
    )
    resolution = spec.resolve(
        os_id="ubuntu", os_version="22.04", arch="x86_64", gpu_device_ids=state.device_ids
    )
    assert refusals(NodePlan(spec=spec, state=state, resolution=resolution)) == []
    tight = {**free, "/var/cache/apt": (1024, "/var")}
    plan = NodePlan(
        spec=spec, state=HostState(**{**state.__dict__, "free_disk": tight}), resolution=resolution
    )
    assert any("on /var (holding /var/cache/apt)" in r for r in refusals(plan))


def test_preflight_refuses_a_host_not_booted_with_systemd():
    # review §3 row 8: a container failed later, on pyinfra's systemd fact, with no fix
    spec = NodeSpec.from_host_data({"gpu_less": True})
    booted = parse_probe([f"{S}os", "ID=ubuntu", f"{S}systemd"])
    container = parse_probe([f"{S}os", "ID=ubuntu", f"{S}systemd", "absent"])
    assert booted.systemd_booted and not container.systemd_booted
    plan = NodePlan(spec=spec, state=container, resolution=None)
    (reason,) = refusals(plan)
    assert reason.startswith("not booted with systemd (no /run/systemd/system: a container")
    assert "Fix: provision a VM or bare-metal host booted with systemd" in reason


# --- 7. the reboot comes last, but for the XLA warm-up that needs the driver it boots -----


def test_reboot_is_the_last_operation_but_for_the_xla_warm_up(fault_plan):
    _, plan = fault_plan
    ops = _changes(plan, "nouveau")
    assert ops[-2:] == [
        "gpufleet run_end | reboot if the running driver is not the installed one (reboot policy)",
        "gpufleet xla_warm_up | XLA's compile cache warmed: every compiled step of the quick and "
        "full tiers",
    ]
    assert any(op.startswith("gpufleet monitoring") for op in ops[:-2])


# --- 10. holds with the install ----------------------------------------------------------


def test_each_package_group_is_held_before_the_next_install(fault_plan):
    _, plan = fault_plan
    ops = [op.split(" | ")[-1] for op in _changes(plan, "dpkg-broken")]
    cudnn = ops.index("cuDNN runtime and dev, pinned")
    nccl = ops.index("NCCL runtime and dev, pinned")
    cudnn_holds = [
        i for i, op in enumerate(ops) if op.startswith("libcudnn") and op.endswith(" held")
    ]
    assert cudnn_holds and all(cudnn < i < nccl for i in cudnn_holds), ops


def test_lock_is_no_change_in_a_plan(fault_plan):
    _, plan = fault_plan
    for op in plan:
        if "deploy lock" in op["name"]:
            assert op["hosts_with_change"] == []


# --- 6. the operator's words for a lost host and a reboot that does not come back --------


class StandInHost:
    """Stand-in for pyinfra's Host in the reboot wait: answers with the boot IDs given."""

    def __init__(self, boots: list[str | None]):
        self.name = "gpu-a"
        self.print_prefix = "[gpu-a] "
        self.connected = False
        self.boots = boots
        self.connector = SimpleNamespace()

    def connect(self, show_errors: bool = True):
        self.connected = self.boots[0] is not None

    def disconnect(self):
        self.connected = False

    def run_shell_command(self, command):
        boot = self.boots.pop(0) if len(self.boots) > 1 else self.boots[0]
        return boot is not None, SimpleNamespace(stdout_lines=[boot] if boot else [])


def test_reboot_that_does_not_come_back_says_so(monkeypatch, caplog):
    monkeypatch.setattr(kernel, "clear_askpass_cache", lambda host: None)
    monkeypatch.setattr(kernel, "_sleep", lambda s: None)
    host = StandInHost([None])
    with caplog.at_level(logging.ERROR):
        assert kernel._wait_for_reboot(None, host, ["old-boot"], 0, 0) is False
    assert "gpu-a did not come back within reboot_timeout_s=0 s" in caplog.text
    assert "Fix:" in caplog.text
    assert host in connection.explained  # the lost-connection line is not added on top


def test_reboot_wait_ends_on_a_new_boot(monkeypatch):
    monkeypatch.setattr(kernel, "clear_askpass_cache", lambda host: None)
    monkeypatch.setattr(kernel, "_sleep", lambda s: None)
    host = StandInHost(["old-boot", "new-boot"])
    assert kernel._wait_for_reboot(None, host, ["old-boot"], 0, 30) is True


@pytest.mark.parametrize("active", [True, False])
def test_lost_connection_is_named(caplog, active):
    transport = SimpleNamespace(is_active=lambda: active)
    host = StandInHost(["b"])
    host.connector = SimpleNamespace(client=SimpleNamespace(get_transport=lambda: transport))
    state = SimpleNamespace(
        get_op_meta=lambda op_hash: SimpleNamespace(names={"kernel headers and DKMS"})
    )
    with caplog.at_level(logging.ERROR):
        connection.ConnectionLossReporter.operation_host_error(state, host, "h")
    said = "connection to gpu-a lost during 'kernel headers and DKMS'" in caplog.text
    assert said is (not active)
    if said:
        assert "Fix: when gpu-a answers SSH again, run the deploy again" in caplog.text


def test_the_loss_reporter_is_registered_once_per_run():
    from pyinfra.api import Config, Inventory, State
    from pyinfra.context import ctx_state

    run = State()
    run.init(Inventory(([], {})), Config())
    with ctx_state.use(run):
        connection.watch()
        connection.watch()
    reporters = [
        h for h in run.callback_handlers if isinstance(h, connection.ConnectionLossReporter)
    ]
    assert len(reporters) == 1

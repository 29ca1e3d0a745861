"""The deploy's XLA warm-up: planned while the cache's marker is missing or stale, else not."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeState, create_host

from gpufleet.operations.xla_cache import marker_text
from gpufleet.spec import NodeSpec
from gpufleet.stages.host_probe import HostState, PciDevice
from gpufleet.stages.node import NodePlan
from gpufleet.stages.xla_warm_up import xla_warm_up
from tests.operations.helpers import run_operation
from validation.workloads import xla_cache

WARM = (
    "gpufleet xla_warm_up | XLA's compile cache warmed: every compiled step of the quick and "
    "full tiers"
)
MARKER = marker_text("tensorflow[and-cuda]==2.21.0", "9f2c", ["20b2"] * 8)
MARKER_PATH = f"{xla_cache.ROOT_DIRECTORY}/{xla_cache.MARKER}"
ARGS = {
    "python": "/usr/local/bin/gpufleet-python",
    "payload_dir": "/opt/gpufleet/validation/current",
    "cache_dir": xla_cache.ROOT_DIRECTORY,
}


def _facts(marker_file: str | None) -> dict:
    digest = None
    if marker_file is not None:
        digest = {"mode": "644", "sha256": hashlib.sha256(marker_file.encode()).hexdigest()}
    return {"probes.FileDigest": {f"path={MARKER_PATH}": digest}}


def test_a_gpu_host_without_its_marker_plans_the_warm_up_last(fleet_plan) -> None:
    _, changes = fleet_plan
    assert changes["u2004-a100"][-1] == WARM  # fresh: after run_end's reboot, last of all
    assert changes["done-a100-cold-xla"] == [WARM]  # provisioned, warm-up never completed
    assert changes["done-a100-old-xla"] == [WARM]  # warmed for another TensorFlow


def test_a_matching_marker_or_no_gpu_plans_nothing(fleet_plan) -> None:
    _, changes = fleet_plan
    for name in ("done-a100", "done-hgx-h100", "done-v100-venv", "done-cpu-dcgm-on"):
        assert WARM not in changes[name], name
    for name in ("cpu-only", "cpu-sandbox-like"):  # gpu_less: planned in full but for this
        assert changes[name] and WARM not in changes[name], name


def _stage_noop(plan: NodePlan) -> str | None:
    state = FakeState()
    host = create_host(state, facts={})
    with ctx_state.use(state), ctx_host.use(host):
        xla_warm_up._inner(plan=plan)
    return host.noop_description


def test_no_gpu_is_a_noop_that_says_why() -> None:
    gpu_less = NodeSpec.from_host_data({"gpu_less": True})
    a100 = PciDevice("0000:10:00.0", "0302", "20b2")
    plan = NodePlan(spec=gpu_less, state=HostState(pci=(a100,)), resolution=None)
    assert _stage_noop(plan) == "no GPU (gpu_less): no XLA cache to warm"
    plan = NodePlan(spec=NodeSpec(), state=HostState(), resolution=None)
    assert _stage_noop(plan) == "no GPU (none on the PCI bus): no XLA cache to warm"


def test_the_operation_runs_only_while_the_marker_differs() -> None:
    commands, noop = run_operation("xla_cache.warmed", _facts(f"{MARKER}\n"), marker=MARKER, **ARGS)
    assert commands == [] and noop == f"XLA's cache {xla_cache.ROOT_DIRECTORY} is warm ({MARKER})"
    for found in (None, "gpufleet XLA warm-up: tensorflow==2.20.0\n", MARKER):  # no newline
        commands, noop = run_operation("xla_cache.warmed", _facts(found), marker=MARKER, **ARGS)
        assert len(commands) == 1 and noop is None, found
        assert "-m validation.workloads.warm --cache-dir" in commands[0]


def test_every_value_reaches_the_warm_up_quoted(tmp_path: Path) -> None:
    """The real command, run by sh with a stand-in nvidia-smi and Python: the marker arrives
    as one argument, its shell characters inert."""
    tools, payload, cache = tmp_path / "bin", tmp_path / "payload", tmp_path / "cache"
    for folder in (tools, payload, cache):
        folder.mkdir()
    (tools / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: A100'\n")
    python = tools / "python"
    python.write_text('#!/bin/sh\npwd > "$0.cwd"; printf "%s\\n" "$PYTHONPATH" "$@" > "$0.args"\n')
    for tool in (tools / "nvidia-smi", python):
        tool.chmod(0o755)
    hostile = "gpufleet XLA warm-up: tensorflow[and-cuda]==2.21.0; $(touch pwned) `id` 'x' *"
    (command,), _ = run_operation(
        "xla_cache.warmed",
        {"probes.FileDigest": {f"path={cache}/{xla_cache.MARKER}": None}},
        python=str(python),
        payload_dir=str(payload),
        cache_dir=str(cache),
        marker=hostile,
    )
    env = {"PATH": f"{tools}:/usr/bin:/bin"}
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert (tools / "python.cwd").read_text().strip() == str(payload)
    assert (tools / "python.args").read_text().splitlines() == [
        str(payload),  # PYTHONPATH
        *("-m", "validation.workloads.warm", "--cache-dir", str(cache)),
        *("--marker-text", hostile),
    ]
    assert not list(tmp_path.glob("pwned")) and not list(payload.glob("pwned"))


def test_no_gpu_answering_or_a_busy_one_skips_without_failing(tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (command,), _ = run_operation("xla_cache.warmed", _facts(None), marker=MARKER, **ARGS)
    for smi, python_rc, said in (
        ("exit 9", 0, "nvidia-smi sees no GPU (a driver reboot pending?)"),
        ("exit 0", 3, "a GPU is busy"),
        ("exit 0", 1, None),  # a warm-up that failed fails the operation
    ):
        (tools / "nvidia-smi").write_text(f"#!/bin/sh\n{smi}\n")
        (tools / "nvidia-smi").chmod(0o755)
        stand_in = command.replace(ARGS["python"], str(tools / "python"))
        stand_in = stand_in.replace(ARGS["payload_dir"], str(tmp_path))
        (tools / "python").write_text(f"#!/bin/sh\nexit {python_rc}\n")
        (tools / "python").chmod(0o755)
        env = {"PATH": f"{tools}:/usr/bin:/bin"}
        done = subprocess.run(["sh", "-c", stand_in], env=env, capture_output=True, text=True)
        if said is None:
            assert done.returncode == 1
        else:
            assert done.returncode == 0 and said in done.stderr, done.stderr


def test_marker_text_names_tensorflow_the_payload_and_each_gpu_model() -> None:
    mixed = marker_text("tensorflow==2.21.0", "ab", ["2330", "20B2", "2330"])
    assert (
        mixed
        == "gpufleet XLA warm-up: tensorflow==2.21.0; payload sha256 ab; GPUs 1x 20b2, 2x 2330"
    )
    assert marker_text("t", "p", []).endswith("GPUs none")

"""pytest + testinfra plumbing of the validation suite: options, shared fixtures, results JSON.

Run from the control node by `gpufleet validate`, or on a host itself::

    pytest validation --hosts=local:// --expectations=exp.json --results-json=out.json

One host per run: the results JSON describes exactly one host.
"""

from __future__ import annotations

import fnmatch
import json
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpufleet.report.schema import new_document
from validation.host import hostinfo
from validation.verdicts.expectations import (
    ENV_VAR,
    Expectations,
    ExpectationsError,
    load,
    resolution_dict,
    spec_summary,
)
from validation.verdicts.runstate import STATE, CheckRecord, RunState, vendor_section


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpufleet")
    group.addoption(
        "--expectations",
        default=os.environ.get(ENV_VAR),
        help=f"expectations JSON written by `gpufleet validate` (default: ${ENV_VAR})",
    )
    group.addoption("--results-json", help="write the results JSON document to this path")
    group.addoption(
        "--tier", choices=("quick", "full"), help="quick or full (default: from expectations)"
    )
    group.addoption("--run-id", help="run identifier (default: from expectations, else new)")
    group.addoption(
        "--checks",
        help="comma-separated check names or globs as results name them "
        "(host_state::os_supported); the others are deselected",
    )
    group.addoption(
        "--progress-file",
        help="rewrite this file with each check's name as it starts (gpufleet validate's "
        "heartbeat names the check a long run is on)",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        expectations = load(config.getoption("expectations", None))
    except ExpectationsError as exc:
        raise pytest.UsageError(str(exc)) from None
    now = datetime.now(timezone.utc)
    run_id = (
        config.getoption("run_id", None)
        or expectations.run_id
        or f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    )
    config.stash[STATE] = RunState(
        expectations=expectations,
        tier=config.getoption("tier", None) or expectations.tier,
        run_id=run_id,
        started_at=now.isoformat(timespec="seconds"),
    )


def check_name(item: pytest.Item) -> str:
    """``test_host_state.py::test_os_supported[local]`` -> ``host_state::os_supported``."""
    module = Path(str(item.fspath)).stem.removeprefix("test_")
    name = getattr(item, "originalname", item.name).removeprefix("test_")
    callspec = getattr(item, "callspec", None)
    params = [
        str(v) for k, v in (callspec.params.items() if callspec else ()) if not k.startswith("_")
    ]
    if params and module == f"{name}s":  # workloads::workload[xla] -> workloads::xla
        return f"{module}::{','.join(params)}"
    return f"{module}::{name}" + (f"[{','.join(params)}]" if params else "")


def pytest_runtest_setup(item: pytest.Item) -> None:
    path = item.config.getoption("progress_file", None)
    if path:
        # the heartbeat reads the name and the file's age: the check and how long it has run
        Path(path).write_text(check_name(item) + "\n")


def _message(report: pytest.TestReport, call: pytest.CallInfo[None]) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if call.excinfo is not None:
        text = str(call.excinfo.value) or call.excinfo.typename
        # pytest's assertion rewriting appends "assert ..." introspection: keep the message.
        return text.split("\nassert ")[0].strip()
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report: pytest.TestReport = yield
    state = item.config.stash[STATE]
    name = check_name(item)
    entry = state.checks.setdefault(
        item.nodeid,
        {"name": name, "status": "pass", "message": "", "figures": {}, "duration_s": 0.0},
    )
    entry["duration_s"] = round(entry["duration_s"] + report.duration, 3)
    if hasattr(report, "wasxfail"):
        entry["status"] = "inconclusive"
        entry["message"] = str(report.wasxfail).removeprefix("reason: ")
    elif report.skipped:
        entry["status"], entry["message"] = "skipped", _message(report, call)
    elif report.failed:
        failed_check = call.excinfo is not None and call.excinfo.errisinstance(
            (AssertionError, pytest.fail.Exception)
        )
        entry["status"] = "fail" if report.when == "call" or failed_check else "error"
        entry["message"] = _message(report, call)
    elif report.when == "call" and entry["status"] == "pass":
        entry["message"] = state.messages.get(item.nodeid, "")
    entry["figures"] = state.figures.get(item.nodeid, {})
    return report


# Checks run cheapest and most basic first: a host that fails its declared state explains the
# GPU health and workload failures that follow.
MODULE_ORDER = ("test_host_state", "test_gpu_health", "test_vendor_diagnostics", "test_workloads")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def order(item: pytest.Item) -> int:
        stem = Path(str(item.fspath)).stem
        return MODULE_ORDER.index(stem) if stem in MODULE_ORDER else len(MODULE_ORDER)

    items.sort(key=order)
    wanted = [p for p in (config.getoption("checks", None) or "").split(",") if p]
    if wanted:
        kept = [i for i in items if any(fnmatch.fnmatchcase(check_name(i), p) for p in wanted)]
        chosen = {id(i) for i in kept}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in chosen])
        items[:] = kept
    hosts = {
        item.callspec.params["_testinfra_host"].backend.get_pytest_id()
        for item in items
        if hasattr(item, "callspec") and "_testinfra_host" in item.callspec.params
    }
    if config.getoption("results_json", None) and len(hosts) > 1:
        raise pytest.UsageError(
            f"--results-json describes one host, but --hosts gave {len(hosts)}; "
            "run once per host (gpufleet validate does)"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    path = config.getoption("results_json", None)
    state = config.stash.get(STATE, None)
    if not path or state is None:
        return
    run_error = state.run_error
    if run_error is None and exitstatus not in (0, 1, 5):
        run_error = f"the suite stopped early (pytest exit status {int(exitstatus)})"
    spec_info: dict[str, Any] = {}
    try:
        spec_info = spec_summary(state.expectations.spec, state.resolution)
    except ValueError as exc:
        run_error = run_error or f"inventory data: {exc}"
    document = new_document(
        host=state.expectations.host,
        run_id=state.run_id,
        started_at=state.started_at,
        tier=state.tier,
        target=state.expectations.target or state.target or "local://",
        spec=spec_info,
        checks=list(state.checks.values()),
        workloads=state.workloads,
        gpu_health=state.gpu_health,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - state.t0, 2),
        run_error=run_error,
        vendor=vendor_section(state),
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, default=str) + "\n")
    tmp.replace(out)


# ---------------------------------------------------------------- fixtures shared by checks


@pytest.fixture(scope="session")
def run_state(request: pytest.FixtureRequest) -> RunState:
    return request.config.stash[STATE]


@pytest.fixture(scope="session")
def expectations(run_state: RunState) -> Expectations:
    return run_state.expectations


@pytest.fixture(scope="session")
def tier(run_state: RunState) -> str:
    return run_state.tier


@pytest.fixture(scope="module", autouse=True)
def info(host: Any, run_state: RunState) -> hostinfo.HostInfo:
    """The host's shared facts, read once before any check; an unreachable host stops the run."""
    key = host.backend.get_pytest_id()
    if key not in run_state.infos:
        run_state.target = key
        try:
            run_state.infos[key] = hostinfo.gather(host)
        except RuntimeError as exc:
            # testinfra's ssh backends raise RuntimeError(CommandResult) when ssh exits 255.
            result = exc.args[0] if exc.args else None
            why = getattr(result, "stderr", None) or str(exc)
            where = run_state.expectations.target or key
            run_state.run_error = f"could not reach {where}: {why.strip()[:300]}"
            pytest.exit(run_state.run_error, returncode=3)
    return run_state.infos[key]


@pytest.fixture(scope="module")
def spec(expectations: Expectations) -> Any:
    return expectations.spec


@pytest.fixture(scope="module")
def resolution(info: hostinfo.HostInfo, spec: Any, run_state: RunState) -> dict[str, Any]:
    """The matrix Resolution for this host: from the expectations, or from its own facts."""
    if run_state.resolution is None:
        given = run_state.expectations.resolution
        if given is None:
            given = resolution_dict(
                spec.resolve(
                    os_id=info.os_release.get("ID", ""),
                    os_version=info.os_release.get("VERSION_ID", ""),
                    arch=info.machine,
                    gpu_device_ids=[d.device_id for d in info.gpus_on_bus + info.nvswitches_on_bus],
                )
            )
        run_state.resolution = given
    return run_state.resolution


@pytest.fixture(scope="module")
def env_python(host: Any, expectations: Expectations, spec: Any) -> str:
    """The environment's interpreter: the override, the `gpufleet-python` wrapper, or the env's."""
    if expectations.python:
        return expectations.python
    wrapper = host.run("command -v gpufleet-python").stdout.strip()
    return wrapper or str(spec.python_bin)


@pytest.fixture(scope="module")
def payload_dir(expectations: Expectations, spec: Any) -> str:
    """Where the validation payload (the `validation` package) lives on the host."""
    return expectations.payload_dir or f"{spec.payload_dir}/current"


@pytest.fixture
def record(request: pytest.FixtureRequest, run_state: RunState) -> CheckRecord:
    """Attach figures / a message to this check's results entry: ``record("ok", count=8)``."""
    figures = run_state.figures.setdefault(request.node.nodeid, {})
    return CheckRecord(figures, run_state.messages, request.node.nodeid)


@pytest.fixture(scope="module")
def gpu(info: hostinfo.HostInfo) -> hostinfo.HostInfo:
    """Skip on a GPU-less host (with the reason); fail when a GPU is there but unusable."""
    missing = info.gpu_missing_reason()
    if missing:
        pytest.skip(hostinfo.GPU_SKIP_PREFIX + missing)
    if not info.nvidia_module_loaded:
        pytest.fail(
            f"{len(info.gpus_on_bus)} NVIDIA GPU(s) on the PCI bus but no NVIDIA kernel module "
            "loaded; see `dmesg | grep -i nvidia` (Secure Boot? DKMS build? nouveau?)"
        )
    if not info.nvidia_smi_path:
        pytest.fail("NVIDIA GPU(s) and driver present but nvidia-smi is not on PATH")
    return info

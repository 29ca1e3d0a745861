"""GPU health from `nvidia-smi -q -x`: count, ECC, remaps, limits; clocks and PCIe under load."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gpufleet import health
from validation.host.hostinfo import HostInfo

# The load: one thread per GPU multiplies 8192x8192 float32 matrices. Once every GPU has
# finished a matmul the script prints LOADED (GPUs that did not start within READY_TIMEOUT_S
# are counted out, so the sample shows them idle and they fail); it keeps the load on for
# HOLD_S more. nvidia-smi samples SETTLE_S after the marker, when clocks and the PCIe link
# have left their idle states: not a fixed time after the process started, which on an
# 8-GPU host can come before TensorFlow has even opened the last GPU.
LOADED = "gpufleet-gpus-loaded"
READY_TIMEOUT_S = 120
HOLD_S = 10
SETTLE_S = 3
WAIT_LIMIT_S = READY_TIMEOUT_S + 60  # TensorFlow's import and contexts, on top

LOAD_SCRIPT = f"""
import sys, threading, time, tensorflow as tf
gpus = [d.name.replace("physical_device:", "") for d in tf.config.list_physical_devices("GPU")]
ready, stop = threading.Semaphore(0), threading.Event()
def spin(name):
    with tf.device(name):
        a = tf.random.normal((8192, 8192)); _ = tf.linalg.matmul(a, a)[0, 0].numpy()
        ready.release()
        while not stop.is_set():
            _ = tf.linalg.matmul(a, a)[0, 0].numpy()
threads = [threading.Thread(target=spin, args=(g,), daemon=True) for g in gpus]
[t.start() for t in threads]
deadline, done = time.time() + {READY_TIMEOUT_S}, 0
while done < len(gpus) and ready.acquire(timeout=max(0.0, deadline - time.time())):
    done += 1
print("{LOADED}", done, len(gpus), flush=True)
time.sleep({HOLD_S}); stop.set(); [t.join() for t in threads]
sys.exit(0 if done == len(gpus) else 3)
"""


def load_command(env_python: str) -> str:
    """Start the load, wait for LOADED (at most WAIT_LIMIT_S), then ``nvidia-smi -q -x``.

    Prints the report; exits non-zero when the marker never came or the load failed."""
    python = shlex.quote(env_python)
    return (
        f"m=$(mktemp) || exit 1; TF_CPP_MIN_LOG_LEVEL=2 {python} -c {shlex.quote(LOAD_SCRIPT)} "
        '>"$m" 2>/dev/null & pid=$!; i=0; '
        f'while ! grep -q {LOADED} "$m" && kill -0 $pid 2>/dev/null '
        f"&& [ $i -lt {WAIT_LIMIT_S * 10} ]; do sleep 0.1; i=$((i+1)); done; "
        f'grep -q {LOADED} "$m"; seen=$?; sleep {SETTLE_S}; nvidia-smi -q -x; rc=$?; '
        'wait $pid; load=$?; rm -f "$m"; [ $seen -eq 0 ] && [ $rc -eq 0 ] && [ $load -eq 0 ]'
    )


def _parse(xml: str) -> Any:
    from gpufleet.parsers import parse_nvidia_smi_xml

    return parse_nvidia_smi_xml(xml)


@pytest.fixture(scope="module")
def smi_idle(host: Any, gpu: HostInfo) -> Any:
    return _parse(host.check_output("nvidia-smi -q -x"))


@pytest.fixture(scope="module")
def smi_loaded(host: Any, gpu: HostInfo, env_python: str) -> Any:
    """An `nvidia-smi -q -x` report taken while every GPU runs matmuls (after the load
    script reported every GPU loaded)."""
    result = host.run(load_command(env_python))
    if result.rc != 0:
        pytest.fail(
            f"could not load every GPU with {env_python} (exit {result.rc}: no "
            f"'{LOADED}' marker, a GPU that never started, or nvidia-smi failed); "
            "check test_host_state's TensorFlow checks first"
        )
    return _parse(result.stdout)


@pytest.fixture(scope="module")
def findings(smi_idle: Any, spec: Any, gpu: HostInfo, run_state: Any) -> list[health.Finding]:
    found = health.evaluate_idle(smi_idle, spec.gpu_count, len(gpu.nvswitches_on_bus))
    run_state.gpu_health = {
        "gpus": health.gpu_summary(smi_idle),
        "findings": [f.to_dict() for f in found],
        "driver_version": health.field_of(smi_idle, "driver_version"),
        "cuda_version": health.field_of(smi_idle, "cuda_version"),
    }
    return found


@pytest.fixture(scope="module")
def load_findings(smi_loaded: Any, findings: list, run_state: Any) -> list[health.Finding]:
    found = health.evaluate_under_load(smi_loaded)
    run_state.gpu_health["findings"] += [f.to_dict() for f in found]
    run_state.gpu_health["gpus_under_load"] = health.gpu_summary(smi_loaded)
    return found


def _assert_no_failures(found: list[health.Finding], check: str, record: Any) -> None:
    bad = health.failures(found, check)
    record(findings=[f.message for f in found if f.check == check])
    assert not bad, "; ".join(f.message for f in bad)


def test_gpu_count(smi_idle: Any, findings: list, gpu: HostInfo, record: Any) -> None:
    """nvidia-smi sees every GPU on the PCI bus."""
    seen = len(health.gpus_of(smi_idle))
    record(nvidia_smi=seen, pci=len(gpu.gpus_on_bus))
    _assert_no_failures(findings, "gpu_count", record)
    assert seen == len(gpu.gpus_on_bus), (
        f"nvidia-smi sees {seen} GPU(s), the PCI bus has {len(gpu.gpus_on_bus)}"
    )


def test_no_uncorrectable_ecc(findings: list, record: Any) -> None:
    """No uncorrectable volatile ECC error since the driver loaded."""
    _assert_no_failures(findings, "ecc", record)


def test_no_lifetime_uncorrectable_ecc_or_pending_page(findings: list, record: Any) -> None:
    """No uncorrectable ECC error over the board's life, no retired page waiting for a reset."""
    _assert_no_failures(findings, "ecc_lifetime", record)


def test_power_limits_and_clocks_at_defaults(findings: list, record: Any) -> None:
    """Power limit and clocks at the board's defaults and the datasheet's, not lowered."""
    _assert_no_failures(findings, "power_clocks", record)


def test_no_row_remap_pending_or_failed(findings: list, record: Any) -> None:
    """No row remap pending a reset, no remap failure (out of spare rows)."""
    _assert_no_failures(findings, "row_remap", record)


def test_clocks_not_throttled_under_load(load_findings: list, record: Any) -> None:
    """Under load, no clock event reason that slows the GPU, and no idle GPU."""
    _assert_no_failures(load_findings, "clock_event_reasons", record)


def test_pcie_link_at_max_under_load(load_findings: list, record: Any) -> None:
    """Under load, the PCIe link runs at its maximum generation and width."""
    _assert_no_failures(load_findings, "pcie_link", record)


def test_pcie_link_meets_datasheet_under_load(load_findings: list, record: Any) -> None:
    """Under load, the PCIe link reaches the datasheet's generation and x16."""
    _assert_no_failures(load_findings, "pcie_datasheet", record)

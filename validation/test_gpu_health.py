"""GPU health from `nvidia-smi -q -x`: count, ECC, row remapping; clocks and PCIe under load."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gpufleet import health
from validation.hostinfo import HostInfo

# Seconds of matmul load per GPU, and when (into it) nvidia-smi samples: long enough for the
# clocks and the PCIe link to leave their idle states, short enough for the quick tier.
LOAD_SECONDS = 12
SAMPLE_AFTER_S = 7

# Keeps every GPU busy with large float32 matmuls for LOAD_SECONDS (one thread per GPU).
LOAD_SCRIPT = f"""
import threading, time, tensorflow as tf
def spin(name):
    with tf.device(name):
        a = tf.random.normal((8192, 8192)); end = time.time() + {LOAD_SECONDS}
        while time.time() < end:
            b = tf.linalg.matmul(a, a); _ = b[0, 0].numpy()
gpus = [d.name.replace("physical_device:", "") for d in tf.config.list_physical_devices("GPU")]
threads = [threading.Thread(target=spin, args=(g,)) for g in gpus]
[t.start() for t in threads]; [t.join() for t in threads]
"""


def _parse(xml: str) -> Any:
    from gpufleet.parsers import parse_nvidia_smi_xml

    return parse_nvidia_smi_xml(xml)


@pytest.fixture(scope="module")
def smi_idle(host: Any, gpu: HostInfo) -> Any:
    return _parse(host.check_output("nvidia-smi -q -x"))


@pytest.fixture(scope="module")
def smi_loaded(host: Any, gpu: HostInfo, env_python: str) -> Any:
    """An `nvidia-smi -q -x` report taken while every GPU runs matmuls."""
    command = (
        f"TF_CPP_MIN_LOG_LEVEL=2 {shlex.quote(env_python)} -c {shlex.quote(LOAD_SCRIPT)} "
        f">/dev/null 2>&1 & pid=$!; sleep {SAMPLE_AFTER_S}; nvidia-smi -q -x; rc=$?; "
        "wait $pid; load=$?; [ $rc -eq 0 ] && [ $load -eq 0 ]"
    )
    result = host.run(command)
    if result.rc != 0:
        pytest.fail(
            f"could not load the GPUs with {env_python} (exit {result.rc}); "
            "check test_host_state's TensorFlow checks first"
        )
    return _parse(result.stdout)


@pytest.fixture(scope="module")
def findings(smi_idle: Any, spec: Any, run_state: Any) -> list[health.Finding]:
    found = health.evaluate_idle(smi_idle, spec.gpu_count)
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
    seen = len(health.gpus_of(smi_idle))
    record(nvidia_smi=seen, pci=len(gpu.gpus_on_bus))
    _assert_no_failures(findings, "gpu_count", record)
    assert seen == len(gpu.gpus_on_bus), (
        f"nvidia-smi sees {seen} GPU(s), the PCI bus has {len(gpu.gpus_on_bus)}"
    )


def test_no_uncorrectable_ecc(findings: list, record: Any) -> None:
    _assert_no_failures(findings, "ecc", record)


def test_no_row_remap_pending_or_failed(findings: list, record: Any) -> None:
    _assert_no_failures(findings, "row_remap", record)


def test_clocks_not_throttled_under_load(load_findings: list, record: Any) -> None:
    _assert_no_failures(load_findings, "clock_event_reasons", record)


def test_pcie_link_at_max_under_load(load_findings: list, record: Any) -> None:
    _assert_no_failures(load_findings, "pcie_link", record)

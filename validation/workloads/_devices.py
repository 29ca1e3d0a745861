"""Devices TensorFlow sees, as the workload document lists them, and whether it sees the GPUs."""

from __future__ import annotations

import os

from validation.harness import FAIL, PASS, Verdict
from validation.workloads._run import Run


def nvml_index(tf_index: int) -> int:
    """NVML numbers every GPU; TensorFlow only those CUDA_VISIBLE_DEVICES lets it see."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        entries = [v.strip() for v in visible.split(",")]
        if tf_index < len(entries) and entries[tf_index].isdigit():
            return int(entries[tf_index])
    return tf_index


def discover_devices(run: Run, logical_cpus: int) -> None:
    """Fill run.gpus/cpus/devices; without a GPU, split the CPU into ``logical_cpus`` devices."""
    tf = run.tf
    physical_gpus = tf.config.list_physical_devices("GPU")
    if not physical_gpus and logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)]
        )
    run.gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    run.cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    nvml = {d.index: d for d in (run.sampler.devices if run.sampler else [])}
    capabilities = []
    for index, (physical, name) in enumerate(zip(physical_gpus, run.gpus)):  # noqa: B905 (hosts may run Python 3.9)
        details = tf.config.experimental.get_device_details(physical)
        capability = details.get("compute_capability")
        nvml_device = nvml.get(nvml_index(index))
        model = details.get("device_name") or (nvml_device.name if nvml_device else None)
        run.devices.append(
            {
                "type": "GPU",
                "name": name,
                "model": model,
                "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
                "memory_mib": round(nvml_device.memory_total_mib) if nvml_device else None,
            }
        )
        if capability:
            capabilities.append(tuple(capability))
        run.gpu_model = run.gpu_model or model
    # Thresholds follow the weakest GPU: a mixed host is held to what all its GPUs can do.
    run.compute_capability = min(capabilities) if capabilities else None
    if not run.gpus:
        run.devices.extend(
            {
                "type": "CPU",
                "name": name,
                "model": None,
                "compute_capability": None,
                "memory_mib": None,
            }
            for name in run.cpus
        )


def check_tensorflow_sees_the_gpus(run: Run) -> None:
    """NVML sees GPUs but TensorFlow none: the CUDA/cuDNN libraries do not match (seed guide).

    Without this check such a host would run every workload on the CPU and report "no GPU".
    CUDA_VISIBLE_DEVICES="" hides the GPUs on purpose (CPU runs on a GPU machine) and is exempt.
    """
    sampler = run.sampler
    if sampler is None or not sampler.available or os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return
    expected = len(sampler.devices)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        expected = min(expected, len([v for v in visible.split(",") if v.strip()]))
    seen = len(run.gpus)
    run.add_check(
        "tensorflow_sees_gpus",
        "correctness",
        Verdict(
            PASS if seen >= expected else FAIL,
            f"TensorFlow sees {seen} GPU(s), NVML {len(sampler.devices)}"
            + (
                ""
                if seen >= expected
                else ": TensorFlow's CUDA libraries do not load; "
                "check LD_LIBRARY_PATH and the CUDA/cuDNN wheels against the driver"
            ),
        ),
    )

"""Devices TensorFlow sees, as the workload document lists them, and whether it sees the GPUs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from validation.host.nvml_sampler import NvmlDevice
from validation.verdicts.harness import FAIL, PASS, Verdict
from validation.workloads._run import Run

_PCI_RE = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


# discover_devices' mapping (TensorFlow GPU index -> NVML index), for nvml_index() callers
# that have no sampler at hand.
_MAPPING: dict[int, int] = {}


def pci_key(bus_id: str) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of a PCI bus id in any of its spellings: NVML's
    "00000000:3B:00.0", TensorFlow's and sysfs' "0000:3b:00.0"; None when it is not one.

    Example:
        >>> pci_key("00000000:3B:00.0") == pci_key("0000:3b:00.0")
        True
    """
    match = _PCI_RE.match(bus_id.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)


def resolve_visible(
    visible: str | None,
    devices: Sequence[NvmlDevice],
    mig_parent: Callable[[str], str | None] = lambda _: None,
) -> list[int | None]:
    """The NVML index of each GPU CUDA numbers 0, 1, ... (None where an entry is unknown).

    CUDA_DEVICE_ORDER=PCI_BUS_ID (env.sh sets it) numbers GPUs by PCI bus id, so ordinal k
    of the host is the GPU with the k-th lowest bus id, whatever index NVML gave it (NVML does
    not promise its order). CUDA_VISIBLE_DEVICES entries may be such ordinals, GPU UUIDs
    (or a unique prefix of one, as CUDA accepts), or MIG instances ("MIG-<uuid>", or the
    older "MIG-GPU-<uuid>/<gi>/<ci>"), which ``mig_parent`` maps to their GPU's UUID. CUDA
    hides every entry after an invalid one, so resolution stops there (ending with None).
    """
    by_bus = sorted(devices, key=lambda d: (pci_key(d.pci_bus_id) or (1 << 32,), d.index))
    if visible is None or not visible.strip():
        return [d.index for d in by_bus]
    resolved: list[int | None] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            ordinal = int(entry)
            resolved.append(by_bus[ordinal].index if ordinal < len(by_bus) else None)
            if resolved[-1] is None:
                break
            continue
        uuid = entry
        if entry.startswith("MIG-GPU-"):
            uuid = entry.removeprefix("MIG-").split("/")[0]
        elif entry.startswith("MIG-"):
            uuid = mig_parent(entry) or ""
        matches = [d.index for d in devices if uuid and d.uuid.startswith(uuid)]
        resolved.append(matches[0] if len(matches) == 1 else None)
        if resolved[-1] is None:
            break
    return resolved


def nvml_index(tf_index: int) -> int:
    """The NVML index of TensorFlow's GPU ``tf_index`` (discover_devices' mapping; before it
    ran, or for an entry NVML does not know, the digit in CUDA_VISIBLE_DEVICES or the index)."""
    if tf_index in _MAPPING:
        return _MAPPING[tf_index]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        entries = [v.strip() for v in visible.split(",")]
        if tf_index < len(entries) and entries[tf_index].isdigit():
            return int(entries[tf_index])
    return tf_index


def map_devices(run: Run) -> dict[int, int]:
    """TensorFlow GPU index -> NVML index for this run, recorded in config["nvml_mapping"]."""
    sampler = run.sampler
    if sampler is None or not sampler.available:
        return {}
    resolved = resolve_visible(
        os.environ.get("CUDA_VISIBLE_DEVICES"), sampler.devices, sampler.mig_parent_uuid
    )
    mapping = {i: n for i, n in enumerate(resolved) if n is not None and i < len(run.gpus)}
    order = os.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    run.config["nvml_mapping"] = {
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device_order": order,
        "tf_to_nvml": {str(i): n for i, n in mapping.items()},
        "note": None
        if order == "PCI_BUS_ID"
        else "CUDA_DEVICE_ORDER is not PCI_BUS_ID: ordinals assumed in PCI bus order",
    }
    _MAPPING.clear()
    _MAPPING.update(mapping)
    return mapping


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
    mapping = map_devices(run)
    capabilities = []
    for index, (physical, name) in enumerate(zip(physical_gpus, run.gpus)):  # noqa: B905 (hosts may run Python 3.9)
        details = tf.config.experimental.get_device_details(physical)
        capability = details.get("compute_capability")
        nvml_device = nvml.get(mapping.get(index, nvml_index(index)))
        model = details.get("device_name") or (nvml_device.name if nvml_device else None)
        run.devices.append(
            {
                "type": "GPU",
                "name": name,
                "model": model,
                "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
                "memory_mib": round(nvml_device.memory_total_mib) if nvml_device else None,
                "nvml_index": nvml_device.index if nvml_device else None,
                "pci_bus_id": nvml_device.pci_bus_id if nvml_device else None,
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

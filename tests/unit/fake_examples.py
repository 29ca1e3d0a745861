"""One of inventories/examples/ with each host replaced by an @fake host of its kind.

    GPUFLEET_EXAMPLE=hgx_h100_slurm_ib pyinfra tests/unit/fake_examples.py deploy/gpu_node.py \
        --dry --group-data inventories/group_data

plans the example with no real host (tests/unit/test_inventory_examples.py runs it for each).
"""

import os as _os
import runpy as _runpy
import sys as _sys
from pathlib import Path as _Path

_ROOT = _Path(__file__).resolve().parents[2]
if str(_ROOT) not in _sys.path:
    _sys.path.insert(0, str(_ROOT))

from tests.unit import fake_fleet as _fake  # noqa: E402

L4 = "27b8"  # NVIDIA L4 (AD104GL)
_HGX_H100 = _fake.FakeGpuHost(gpus=(_fake.H100,) * 8, nvswitches=(_fake.NVSWITCH_H100,) * 4)
_HGX_A100 = _fake.FakeGpuHost(gpus=(_fake.A100,) * 8, nvswitches=(_fake.NVSWITCH_A100,) * 6)
# example -> group -> the machine its hosts are.
KINDS = {
    "hgx_h100_slurm_ib": {"h100_ib": _HGX_H100, "slurm_head": _fake.FakeGpuHost(gpus=())},
    "mixed_l4_a100": {"l4_inference": _fake.FakeGpuHost(gpus=(L4,)), "a100_training": _HGX_A100},
    "airgapped_mirror": {"gpu_nodes": _HGX_A100},
}


def fake_groups(name: str) -> dict[str, tuple[list[tuple[str, dict]], dict]]:
    """The example's groups, each host an @fake machine of its group's kind."""
    example = _runpy.run_path(str(_ROOT / "inventories" / "examples" / f"{name}.py"))
    groups = {}
    for group, machine in KINDS[name].items():
        names, data = example[group]
        fake = []
        for host in names:
            host_name, extra = host if isinstance(host, tuple) else (host, {})
            fake.append((f"@fake/{host_name}", {**machine.data(), **extra}))
        groups[group] = (fake, data)
    return groups


# pyinfra reads the groups as this module's globals; the tests import KINDS alone.
if "GPUFLEET_EXAMPLE" in _os.environ:
    globals().update(fake_groups(_os.environ["GPUFLEET_EXAMPLE"]))

"""inventories/prod.py with each host replaced by an @fake host of its kind (fresh Ubuntu 22.04).

    pyinfra tests/unit/fake_prod.py deploy/gpu_node.py --dry --group-data inventories/group_data

shows the plan the production inventory would get, stage by stage, without any real host.
"""

import runpy as _runpy
import sys as _sys
from pathlib import Path as _Path

_ROOT = _Path(__file__).resolve().parents[2]
if str(_ROOT) not in _sys.path:
    _sys.path.insert(0, str(_ROOT))

from tests.unit import fake_fleet as _fake  # noqa: E402

_prod = _runpy.run_path(str(_ROOT / "inventories" / "prod.py"))
_kinds = {
    "a100_nodes": _fake.FakeGpuHost(gpus=(_fake.A100,) * 8, nvswitches=(_fake.NVSWITCH_A100,) * 6),
    "h100_nodes": _fake.FakeGpuHost(gpus=(_fake.H100,) * 8, nvswitches=(_fake.NVSWITCH_H100,) * 4),
    "v100_legacy": _fake.FakeGpuHost(gpus=(_fake.V100,) * 4),
}


def _fake_group(group: str) -> tuple[list[tuple[str, dict]], dict]:
    names, data = _prod[group]
    return [(f"@fake/{name}", _kinds[group].data()) for name in names], data


a100_nodes = _fake_group("a100_nodes")
h100_nodes = _fake_group("h100_nodes")
v100_legacy = _fake_group("v100_legacy")

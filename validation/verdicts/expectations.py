"""What a host is expected to be: its NodeSpec, the matrix Resolution for it, run settings.

The control node (`gpufleet validate`) writes one expectations JSON per host; the suite reads
it with ``--expectations PATH`` (or ``$GPUFLEET_EXPECTATIONS``). Without one, the suite checks
against the NodeSpec defaults. Example file::

    {"expectations_version": 1, "host": "gpu-a", "tier": "quick", "run_id": "...",
     "host_data": {"tf_version": "2.21.0", "driver_branch": 580},
     "python": null, "payload_dir": null, "resolution": null}

``python`` / ``payload_dir`` override where the environment's interpreter and the validation
payload are on the host; ``resolution`` (a ``matrix.Resolution`` as a dict) is computed from
the host's own facts (OS, arch, GPUs on the PCI bus) when absent.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.spec import NodeSpec, is_ignored_key

EXPECTATIONS_VERSION = 1
ENV_VAR = "GPUFLEET_EXPECTATIONS"


class ExpectationsError(ValueError):
    """An expectations file that cannot be used; the message says what to fix."""


@dataclass
class Expectations:
    """The parsed expectations for one host (see the module docstring)."""

    host: str = "local"
    tier: str = "quick"
    run_id: str | None = None
    host_data: dict[str, Any] = field(default_factory=dict)
    python: str | None = None
    payload_dir: str | None = None
    resolution: dict[str, Any] | None = None
    target: str | None = None
    # The inventory's calibration_file as parsed on the control node (full tier only), handed
    # to every workload as --calibration.
    calibration: dict[str, Any] | None = None

    @property
    def spec(self) -> NodeSpec:
        return NodeSpec.from_host_data(self.host_data)

    def to_dict(self) -> dict[str, Any]:
        return {"expectations_version": EXPECTATIONS_VERSION, **dataclasses.asdict(self)}


def spec_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """The inventory data a NodeSpec reads (pyinfra's and ``x_`` keys left out), JSON-safe."""
    kept = {k: v for k, v in data.items() if not is_ignored_key(k)}
    return json.loads(json.dumps(kept, default=str))


def load(path: str | Path | None) -> Expectations:
    """Read an expectations file; ``None`` gives the defaults."""
    if path is None:
        return Expectations()
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ExpectationsError(f"cannot read expectations file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ExpectationsError(f"expectations file {path} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("expectations_version") != EXPECTATIONS_VERSION:
        raise ExpectationsError(
            f"{path}: not an expectations document of version {EXPECTATIONS_VERSION}; "
            "write it with `gpufleet validate` (or Expectations(...).to_dict())"
        )
    known = {f.name for f in dataclasses.fields(Expectations)}
    unknown = set(raw) - known - {"expectations_version"}
    if unknown:
        raise ExpectationsError(f"{path}: unknown keys {sorted(unknown)}")
    values = {k: v for k, v in raw.items() if k in known}
    return Expectations(**values)


def resolution_dict(resolution: Any) -> dict[str, Any]:
    """A ``matrix.Resolution`` as plain JSON data."""
    data: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(resolution), default=list))
    return data


def spec_summary(spec: NodeSpec, resolution: Mapping[str, Any] | None) -> dict[str, Any]:
    """The few declared and resolved values a person reads first in a results document."""
    summary: dict[str, Any] = {
        "tf_version": spec.tf_version,
        "python_env": spec.python_env,
        "env_dir": spec.env_dir,
        "kernel_module_flavor": spec.kernel_module_flavor,
        "gpu_count": spec.gpu_count,
        "gpu_less": spec.gpu_less,
        "calibration_file": spec.calibration_file,
    }
    if resolution:
        for key in ("driver_branch", "min_driver", "cuda", "cudnn", "nccl", "tf_cuda"):
            summary[key] = resolution.get(key)
        summary["kernel_module_flavor"] = resolution.get("kernel_module_flavor")
    return summary

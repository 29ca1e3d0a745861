"""The sandbox's real wheelhouse: TensorFlow CPU and its dependencies for the hosts' Python,
downloaded from PyPI into the machine-wide cache `sandbox up` uses (moved here from the unit
tier: it needs the network and writes the sandbox cache, issue 30 H12/D20)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpufleet.sandbox.state import CACHE_DIR
from gpufleet.sandbox.wheelhouse import build_wheelhouse

pytestmark = pytest.mark.integration


def test_tensorflow_wheelhouse_for_the_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real set (TF CPU for Python 3.10), in the cache `sandbox up` uses; prints timings."""
    www = tmp_path / "www"
    started = time.monotonic()
    from gpufleet.sandbox.fleet import wheelhouse_lock
    from gpufleet.sandbox.state import SandboxState

    jammy = SandboxState(image="ubuntu22.04", os=["ubuntu", "22.04"])
    house = build_wheelhouse(
        www, CACHE_DIR / "wheelhouse", python_version="3.10", lock_text=wheelhouse_lock(jammy)
    )
    names = {w.name.split("-", 1)[0].lower() for w in house.wheels}
    assert {"tensorflow_cpu", "numpy", "keras", "pip", "setuptools", "wheel"} <= names
    assert (house.index / "tensorflow-cpu" / "index.html").is_file()
    size = sum(w.stat().st_size for w in house.wheels) / 2**20
    with capsys.disabled():
        print(
            f"\nwheelhouse: {len(house.wheels)} wheels, {size:.0f} MiB, downloaded="
            f"{house.downloaded}, download {house.download_s:.1f} s, index {house.index_s:.2f} s,"
            f" total {time.monotonic() - started:.1f} s"
        )

"""A no-op re-run's fact round trips (issue 18): after the first host, each host reads the
digests of every file the deploy manages in one round trip, and still plans no change."""

from __future__ import annotations

import re
from pathlib import Path

from tests import pyinfra_cli
from tests.unit.fake_fleet import FakeGpuHost, root, write_inventory

ROOT = root()
HOSTS = ("done-1", "done-2", "done-3")


def test_later_hosts_read_all_file_digests_in_one_round_trip(tmp_path: Path) -> None:
    fleet = {name: FakeGpuHost(provisioned=True) for name in HOSTS}
    inventory = write_inventory(tmp_path / "inventory.py", fleet)
    result, plan = pyinfra_cli.plan(inventory, pyinfra_cli.GPU_NODE, "-vv", base=pyinfra_cli.BARE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [op["name"] for op in plan if op["hosts_with_change"]] == []
    facts = {
        name: re.findall(rf"\[@fake/{name}\]\s+Loaded fact (\S+)", result.stderr) for name in HOSTS
    }
    single, batch = (
        "gpufleet.operations.probes.FileDigest",
        "gpufleet.operations.probes.FileDigests",
    )
    first = next(name for name in HOSTS if facts[name].count(single) > 1)
    for name in HOSTS:
        if name != first:
            assert facts[name].count(single) == 0, facts[name]
            assert facts[name].count(batch) == 1, facts[name]
            assert len(facts[name]) < len(facts[first]) - 10, (facts[name], facts[first])

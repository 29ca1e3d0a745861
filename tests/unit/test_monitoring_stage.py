"""gpufleet.stages.monitoring: unit files systemd accepts, and the stage's plan on @fake hosts.

`systemd-analyze verify` runs against a scratch root holding this machine's own systemd units
(for sysinit.target, timers.target, ...) and a stand-in gpufleet-python. The sandbox hosts'
image (Ubuntu 22.04, systemd 249) verifies the same files in the integration tier.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpufleet.spec import NodeSpec
from gpufleet.stages import monitoring
from gpufleet.validate.baseline import record_run
from tests import pyinfra_cli
from tests.unit import fleet_factory as ff
from tests.unit.fake_fleet import FakeGpuHost, digests_answer, root, write_inventory

ROOT = root()
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def verify(tmp_path: Path, units: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` of ``units`` inside a scratch root."""
    if shutil.which("systemd-analyze") is None or not (SYSTEM_UNITS / "sysinit.target").exists():
        pytest.skip("systemd-analyze and systemd's units are needed (Debian: systemd)")
    scratch = tmp_path / "root"
    shutil.copytree(SYSTEM_UNITS, scratch / "usr/lib/systemd/system", symlinks=True)
    wrapper = scratch / monitoring.WRAPPER.lstrip("/")
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text("#!/bin/sh\n")
    wrapper.chmod(0o755)
    paths = []
    for path, text in units.items():
        assert text is not None
        target = scratch / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        paths.append(str(target))
    return subprocess.run(
        ["systemd-analyze", "verify", f"--root={scratch}", *paths],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"node_exporter": True, "periodic_schedule": "Mon..Fri *-*-* 03:00"},
        {"node_exporter": True, "textfile_dir": "/srv/metrics", "payload_dir": "/opt/gpu fleet"},
    ],
)
def test_units_pass_systemd_analyze_verify(tmp_path: Path, data: dict) -> None:
    # Built without from_host_data: the spec refuses a space in a path, and the units' quoting
    # must hold all the same.
    spec = NodeSpec(**data)
    units = monitoring.unit_texts(spec, textfile=spec.node_exporter)
    result = verify(tmp_path, units)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    timer = units[f"{monitoring.UNIT_DIR}/{monitoring.TIMER}"] or ""
    assert f"OnCalendar={spec.periodic_schedule}\n" in timer
    assert "Persistent=true\n" in timer and "RandomizedDelaySec=" in timer


def test_a_bad_schedule_fails_verify(tmp_path: Path) -> None:
    spec = NodeSpec(periodic_schedule="every other tuesday")  # from_host_data refuses it
    result = verify(tmp_path, monitoring.unit_texts(spec, textfile=False))
    assert result.returncode != 0
    assert "every other tuesday" in result.stderr


def test_schedule_with_a_line_break_is_refused() -> None:
    with pytest.raises(monitoring.DeployError, match="systemd calendar expression"):
        monitoring.check_schedule("daily\nExecStart=/bin/evil")


def test_service_runs_the_periodic_module_from_the_payload() -> None:
    spec = NodeSpec(node_exporter=True, textfile_dir="/srv/100%")  # refused by from_host_data
    service = monitoring.unit_texts(spec, textfile=True)[
        f"{monitoring.UNIT_DIR}/{monitoring.SERVICE}"
    ]
    assert service is not None
    assert "WorkingDirectory=/opt/gpufleet/validation/current\n" in service
    assert 'Environment="PYTHONPATH=/opt/gpufleet/validation/current"\n' in service
    assert (
        'ExecStart="/usr/local/bin/gpufleet-python" "-m" "validation.periodic" "--tier" "quick"'
        in service
    )
    assert '"--textfile-dir" "/srv/100%%"' in service  # % starts a systemd specifier
    assert monitoring.systemd_quote('a "b" \\c') == '"a \\"b\\" \\\\c"'


def test_finding22_dollar_in_a_unit_argument_is_not_expanded(tmp_path: Path) -> None:
    # systemd.service(5), "Command lines": $VAR is replaced by an environment variable, "$$"
    # is a literal dollar sign. The spec refuses '$' in paths; the quoting holds regardless.
    spec = NodeSpec(results_dir="/var/lib/$HOME/results")
    units = monitoring.unit_texts(spec, textfile=False)
    service = units[f"{monitoring.UNIT_DIR}/{monitoring.SERVICE}"] or ""
    assert '"--results-dir" "/var/lib/$$HOME/results"' in service
    assert "/$HOME" not in service
    result = verify(tmp_path, units)
    assert result.returncode == 0, result.stderr


def test_expectations_carry_no_secrets() -> None:
    spec = NodeSpec.from_host_data(
        {"apt_proxy": "http://user:pw@proxy:3128", "thresholds": {"xla_speedup_min": 1.2}}
    )
    text = monitoring.expectations_text("gpu-a", spec)
    assert "pw@" not in text
    data = json.loads(text)
    assert data["host_data"]["thresholds"] == {"xla_speedup_min": 1.2}
    assert data["expectations_version"] == 1 and data["host"] == "gpu-a"


# ------------------------------------------------------------------ the stage's plan (@fake)

DEPLOY = """from gpufleet.stages.monitoring import baseline_to_host, periodic_checks
periodic_checks()
baseline_to_host(results_dir={results!r})
"""


def done_responses(spec: NodeSpec, host: str, textfile: bool) -> dict[str, list[str]]:
    """Fact answers of a host where the stage already ran."""
    files = {
        path: text
        for path, text in monitoring.unit_texts(spec, textfile=textfile).items()
        if text is not None
    }
    files[monitoring.EXPECTATIONS] = monitoring.expectations_text(host, spec)
    responses = {
        f"stat -c %a {path}": ["644", f"{hashlib.sha256(text.encode()).hexdigest()}  {path}"]
        for path, text in files.items()
    }
    timer = monitoring.TIMER
    responses[f"SubState {timer}"] = [f"Id={timer}", "SubState=waiting"]
    responses[f"UnitFileState {timer}"] = [f"Id={timer}", "UnitFileState=enabled"]
    return responses


BASELINE_RUN = ff.document("@fake/fresh", started_at=ff.when(1), workloads=[])["run_id"]


@dataclass
class StagedHost(FakeGpuHost):
    """A fake host with extra fact answers (those of a host the stage already ran on)."""

    extra: dict[str, Any] = field(default_factory=dict)

    def data(self, host_name: str = "") -> dict[str, Any]:
        data = super().data(host_name)
        data["fake_responses"].update(self.extra)
        # The several-files answer (FileDigests) must describe the same files.
        data["fake_responses"]["gpufleet-digests"] = digests_answer(data["fake_responses"])
        return data


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("monitoring")
    hosts = {
        "fresh": FakeGpuHost(),
        "done": StagedHost(extra=done_responses(NodeSpec(), "@fake/done", False)),
        "exporter": FakeGpuHost(inventory={"node_exporter": True, "textfile_dir": "/srv/m"}),
        "off": FakeGpuHost(inventory={"periodic_checks": False}),
    }
    inventory = write_inventory(folder / "inventory.py", hosts)
    results = folder / "results"
    first = ff.document("@fake/fresh", started_at=ff.when(1), workloads=ff.gpu_workloads())
    assert record_run(results, first) is not None
    deploy = folder / "monitoring_only.py"
    deploy.write_text(DEPLOY.format(results=str(results)))
    result, plan = pyinfra_cli.plan(inventory, deploy)
    assert result.returncode == 0, result.stderr[-3000:]
    changes: dict[str, list[str]] = {name: [] for name in hosts}
    for op in plan:
        for host in op["hosts_with_change"] + op["hosts_with_conditional_change"]:
            changes[host.removeprefix("@fake/")].append(op["name"])
    return changes


def test_fresh_host_gets_expectations_units_and_a_started_timer(plan: dict) -> None:
    assert plan["fresh"] == [
        "gpufleet monitoring | /etc/gpufleet/expectations.json: expectations for the periodic "
        "checks",
        "gpufleet monitoring | /etc/systemd/system/gpufleet-periodic.service, "
        "gpufleet-periodic.timer: periodic checks' units",
        "gpufleet monitoring | gpufleet-periodic.timer enabled",
        "gpufleet monitoring | gpufleet-periodic.timer started",
        f"gpufleet baseline | baseline (run {BASELINE_RUN}) in /var/lib/gpufleet/baseline.json",
    ]


def test_host_where_the_stage_ran_plans_no_change(plan: dict) -> None:
    assert plan["done"] == []


def test_node_exporter_is_installed_and_pointed_at_the_textfile_dir(plan: dict) -> None:
    ops = plan["exporter"]
    assert "gpufleet monitoring | prometheus-node-exporter (textfile collector)" in ops
    assert (
        "gpufleet monitoring | /etc/systemd/system/prometheus-node-exporter.service.d/"
        "gpufleet-textfile.conf: prometheus-node-exporter reads textfiles from /srv/m" in ops
    )
    assert "gpufleet monitoring | prometheus-node-exporter.service enabled" in ops
    assert "gpufleet monitoring | prometheus-node-exporter.service running" in ops


def test_periodic_checks_off_plans_nothing(plan: dict) -> None:
    assert plan["off"] == []

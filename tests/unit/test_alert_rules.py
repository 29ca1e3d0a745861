"""The shipped Prometheus alert rules: well formed, over metrics gpufleet writes, promtool-clean."""

from __future__ import annotations

import re
import subprocess

import yaml

from tests.conftest import REPO_ROOT
from tests.prerequisites import require_tools
from tests.unit.test_metric_names import written_names

RULES = REPO_ROOT / "prometheus" / "gpufleet.rules.yml"


def rules() -> list[dict]:
    document = yaml.safe_load(RULES.read_text())
    (group,) = document["groups"]
    return list(group["rules"])


def test_the_four_alerts_exist_and_are_complete() -> None:
    names = [r["alert"] for r in rules()]
    assert names == [
        "GpufleetHostFailed",
        "GpufleetDeclaredStateDrift",
        "GpufleetRegression",
        "GpufleetStaleRun",
    ]
    for rule in rules():
        assert rule["expr"] and rule["labels"]["severity"] in ("critical", "warning")
        assert {"summary", "description", "runbook"} <= set(rule["annotations"])
        runbook = rule["annotations"]["runbook"]
        pointers = re.findall(r'(docs/[\w/.-]+\.md) "([^"]+)"', runbook)
        assert pointers, runbook  # each alert names a page and a heading in it
        for page, heading in pointers:
            text = (REPO_ROOT / page).read_text()
            assert re.search(rf"^#+ {re.escape(heading)}$", text, flags=re.MULTILINE), heading


def test_every_metric_an_alert_reads_is_written() -> None:
    written = written_names()
    for rule in rules():
        for name in re.findall(r"\bgpufleet_[a-z0-9_]+", rule["expr"]):
            assert name in written, (rule["alert"], name)


def test_promtool_accepts_the_rules() -> None:
    require_tools("promtool", install="apt-get install prometheus; scripts/bootstrap does")
    proc = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

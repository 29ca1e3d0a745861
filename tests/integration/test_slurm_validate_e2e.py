"""Issue 34 item 1 on the sandbox: `validate --scheduler slurm` as one Slurm job per node.

Three Slurm nodes booted on the session's provisioned snapshot, the whole deploy run again (the
Slurm stage, and the payload with its runner). `gpufleet validate inventories/sandbox.py --tier
quick --scheduler slurm` runs one job per node (Slurm's own record of them: sacct, or scontrol
where the sandbox keeps no accounting) and gathers three results. Then, in one run: a node
drained by gpufleet takes no job, the test cancels the job waiting for it, and that node is
"did not run" and stays drained; a node whose apt blacklist was cleared is drained with a
gpufleet reason. Events are asserted, not durations.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, Sandbox, first_deploy, running_sandbox
from tests.integration.slurm_helpers import node, on_controller
from tests.integration.test_slurm_e2e import BLACKLIST, CLEAR

pytestmark = pytest.mark.integration
INVENTORY = "inventories/sandbox.py"
HOSTS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
INJECT = "/etc/apt/apt.conf.d/zzzz-gf-inject"


@pytest.fixture(scope="module")
def slurm_fleet(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(3, standins=True, slurm=True, from_snapshot=provisioned) as sandbox:
        first_deploy(INVENTORY, "--parallel", "3")
        yield sandbox


def validate(results: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "gpufleet.cli", "validate", INVENTORY, "--tier", "quick"]
    argv += ["--scheduler", "slurm", "--results-dir", str(results), "--json", *extra]
    return subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def summary_of(out: str, err: str) -> dict:
    """validate's --json summary; its stderr in the failure when it printed none."""
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        raise AssertionError(f"validate printed no JSON:\n{out[-2000:]}\n{err[-4000:]}") from None


def documents(results: Path) -> dict[str, dict]:
    found = {}
    for host in HOSTS:
        (path,) = [p for p in results.glob(f"{host}/*.json") if not p.name.startswith("base")]
        found[host] = json.loads(path.read_text())
    return found


def our_jobs(sandbox: Sandbox, run_id: str) -> dict[str, tuple[str, str]]:
    """{job id: (state, node)} of the run's jobs as Slurm recorded them."""
    name = f"gpufleet-validate-{run_id}"
    acct = sandbox.ssh(0, f"sacct -n -P -X -o JobID,JobName,State,NodeList --name={name}")
    if acct.returncode == 0:
        rows = [line.split("|") for line in acct.stdout.split() if line]
        return {r[0]: (r[2].split()[0], r[3]) for r in rows}
    shown = on_controller(sandbox, "scontrol -o show job")
    jobs = {}
    for line in shown.splitlines():
        fields = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if fields.get("JobName") == name:
            jobs[fields["JobId"]] = (fields["JobState"], fields.get("NodeList", ""))
    return jobs


def test_one_job_per_node_three_results_gathered(slurm_fleet: Sandbox, tmp_path: Path) -> None:
    proc = validate(tmp_path)
    out, err = proc.communicate(timeout=1800)
    summary = summary_of(out, err)
    assert [h["host"] for h in summary["hosts"]] == list(HOSTS), err[-3000:]
    docs = documents(tmp_path)
    for host, doc in docs.items():
        assert doc["checks"], (host, doc["run_error"])
        assert doc["slurm_job"]["state"] in ("COMPLETED", "FAILED"), doc["slurm_job"]
        assert not doc.get("did_not_run")
    jobs = our_jobs(slurm_fleet, summary["run_id"])
    assert sorted(node for _state, node in jobs.values()) == list(HOSTS), jobs
    assert {doc["slurm_job"]["id"] for doc in docs.values()} == set(jobs)
    assert "job" in err and "submitted" in err  # the submit lines went to stderr (--json)


def test_a_cancelled_job_did_not_run_and_a_failing_node_is_drained(
    slurm_fleet: Sandbox, tmp_path: Path
) -> None:
    held, sick, well = HOSTS[2], HOSTS[1], HOSTS[0]
    reason = f"gpufleet: host_state::{BLACKLIST}: e2e hold"
    on_controller(slurm_fleet, f"scontrol update NodeName={held} State=DRAIN Reason='{reason}'")
    assert slurm_fleet.ssh(sick, f"echo '{CLEAR}' > {INJECT}").returncode == 0
    try:
        proc = validate(tmp_path, "--select", f"host_state::{BLACKLIST}", "--slurm-wait", "1800")
        # the held node's job waits (its node is drained): cancel it as an operator would
        deadline = time.monotonic() + 300
        pending = ""
        while not pending and proc.poll() is None and time.monotonic() < deadline:
            queued = on_controller(slurm_fleet, "squeue -h -t PENDING -o '%i|%j|%n'")
            pending = next(
                (
                    job
                    for job, name, asked in (line.split("|") for line in queued.split())
                    if name.startswith("gpufleet-validate-") and asked == held
                ),
                "",
            )
            time.sleep(1)
        if not pending:
            out, err = proc.communicate(timeout=900) if proc.poll() is not None else ("", "")
            raise AssertionError(f"no job of the run waited for the drained node:\n{err[-4000:]}")
        on_controller(slurm_fleet, f"scancel {pending}")
        out, err = proc.communicate(timeout=900)
        summary = summary_of(out, err)
        docs = documents(tmp_path)
        assert proc.returncode == 2, err[-3000:]  # a node did not run: exit 2, never a pass
        assert docs[held]["did_not_run"]["state"] == "CANCELLED", docs[held]
        assert docs[held]["run_error"].startswith("did not run: ")
        assert next(h for h in summary["hosts"] if h["host"] == held)["did_not_run"] is True
        state, kept = node(slurm_fleet, held)
        assert state.startswith("drain") and kept == reason, (state, kept)  # not resumed
        assert docs[sick]["status"] == "fail"
        state, why = node(slurm_fleet, sick)
        assert state.startswith("drain") and why.startswith("gpufleet: "), (state, why)
        assert BLACKLIST in why
        assert docs[well]["status"] == "pass", docs[well]
        assert not node(slurm_fleet, well)[0].startswith("drain")
    finally:
        slurm_fleet.ssh(sick, f"rm -f {INJECT}")
        for host in (held, sick):
            slurm_fleet.ssh(0, f"scontrol update NodeName={host} State=RESUME")

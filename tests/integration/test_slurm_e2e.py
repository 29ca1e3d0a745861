"""Real Slurm on the sandbox: the cluster itself, the health check's drain/resume, rollouts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.sandbox.image import MARKER, images_dir
from tests.integration.conftest import REPO, Sandbox, gpufleet
from tests.integration.slurm_helpers import Sampler, node, on_controller, saved_states, wait_for
from validation.host.healthcheck import LAST_ROUND

pytestmark = pytest.mark.integration
HOSTS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Sandbox]:
    """`gpufleet sandbox up --hosts 3 --slurm`, torn down after the module."""
    from gpufleet.sandbox.state import load_state

    cached = any(images_dir().glob(f"*/{MARKER}"))
    gpufleet("sandbox", "down", timeout=300)
    started = time.monotonic()
    try:
        gpufleet("sandbox", "up", "--hosts", str(HOSTS), "--slurm", timeout=1200)
        up_s = time.monotonic() - started
        print(f"\nsandbox up --hosts {HOSTS} --slurm: {up_s:.1f} s (image cached: {cached})")
        yield Sandbox(load_state(), up_s, cached)
    finally:
        gpufleet("sandbox", "down", check=False, timeout=300)


def test_every_host_is_an_idle_slurm_node(cluster: Sandbox) -> None:
    out = on_controller(cluster, "sinfo -h -N -o '%N %T %G'")
    nodes = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert sorted(nodes) == [h.name for h in cluster.state.hosts]
    for name, (state, gres) in nodes.items():
        assert state == "idle", f"{name}: {state}"
        assert gres.startswith("gpu:2"), f"{name} declares {gres}"


def test_srun_runs_on_every_host(cluster: Sandbox) -> None:
    out = on_controller(cluster, f"srun -N{HOSTS} --ntasks-per-node=1 hostname", timeout=60)
    assert sorted(out.split()) == [h.name for h in cluster.state.hosts]


def test_sbatch_job_with_a_gpu_runs_on_the_host_asked_for(cluster: Sandbox) -> None:
    target = cluster.state.hosts[-1].name
    job = on_controller(
        cluster,
        f"sbatch --parsable -w {target} --gres=gpu:1 -o /tmp/gf-job.out "
        "--wrap 'hostname; echo gpus=$CUDA_VISIBLE_DEVICES'",
    ).strip()
    deadline = time.monotonic() + 60
    while on_controller(cluster, f"squeue -h -j {job}").strip():
        assert time.monotonic() < deadline, f"job {job} did not finish within 60 s"
        time.sleep(1)
    out = cluster.ssh(target, "cat /tmp/gf-job.out").stdout.split()
    assert out[:1] == [target], f"job {job}: {out}"
    assert out[1] == "gpus=0", out


def test_inventory_says_slurm_and_names_the_controller(cluster: Sandbox) -> None:
    code = (
        "import runpy, json; ns = runpy.run_path('inventories/sandbox.py');"
        "print(json.dumps(ns['sandbox'][1]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=os.environ
    )
    assert proc.returncode == 0, proc.stderr
    assert '"scheduler": "slurm"' in proc.stdout
    assert f'"slurm_controller": "{cluster.state.hosts[0].address}"' in proc.stdout


INTERVAL_S = 10  # slurm_health_interval for these tests: Slurm runs the check this often


@pytest.fixture(scope="module")
def integrated(cluster: Sandbox) -> Sandbox:
    """The driver stand-ins, the payload and scheduler_integration deployed with pyinfra."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyinfra",
            "-y",
            "inventories/sandbox.py",
            "tests/integration/slurm_stages.py",
            "--data",
            f"slurm_health_interval={INTERVAL_S}",
            "--data",
            "driver_branch=570",  # the rollout test upgrades to 580
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYINFRA_PROGRESS": "off"},
    )
    print(f"\ndeploy with scheduler_integration: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return cluster


def test_stage_names_the_health_check_and_keeps_the_gpu_less_gres(integrated: Sandbox) -> None:
    conf = on_controller(integrated, "grep ^HealthCheck /etc/slurm/slurm.conf")
    assert "HealthCheckProgram=/usr/local/sbin/gpufleet-healthcheck" in conf
    assert f"HealthCheckInterval={INTERVAL_S}" in conf
    gres = on_controller(integrated, "cat /etc/slurm/gres.conf")
    assert "gpufleet sandbox" in gres  # no GPU on the bus: the stage left it alone


def test_health_check_passes_and_says_no_gpu(integrated: Sandbox) -> None:
    """How fast it is is a benchmark's to say (a loaded 2-core machine here); what it says is
    this test's."""
    started = time.monotonic()
    proc = integrated.ssh(1, "/usr/local/sbin/gpufleet-healthcheck")
    print(f"\nhealth check on a sandbox host: {time.monotonic() - started:.2f} s (incl. ssh)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no NVIDIA GPU" in proc.stdout and "pass     driver_packages" in proc.stdout


def test_unhealthy_host_drained_fixed_resumed_hand_drain_kept(integrated: Sandbox) -> None:
    sick, hand = integrated.state.hosts[1].name, integrated.state.hosts[2].name
    for host in (sick, hand):
        wait_for(integrated, host, lambda s, _r: s == "idle", 3 * INTERVAL_S)
    on_controller(
        integrated, f"scontrol update NodeName={hand} State=DRAIN Reason='operator: bad fan'"
    )
    for host in (sick, hand):
        assert integrated.ssh(host, "systemctl stop nvidia-persistenced").returncode == 0
    (state, reason), took = wait_for(
        integrated,
        sick,
        lambda s, r: s.startswith("drain") and r.startswith("gpufleet:"),
        3 * INTERVAL_S,
    )
    print(f"\ndrained {took:.1f} s after persistenced stopped (interval {INTERVAL_S} s)")
    assert reason.startswith("gpufleet: persistence: nvidia-persistenced is inactive"), reason
    assert node(integrated, hand)[1] == "operator: bad fan"
    for host in (sick, hand):
        assert integrated.ssh(host, "systemctl start nvidia-persistenced").returncode == 0
    (state, reason), took = wait_for(integrated, sick, lambda s, _r: s == "idle", 3 * INTERVAL_S)
    print(f"resumed {took:.1f} s after the fix")
    assert state == "idle", (state, reason)
    # One more round of checks on the hand-drained host, seen in slurmd's own log (a round
    # that never ran would prove nothing), must leave the operator's drain alone.
    rounds = last_round(integrated, hand)
    deadline = time.monotonic() + 4 * INTERVAL_S
    while last_round(integrated, hand) <= rounds:
        assert time.monotonic() < deadline, f"no health check round ran on {hand}"
        time.sleep(1)
    state, reason = node(integrated, hand)
    assert state.startswith("drain") and reason == "operator: bad fan", (state, reason)
    on_controller(integrated, f"scontrol update NodeName={hand} State=RESUME")  # for the next


def last_round(cluster: Sandbox, host: str) -> float:
    """When the health check's last Slurm round on `host` finished (0: none yet)."""
    out = cluster.ssh(host, f"cat {LAST_ROUND} 2>/dev/null").stdout
    return float(json.loads(out)["finished_at"]) if out.strip() else 0.0


# ------------------------------------------------------------------------------ rollout

BLACKLIST = "unattended_upgrades_blacklist"
GATE = f"driver_packages_locked or {BLACKLIST}"
# Written at boot by a unit the test leaves on one host: apt then has no blacklist, so the
# post-upgrade validation of that host (test_unattended_upgrades_blacklist) fails.
CLEAR = "#clear Unattended-Upgrade::Package-Blacklist;"
INJECT = f"""[Unit]
Description=gpufleet e2e stand-in fault: clear unattended-upgrades' package blacklist at boot
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "{CLEAR}" > /etc/apt/apt.conf.d/zzzz-gf-inject'
[Install]
WantedBy=multi-user.target
"""


# ------------------------------------------------- validate --scheduler slurm


def validate_slurm(cluster: Sandbox, results: Path, *hosts: str) -> subprocess.CompletedProcess:
    limits = [arg for host in hosts for arg in ("--limit", host)]
    # The blacklist alone: the module's hosts run the 570 branch, not the inventory's default.
    argv = ["validate", "inventories/sandbox.py", "--scheduler", "slurm", "--dispatch", "ssh"]
    argv += ["--select", BLACKLIST]
    argv += ["--results-dir", str(results), *limits]
    return gpufleet(*argv, check=False, timeout=600)


def results_of(results: Path, host: str) -> dict:
    runs = sorted(p for p in results.glob(f"{host}/*.json") if not p.name.startswith("baseline"))
    return json.loads(runs[-1].read_text())


def test_validate_scheduler_slurm_keeps_jobs_drains_a_failure_resumes_it(
    integrated: Sandbox, tmp_path: Path
) -> None:
    """`validate --scheduler slurm`: the busy host keeps its job (inconclusive); a host that
    fails a check the health check does not run (the blacklist) is drained, then resumed."""
    busy, sick = integrated.state.hosts[0].name, integrated.state.hosts[1].name
    for host in (busy, sick):
        wait_for(integrated, host, lambda s, _r: s == "idle", 3 * INTERVAL_S)
    job = on_controller(integrated, f"sbatch --parsable -w {busy} --wrap 'sleep 300'").strip()
    deadline = time.monotonic() + 30
    while not on_controller(integrated, f"squeue -h -t RUNNING -j {job}").strip():
        assert time.monotonic() < deadline, f"job {job} did not start on {busy}"
        time.sleep(0.5)
    inject = f"echo '{CLEAR}' > /etc/apt/apt.conf.d/zzzz-gf-inject"
    assert integrated.ssh(sick, inject).returncode == 0
    started = time.monotonic()
    try:
        first = validate_slurm(integrated, tmp_path / "one", busy, sick)
        print(f"\nvalidate --scheduler slurm, 2 hosts: {time.monotonic() - started:.1f} s")
        assert first.returncode != 0, first.stdout  # the sick host fails
        kept = results_of(tmp_path / "one", busy)
        busy_check = next(c for c in kept["checks"] if c["name"].startswith("workloads::"))
        assert busy_check["status"] == "inconclusive" and job in busy_check["message"]
        assert on_controller(integrated, f"squeue -h -t RUNNING -j {job}").strip()
        assert node(integrated, busy)[0] in ("allocated", "mixed"), node(integrated, busy)
        state, reason = node(integrated, sick)
        assert state.startswith("drain"), (state, reason)
        assert reason.startswith("gpufleet: ") and "blacklist" in reason, reason
        assert integrated.ssh(sick, "rm /etc/apt/apt.conf.d/zzzz-gf-inject").returncode == 0
        second = validate_slurm(integrated, tmp_path / "two", sick)
        assert second.returncode == 0, second.stdout + second.stderr
        assert not node(integrated, sick)[0].startswith("drain"), node(integrated, sick)
        # idle, once slurmctld's next ping finds it (under load a ping can miss: `idle*`)
        (state, reason), _took = wait_for(integrated, sick, lambda s, _r: s == "idle", 30)
        assert state == "idle", (state, reason)
    finally:
        integrated.ssh(sick, "rm -f /etc/apt/apt.conf.d/zzzz-gf-inject")
        on_controller(integrated, f"scancel {job}")
        for host in (busy, sick):  # whatever this test drained, for the tests after it
            if node(integrated, host)[0].startswith("drain"):
                integrated.ssh(0, f"scontrol update NodeName={host} State=RESUME")


# ------------------------------------------------------------------ the rollout itself


def rollout_args(tmp: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gpufleet.cli",
        "rollout",
        "inventories/sandbox.py",
        "tests/integration/slurm_stages.py",
        "--data",
        "driver_branch=580",
        "--data",
        f"slurm_health_interval={INTERVAL_S}",
        "--select",
        GATE,
        "--state-file",
        str(tmp / "state.json"),
        "--textfile",
        str(tmp / "rollout.prom"),
        "--results-dir",
        str(tmp / "results"),
        *extra,
    ]


def test_a_rollout_refused_before_its_first_change_leaves_every_node_as_it_was(
    integrated: Sandbox, tmp_path: Path
) -> None:
    """Issue 33 on real Slurm: a `--data` typo (no `--dry`) and a run with no scheduler and no
    way to drain are both refused before any host is drained, deployed or rebooted."""
    names = [h.name for h in integrated.state.hosts]
    before = {name: node(integrated, name) for name in names}
    typo = [a.replace("driver_branch=", "driver_brnach=") for a in rollout_args(tmp_path)]
    unguarded = [*rollout_args(tmp_path), "--scheduler", "none"]
    for argv, says in (
        (typo, ("'driver_brnach'", "'driver_branch'", "no host was touched")),
        (unguarded, ("no --cordon-cmd", "--no-drain")),
    ):
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert all(text in proc.stderr for text in says), proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
    assert {name: node(integrated, name) for name in names} == before
    assert not (tmp_path / "state.json").exists()


def test_rollout_570_to_580_one_at_a_time_job_kill_and_failure(
    integrated: Sandbox, tmp_path: Path
) -> None:
    first, faulty, last = (h.name for h in integrated.state.hosts)
    unit = f"cat > /etc/systemd/system/gf-inject.service <<'EOF'\n{INJECT}EOF\n"
    assert integrated.ssh(faulty, unit + "systemctl enable gf-inject.service").returncode == 0
    # The job says when it ended, by the clock the rollout's history is kept in (one kernel).
    job_end = "/tmp/gf-job-end"
    wrap = f"rm -f {job_end}; sleep 40; date +%s.%N > {job_end}"
    job = on_controller(integrated, f"sbatch --parsable -w {first} --wrap '{wrap}'").strip()
    deadline = time.monotonic() + 30  # a job still pending on a drained node never runs there
    while not on_controller(integrated, f"squeue -h -t RUNNING -j {job}").strip():
        assert time.monotonic() < deadline, f"job {job} did not start on {first}"
        time.sleep(0.5)
    sampler = Sampler(integrated)
    started = time.monotonic()
    env = {**os.environ, "PYINFRA_PROGRESS": "off"}
    one = ("--max-unavailable", "1", "--max-failures", "1")
    proc = subprocess.Popen(
        rollout_args(tmp_path, *one),
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    running_seen = False
    while saved_states(tmp_path).get(first) != "deploying" and proc.poll() is None:
        if saved_states(tmp_path).get(first) == "waiting-for-jobs":
            running = on_controller(integrated, f"squeue -h -t RUNNING -j {job}").strip()
            running_seen |= bool(running)
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and its pyinfra child, mid-deploy
    proc.wait(30)
    killed_at = saved_states(tmp_path)
    print(f"\nkilled at {killed_at} after {time.monotonic() - started:.0f} s")
    history = json.loads((tmp_path / "state.json").read_text())["hosts"][0]["history"]
    deploying_at = next(t for t, s in history if s == "deploying")
    # the job (40 s) held the host in waiting-for-jobs: no deploy while it ran
    assert running_seen, "the job was not seen running while the host waited for it"
    ended = integrated.ssh(first, f"cat {job_end}").stdout.strip()
    assert ended, f"job {job} never finished on {first}, yet the deploy began"
    assert deploying_at >= float(ended), f"deploy began {float(ended) - deploying_at:.1f} s early"
    assert killed_at[first] == "deploying"
    assert node(integrated, first)[1].startswith("gpufleet: rollout:")
    second = subprocess.run(
        rollout_args(tmp_path, *one),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(second.stdout[-2500:])
    assert second.returncode == 1, second.stdout + second.stderr
    assert saved_states(tmp_path) == {first: "done", faulty: "failed", last: "pending"}
    assert "--max-failures 1 reached" in second.stdout
    state, reason = node(integrated, faulty)
    assert state.startswith("drain") and reason.startswith("gpufleet: rollout: validation failed")
    assert sampler.peak() <= 1, sampler.samples
    third = subprocess.run(
        rollout_args(tmp_path, "--max-unavailable", "2", "--max-failures", "2"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert third.returncode == 1, third.stdout + third.stderr  # one host failed
    assert saved_states(tmp_path) == {first: "done", faulty: "failed", last: "done"}
    assert node(integrated, faulty)[1].startswith("gpufleet: rollout: validation failed")
    for name in (first, last):
        assert node(integrated, name)[0] == "idle"
        version = integrated.ssh(name, "dpkg-query -W -f '${Version}' nvidia-open").stdout
        assert version.startswith("580."), version
    prom = (tmp_path / "rollout.prom").read_text()
    assert 'gpufleet_rollout_hosts{state="done"} 2' in prom
    assert 'gpufleet_rollout_hosts{state="failed"} 1' in prom
    print(f"rollout of 3 hosts with kill and restart: {time.monotonic() - started:.0f} s")

"""benchmarks/fleet_scale.py's core (issue 34 item 3): /proc parsing, the fit, the projection."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _model():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "fleet_scale_model", BENCHMARKS / "fleet_scale_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fleet_scale_model"] = module
    spec.loader.exec_module(module)
    return module


model = _model()


def test_stat_and_status_are_read_even_with_odd_command_names() -> None:
    assert model.parse_stat("4242 (ssh) S 4200 4242 4242 0 -1 4194560") == (4242, 4200, "ssh")
    assert model.parse_stat("7 (tmux: (srv) x) S 1 7 7") == (7, 1, "tmux: (srv) x")
    assert model.parse_rss_kib("Name:\tssh\nVmRSS:\t   10240 kB\nThreads: 1\n") == 10240
    assert model.parse_rss_kib("Name:\tkthreadd\n") == 0


def test_the_tree_below_the_command_and_its_ssh_sessions() -> None:
    procs = [
        model.Proc(1, 0, "init"),
        model.Proc(10, 1, "python", 50_000),
        model.Proc(11, 10, "ssh", 8_000),
        model.Proc(12, 10, "python", 40_000),
        model.Proc(13, 12, "ssh", 8_000),
        model.Proc(20, 1, "ssh", 8_000),  # someone else's
    ]
    tree = model.descendants(procs, 10)
    assert sorted(p.pid for p in tree) == [10, 11, 12, 13]
    assert model.ssh_sessions(tree) == 2


def test_the_fit_finds_fixed_cost_and_per_host_cost() -> None:
    fixed, per_host = model.fit([(1, 12.0), (3, 16.0), (6, 22.0)])
    assert fixed == pytest.approx(10.0) and per_host == pytest.approx(2.0)
    assert model.fit([(2, 8.0)]) == (0.0, 4.0)


def test_a_falling_fit_projects_the_largest_measured_figure_not_a_negative_one() -> None:
    # the sandbox's deploy no-op, 1-3 hosts (CPU s): the first run paid a warm-up
    assert model.fit([(1, 2.66), (2, 2.27), (3, 2.55)]) == (2.66, 0.0)


def test_memory_over_ssh_is_held_by_the_pool_not_the_fleet() -> None:
    pooled = model.project(samples(), 5000, pool=64, fd_limit=10**6, cpus=2, memory_mib=10**6)
    assert pooled.rss_mib == pytest.approx(model.project(
        samples(), 64, pool=64, fd_limit=10**6, cpus=2, memory_mib=10**6).rss_mib)  # fmt: skip


def test_slurm_jobs_run_everywhere_at_once_but_are_gathered_a_pool_at_a_time() -> None:
    gathered = model.project(
        samples(), 5000, pool=None, sessions=64, fd_limit=10**6, cpus=10**6, memory_mib=10**6
    )
    assert gathered.ssh == 64 and gathered.wall_s == pytest.approx(60.0)  # one wave of jobs


def samples(pool_wall: float = 60.0):  # type: ignore[no-untyped-def]
    return [
        model.Sample(1, cpu_s=3.0, rss_mib=120, ssh=1, fds=20, wall_s=pool_wall),
        model.Sample(3, cpu_s=5.0, rss_mib=160, ssh=3, fds=40, wall_s=pool_wall + 2),
        model.Sample(6, cpu_s=7.5, rss_mib=220, ssh=6, fds=70, wall_s=pool_wall + 5),
    ]


def test_the_ssh_pool_sets_sessions_and_waves_of_wall_time() -> None:
    pooled = model.project(samples(), 1000, pool=64, fd_limit=1024, cpus=2, memory_mib=8192)
    assert pooled.ssh == 64  # one session per host, at most the pool at once
    assert pooled.wall_s == pytest.approx(60.0 * 16)  # ceil(1000 / 64) waves of one host
    at_once = model.project(samples(), 1000, pool=None, fd_limit=1024, cpus=2, memory_mib=8192)
    assert at_once.ssh == 1000 and at_once.wall_s < pooled.wall_s
    assert any("ulimit -n 1024" in limit for limit in at_once.limits)
    assert not any("ulimit" in limit for limit in pooled.limits)


def test_cpu_and_memory_limits_are_named() -> None:
    heavy = [model.Sample(1, 50.0, 500, 1, 10, 10.0), model.Sample(3, 150.0, 1500, 3, 30, 12.0)]
    projection = model.project(heavy, 5000, pool=None, fd_limit=10**6, cpus=4, memory_mib=4096)
    assert any(limit.startswith("CPU-bound") for limit in projection.limits)
    assert any(limit.startswith("memory") for limit in projection.limits)
    lines = model.report("deploy no-op", heavy, {5000: projection})
    assert lines[0] == "deploy no-op:" and "projected  5000 hosts" in lines[-1]


def test_dry_plan_prints_the_commands_and_projects_saved_figures(tmp_path: Path) -> None:
    saved = tmp_path / "figures.json"
    saved.write_text(json.dumps({"validate (SSH)": [s.__dict__ for s in samples()]}))
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "fleet_scale.py"),
            "--dry-plan",
            "--hosts",
            "1,3",
            "--from",
            str(saved),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 hosts, validate (Slurm):" in proc.stdout and "--scheduler slurm" in proc.stdout
    assert "--limit gfsb-h3" in proc.stdout
    assert "formula: figure(N) = fixed + per_host * N" in proc.stdout
    assert "projected  1000 hosts" in proc.stdout

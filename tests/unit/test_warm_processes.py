"""validation.workloads.warm: the processes it re-runs are the tiers' own, and what it records."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from validation.verdicts.tiers import BUNDLED, FULL_WORKLOADS, QUICK_WORKLOADS, XLA_COMPILED
from validation.workloads import _throughput, mirrored, warm, xla_cache

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def _no_host_gpus(monkeypatch, tmp_path: Path) -> None:
    """The GPU set is read from no /proc of the machine the tests run on (a GPU host's differs)."""
    monkeypatch.setattr(xla_cache, "PROC_ROOT", tmp_path / "no-driver")


def test_each_tiers_xla_process_is_re_run_as_the_tier_runs_it() -> None:
    layout = [
        (p.tier, p.workloads, p.gpu, p.bundle) for p in warm.warm_processes(["quick", "full"], 8)
    ]
    assert layout == [
        ("quick", ("resnet50",), None, True),  # the quick tier's one process, every GPU seen
        ("full", ("resnet50",), "0", False),  # GPU 0's process of the eight (same keys)
        ("full", ("bert_large",), "0", False),
        ("full", ("mirrored",), None, False),  # MirroredStrategy over every GPU
        ("full", ("xla",), "0", False),
        ("full", ("mixed_precision",), "0", False),  # both arms XLA (review 2, N1)
    ]
    assert [p.workloads for p in warm.warm_processes(["full"], 0, only=["xla"])] == [("xla",)]
    assert warm.warm_processes(["full"], 0, only=["xla"])[0].gpu is None  # no GPU: as it is


def test_the_command_lines_are_the_tiers_with_warm_cache() -> None:
    quick, resnet, *_ = warm.warm_processes(["quick", "full"], 8)
    assert quick.argv("py") == [
        *("py", "-m", "validation.workloads.bundle", "--workloads", "resnet50"),
        *("--quick", "--warm-cache"),
    ]
    assert resnet.argv("py") == ["py", "-m", "validation.workloads.resnet50", "--warm-cache"]
    base = {"PATH": "/bin", "TF_XLA_FLAGS": f"{xla_cache.FLAG}/old --tf_xla_auto_jit=2"}
    env = resnet.environment(base, Path("/c"))
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["TF_XLA_FLAGS"] == f"{xla_cache.FLAG}/c --tf_xla_auto_jit=2"
    assert "CUDA_VISIBLE_DEVICES" not in quick.environment(base, Path("/c"))
    assert quick.timeout_s == 300 and resnet.timeout_s == 1800


def test_the_xla_workloads_are_those_whose_gpu_steps_xla_compiles() -> None:
    """XLA_COMPILED follows the workloads' own settings, so no compiled step goes unwarmed."""
    assert _throughput.QUICK_GPU["jit_compile"] and _throughput.FULL_GPU["jit_compile"]
    assert not mirrored.QUICK_GPU["jit_variant"] and mirrored.FULL["jit_variant"]
    assert XLA_COMPILED["quick"] == ("resnet50",)  # of QUICK_WORKLOADS, bert/xla are full only
    assert set(XLA_COMPILED["quick"]) <= set(QUICK_WORKLOADS) == set(BUNDLED["quick"])
    assert set(XLA_COMPILED["full"]) == {
        *("resnet50", "bert_large", "mirrored", "xla", "mixed_precision")
    }
    for name in set(FULL_WORKLOADS) - set(XLA_COMPILED["full"]):
        source = (ROOT / "validation" / "workloads" / f"{name}.py").read_text()
        assert not re.search(r"jit_compile=(?!False)", source), name


class _Run:
    """subprocess.run as the warm-up calls it, each workload's exit status canned."""

    def __init__(self, status: dict[str, int]) -> None:
        self.status, self.argv = status, []

    def __call__(self, argv: list[str], **kwargs: Any) -> SimpleNamespace:
        self.argv.append(argv)
        name = argv[argv.index("-m") + 1].rsplit(".", 1)[1]
        env = dict(kwargs["env"])
        xla_cache.prepare(env)  # what the workload does first: TF_XLA_FLAGS gets its GPU set
        cache = xla_cache.cache_directory(env)
        assert cache is not None and cache.name.startswith("gpus-")
        (cache / f"xla_compile_cache__{name}__XLA_GPU_JIT.pb").write_bytes(b"x")
        return SimpleNamespace(returncode=self.status.get(name, 0))


def _main(monkeypatch, tmp_path: Path, status: dict[str, int], busy: str | None = None):
    fake = _Run(status)
    monkeypatch.setattr(warm.subprocess, "run", fake)
    monkeypatch.setattr(warm, "_gpu_count", lambda: 8)
    monkeypatch.setattr(warm, "_busy", lambda: busy)
    cache = tmp_path / "cache"
    rc = warm.main(["--cache-dir", str(cache), "--marker-text", "TF 2.21; payload p; GPUs 8x"])
    return rc, fake, cache


def test_the_marker_is_written_once_every_process_compiled(monkeypatch, tmp_path, capsys) -> None:
    rc, fake, cache = _main(monkeypatch, tmp_path, {})
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(fake.argv) == 6
    assert (cache / xla_cache.MARKER).read_text() == "TF 2.21; payload p; GPUs 8x\n"
    assert report["warm_up"] is True and report["status"] == "warmed"
    assert report["gpu_set"] == "gpus-none" and "removed_gpu_sets" not in report  # no driver
    assert (report["entries_before"], report["entries_after"]) == (0, 6)
    assert len(xla_cache.entries(cache / "gpus-none")) == 6 and not xla_cache.entries(cache)
    assert [p["exit_status"] for p in report["processes"]] == [0] * 6


def test_the_warm_up_counts_its_sets_entries_and_drops_other_sets(
    monkeypatch, tmp_path, capsys
) -> None:
    """After a GPU swap: the old set's folder goes, the entries counted are the new set's."""
    root = tmp_path / "proc"
    (root / "gpus" / "0000:62:00.0").mkdir(parents=True)
    version = FIXTURES / "driver_version" / "proc_open_565_ubuntu2404.txt"
    (root / "version").write_text(version.read_text())
    (root / "gpus" / "0000:62:00.0" / "information").write_text(
        (FIXTURES / "proc_nvidia" / "information_h100_80gb_hbm3.txt").read_text()
    )
    monkeypatch.setattr(xla_cache, "PROC_ROOT", root)
    key = xla_cache.gpu_set_key()
    cache = tmp_path / "cache"
    (cache / "gpus-aaaaaaaaaaaa").mkdir(parents=True)  # the A100s the host had
    (cache / "gpus-aaaaaaaaaaaa" / "xla_compile_cache__old__XLA_GPU_JIT.pb").write_bytes(b"x")
    (cache / key).mkdir()
    (cache / key / "xla_compile_cache__xla__XLA_GPU_JIT.pb").write_bytes(b"x")  # one of six
    rc, _, cache = _main(monkeypatch, tmp_path, {})
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["gpu_set"] == key
    assert (report["entries_before"], report["entries_after"]) == (1, 6)
    assert report["removed_gpu_sets"] == ["gpus-aaaaaaaaaaaa"]
    assert sorted(p.name for p in cache.iterdir()) == sorted([key, xla_cache.MARKER])


def test_a_failed_process_leaves_no_marker(monkeypatch, tmp_path, capsys) -> None:
    rc, _, cache = _main(monkeypatch, tmp_path, {"bert_large": 1})
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and not (cache / xla_cache.MARKER).exists()
    assert report["status"] == "1 of 6 processes failed: marker not written"


def test_a_busy_gpu_starts_nothing(monkeypatch, tmp_path, capsys) -> None:
    rc, fake, cache = _main(monkeypatch, tmp_path, {}, busy="GPU busy (PIDs 42 python on GPU 0)")
    assert rc == warm.BUSY and fake.argv == [] and not cache.exists()
    assert json.loads(capsys.readouterr().out)["status"].startswith("not started: GPU busy")


def test_a_cache_folder_tensorflow_cannot_be_given_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    for argv in ([], ["--cache-dir", "/a b"], ["--cache-dir", "rel"], ["--tiers", "cluster"]):
        with pytest.raises(SystemExit) as stopped:
            warm.main(argv)
        assert stopped.value.code == 2

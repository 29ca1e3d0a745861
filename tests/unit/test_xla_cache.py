"""validation.xla_cache: the cache directory from TF_XLA_FLAGS, and its size bound."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

from validation import xla_cache

FLAG = xla_cache.FLAG


def test_cache_directory_reads_the_last_flag_and_nothing_else() -> None:
    assert xla_cache.cache_directory({}) is None
    assert xla_cache.cache_directory({"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}) is None
    flags = f"{FLAG}/a --tf_xla_auto_jit=2 {FLAG}/b"
    assert xla_cache.cache_directory({"TF_XLA_FLAGS": flags}) == Path("/b")
    assert xla_cache.cache_directory({"TF_XLA_FLAGS": f"{FLAG}"}) is None
    assert xla_cache.cache_directory({"TF_XLA_FLAGS": f'{FLAG}"/x'}) is None  # unbalanced


def _entry(folder: Path, name: str, size: int, age_s: int) -> Path:
    path = folder / f"xla_compile_cache__{name}__XLA_GPU_JIT.pb"
    path.write_bytes(b"x" * size)
    when = 1_700_000_000 - age_s
    os.utime(path, (when, when))
    return path


def test_prune_drops_the_oldest_entries_until_the_rest_fit(tmp_path: Path) -> None:
    old = _entry(tmp_path, "old", 400, age_s=300)
    mid = _entry(tmp_path, "mid", 400, age_s=200)
    new = _entry(tmp_path, "new", 400, age_s=100)
    other = tmp_path / "notes.txt"
    other.write_bytes(b"y" * 5000)  # not a cache entry: never removed, not counted
    assert xla_cache.prune(tmp_path, max_bytes=1200) == []
    assert xla_cache.prune(tmp_path, max_bytes=900) == [old]
    assert xla_cache.prune(tmp_path, max_bytes=0) == [mid, new]
    assert other.exists()


def test_prepare_creates_a_private_directory_and_records_it(tmp_path: Path) -> None:
    folder = tmp_path / "home" / ".cache" / "gpufleet" / "xla"
    done = xla_cache.prepare({"TF_XLA_FLAGS": f"{FLAG}{folder}"})
    assert done == {"directory": str(folder), "max_bytes": xla_cache.MAX_BYTES, "pruned": 0}
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
    assert xla_cache.prepare({}) is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    failed = xla_cache.prepare({"TF_XLA_FLAGS": f"{FLAG}{blocked}/sub"})
    assert failed is not None and "error" in failed


def test_prune_drops_the_warm_up_marker_with_any_entry(tmp_path: Path) -> None:
    """A warm-up's set with an entry gone is no longer complete: the deploy warms again."""
    _entry(tmp_path, "a", 400, age_s=300)
    _entry(tmp_path, "b", 400, age_s=100)
    marker = tmp_path / xla_cache.MARKER
    marker.write_text("gpufleet XLA warm-up: ...\n")
    assert xla_cache.prune(tmp_path, max_bytes=1000) == []
    assert marker.exists()
    assert len(xla_cache.prune(tmp_path, max_bytes=500)) == 1
    assert not marker.exists()


def test_entries_are_the_complete_files_only(tmp_path: Path) -> None:
    _entry(tmp_path, "b", 1, age_s=1)
    (tmp_path / "xla_compile_cache__a__XLA_GPU_JIT.pb.tmp123").write_bytes(b"half")  # mid-write
    (tmp_path / xla_cache.MARKER).write_text("m\n")
    assert xla_cache.entries(tmp_path) == ["xla_compile_cache__b__XLA_GPU_JIT.pb"]


class _Counter:
    """tensorflow.python.framework.ops, as far as align_uids uses it: uid() counts up."""

    def __init__(self, start: int) -> None:
        self.next = start

    def uid(self) -> int:
        self.next += 1
        return self.next - 1


def test_each_compiled_trace_starts_at_its_mark_whatever_ran_before(monkeypatch) -> None:
    monkeypatch.setattr(xla_cache, "UID_STRIDE", 100)
    for already in (3, 57):  # two processes that made different numbers of calls first
        monkeypatch.setattr(xla_cache, "_TRACES", {"aligned": 0, "missed": 0})
        ops = _Counter(already)
        monkeypatch.setitem(sys.modules, "tensorflow.python.framework", SimpleNamespace(ops=ops))
        assert xla_cache.align_uids() is True
        assert ops.uid() == 100  # the first trace's function is named from here
        ops.next += 40 + already  # the trace, then calls
        assert xla_cache.align_uids() is True and ops.uid() == 200
        ops.next = 350  # a segment too long for the stride: this mark is missed
        assert xla_cache.align_uids() is False
        assert xla_cache.trace_marks() == {"aligned": 2, "missed": 1}


def test_keyed_wraps_only_compiled_steps_and_aligns_once(monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(xla_cache, "align_uids", lambda: calls.append("align") or True)

    def step(x: int) -> int:
        calls.append(f"step {x}")
        return x + 1

    step.experimental_get_compiler_ir = "ir"  # type: ignore[attr-defined]
    assert xla_cache.keyed(step, False) is step
    keyed = xla_cache.keyed(step, True)
    assert keyed(1) == 2 and keyed(2) == 3
    assert calls == ["align", "step 1", "step 2"]
    assert keyed.experimental_get_compiler_ir == "ir"  # the function's own attributes


def test_a_folder_others_can_write_is_not_used(tmp_path: Path) -> None:
    """TensorFlow would load executables someone else put there: the flag is dropped."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    environ = {"TF_XLA_FLAGS": f"{FLAG}{folder} --tf_xla_auto_jit=2"}
    done = xla_cache.prepare(environ)
    assert done is not None and str(done["error"]).startswith("not used: owned by uid")
    assert environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2"
    folder.chmod(0o755)  # the periodic unit's CacheDirectory= mode: only its owner writes
    environ = {"TF_XLA_FLAGS": f"{FLAG}{folder}"}
    assert "error" not in (xla_cache.prepare(environ) or {"error": "none"})
    assert environ["TF_XLA_FLAGS"] == f"{FLAG}{folder}"

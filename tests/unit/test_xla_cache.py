"""validation.xla_cache: the cache directory from TF_XLA_FLAGS, and its size bound."""

from __future__ import annotations

import os
from pathlib import Path

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

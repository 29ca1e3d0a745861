"""validation.workloads.xla_cache: the cache folder from TF_XLA_FLAGS, its GPU sets, size bound."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from validation.workloads import xla_cache

FLAG = xla_cache.FLAG
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H100 = FIXTURES / "proc_nvidia" / "information_h100_80gb_hbm3.txt"
GTX650 = FIXTURES / "proc_nvidia" / "information_gtx_650.txt"
DRIVER_565 = FIXTURES / "driver_version" / "proc_open_565_ubuntu2404.txt"
DRIVER_550 = FIXTURES / "driver_version" / "proc_proprietary_550.txt"


@pytest.fixture(autouse=True)
def _no_host_gpus(monkeypatch, tmp_path: Path) -> None:
    """prepare() reads no /proc of the machine the tests run on (a GPU host's would differ)."""
    monkeypatch.setattr(xla_cache, "PROC_ROOT", tmp_path / "no-driver")


def _proc(root: Path, version: Path, gpus: dict[str, Path]) -> Path:
    """A /proc/driver/nvidia tree: the driver's version file, one information file per GPU."""
    root.mkdir(parents=True)
    shutil.copy(version, root / "version")
    for bus, information in gpus.items():
        (root / "gpus" / bus).mkdir(parents=True)
        shutil.copy(information, root / "gpus" / bus / "information")
    return root


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
    assert done == {
        "directory": str(folder),
        "gpu_set": "gpus-none",  # this test's host has no NVIDIA driver (the autouse fixture)
        "max_bytes": xla_cache.MAX_BYTES,
        "pruned": 0,
    }
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
    assert ((folder / "gpus-none").stat().st_mode & 0o777) == 0o700
    assert xla_cache.prepare({}) is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    environ = {"TF_XLA_FLAGS": f"{FLAG}{blocked}/sub --tf_xla_auto_jit=2"}
    failed = xla_cache.prepare(environ)
    assert failed is not None and "error" in failed
    assert environ["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2"  # no cache rather than a wrong one


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
    assert environ["TF_XLA_FLAGS"] == f"{FLAG}{folder}/gpus-none"
    (folder / "gpus-none").chmod(0o777)  # the GPU set's folder is checked as well
    done = xla_cache.prepare(environ)
    assert done is not None and done["directory"] == str(folder / "gpus-none")
    assert str(done["error"]).startswith("not used:") and environ["TF_XLA_FLAGS"] == ""


def test_the_key_names_the_models_and_driver_of_the_real_proc_files(tmp_path: Path) -> None:
    eight = {f"0000:{b:02x}:00.0": H100 for b in range(0x10, 0x18)}
    root = _proc(tmp_path / "h100", DRIVER_565, eight)
    key, note = xla_cache.gpu_set(root)
    # sha256("driver 565.57.01\n" + 8 lines "NVIDIA H100 80GB HBM3", joined by newlines)
    assert (key, note) == ("gpus-99c889758f0e", None)
    assert xla_cache.gpu_set_key(root) == key


def test_the_key_follows_the_set_not_the_order(tmp_path: Path) -> None:
    def key(name: str, version: Path, gpus: dict[str, Path]) -> str:
        return xla_cache.gpu_set_key(_proc(tmp_path / name, version, gpus))

    mixed = key("mixed", DRIVER_565, {"0000:04:00.0": GTX650, "0000:62:00.0": H100})
    swapped = key("swapped", DRIVER_565, {"0000:04:00.0": H100, "0000:62:00.0": GTX650})
    assert mixed == swapped  # the same GPUs in other slots
    others = {
        key("model", DRIVER_565, {"0000:04:00.0": H100, "0000:62:00.0": H100}),
        key("count", DRIVER_565, {"0000:04:00.0": GTX650}),
        key("three", DRIVER_565, {"0000:04:00.0": GTX650, "0000:62:00.0": H100, "0:9:0.0": H100}),
        key("driver", DRIVER_550, {"0000:04:00.0": GTX650, "0000:62:00.0": H100}),
    }
    assert len(others) == 4 and mixed not in others
    assert all(xla_cache.base_directory(Path("/c") / k) == Path("/c") for k in others)


def test_no_driver_is_gpus_none_and_an_unreadable_file_a_stable_key_that_says_so(
    tmp_path: Path,
) -> None:
    assert xla_cache.gpu_set(tmp_path / "absent") == ("gpus-none", None)
    root = _proc(tmp_path / "p", DRIVER_565, {"0000:62:00.0": H100, "0000:63:00.0": H100})
    clean, _ = xla_cache.gpu_set(root)
    (root / "gpus" / "0000:63:00.0" / "information").unlink()
    (root / "gpus" / "0000:63:00.0" / "information").mkdir()  # reading it raises
    key, note = xla_cache.gpu_set(root)
    assert key.startswith("gpus-") and key != clean and xla_cache.gpu_set(root) == (key, note)
    assert note == f"{root}/gpus/0000:63:00.0/information: IsADirectoryError"
    (root / "gpus" / "0000:63:00.0" / "information").rmdir()
    (root / "gpus" / "0000:63:00.0" / "information").write_text("IRQ: 10\n")
    assert "no Model line" in str(xla_cache.gpu_set(root)[1])
    (root / "version").write_text("garbage\n")
    assert "no version number" in str(xla_cache.gpu_set(root)[1])
    (root / "version").unlink()
    assert "version: FileNotFoundError" in str(xla_cache.gpu_set(root)[1])


def test_prepare_appends_the_key_once(tmp_path: Path, monkeypatch) -> None:
    root = _proc(tmp_path / "proc", DRIVER_565, {"0000:62:00.0": H100})
    monkeypatch.setattr(xla_cache, "PROC_ROOT", root)
    key = xla_cache.gpu_set_key(root)
    base = tmp_path / "cache"
    environ = {"TF_XLA_FLAGS": f"--tf_xla_auto_jit=2 {FLAG}{base}"}
    first = xla_cache.prepare(environ)
    assert environ["TF_XLA_FLAGS"] == f"{FLAG}{base / key} --tf_xla_auto_jit=2"
    assert first is not None and (first["directory"], first["gpu_set"]) == (str(base), key)
    assert ((base / key).stat().st_mode & 0o777) == 0o700
    child = dict(environ)  # a child process inherits the keyed flag and prepares again
    assert xla_cache.prepare(environ) == first and xla_cache.prepare(child) == first
    assert (
        environ["TF_XLA_FLAGS"]
        == child["TF_XLA_FLAGS"]
        == f"{FLAG}{base / key} --tf_xla_auto_jit=2"
    )
    stale = {"TF_XLA_FLAGS": f"{FLAG}{base}/gpus-0123456789ab"}  # another set's: re-keyed
    assert xla_cache.prepare(stale) == first and stale["TF_XLA_FLAGS"] == f"{FLAG}{base / key}"
    assert sorted(p.name for p in base.iterdir()) == [key]


def test_a_new_gpu_set_drops_the_marker(tmp_path: Path) -> None:
    """The marker says the deploy warmed; a set without a folder was not warmed."""
    base = tmp_path / "cache"
    xla_cache.prepare({"TF_XLA_FLAGS": f"{FLAG}{base}"})
    (base / xla_cache.MARKER).write_text("gpufleet XLA warm-up: ...\n")
    xla_cache.prepare({"TF_XLA_FLAGS": f"{FLAG}{base}"})
    assert (base / xla_cache.MARKER).exists()  # the same set: still warm
    root = _proc(tmp_path / "proc", DRIVER_565, {"0000:62:00.0": H100})
    xla_cache.prepare({"TF_XLA_FLAGS": f"{FLAG}{base}"}, proc_root=root)
    assert not (base / xla_cache.MARKER).exists()


def test_prune_spans_every_gpu_set_oldest_first(tmp_path: Path) -> None:
    """A100s swapped for H100s: the A100s' entries are the oldest and go first."""
    (tmp_path / "gpus-aaaaaaaaaaaa").mkdir()
    (tmp_path / "gpus-bbbbbbbbbbbb").mkdir()
    a100_old = _entry(tmp_path / "gpus-aaaaaaaaaaaa", "a1", 400, age_s=500)
    unkeyed = _entry(tmp_path, "before-keys", 400, age_s=400)
    a100_new = _entry(tmp_path / "gpus-aaaaaaaaaaaa", "a2", 400, age_s=300)
    h100 = _entry(tmp_path / "gpus-bbbbbbbbbbbb", "h1", 400, age_s=100)
    marker = tmp_path / xla_cache.MARKER
    marker.write_text("gpufleet XLA warm-up: ...\n")
    assert xla_cache.prune(tmp_path, max_bytes=1600) == [] and marker.exists()
    assert xla_cache.prune(tmp_path, max_bytes=900) == [a100_old, unkeyed]
    assert not marker.exists()
    assert xla_cache.prune(tmp_path, max_bytes=400) == [a100_new] and h100.exists()


def test_drop_other_sets_keeps_this_one_and_what_is_not_a_set(tmp_path: Path) -> None:
    for name in ("gpus-aaaaaaaaaaaa", "gpus-bbbbbbbbbbbb", "gpus-notakey"):
        (tmp_path / name).mkdir()
        _entry(tmp_path / name, "e", 1, age_s=1)
    (tmp_path / xla_cache.MARKER).write_text("m\n")
    assert xla_cache.drop_other_sets(tmp_path, "gpus-bbbbbbbbbbbb") == ["gpus-aaaaaaaaaaaa"]
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [xla_cache.MARKER, "gpus-bbbbbbbbbbbb", "gpus-notakey"]

"""XLA's persistent compilation cache: where TF_XLA_FLAGS points it, its size, stable keys."""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

# TensorFlow's flag (tensorflow/compiler/jit/flags.cc, MarkForCompilationPassFlags), read by
# its DeviceCompiler (xla_platform_info.cc): compiled executables are saved there and loaded
# by later processes instead of compiling again. XLA never evicts an entry itself.
FLAG = "--tf_xla_persistent_cache_directory="
# The files TensorFlow writes there (its default tf_xla_persistent_cache_prefix).
ENTRY_GLOB = "xla_compile_cache*"
# gpufleet's choice: entries of older TensorFlow builds or sizes pile up (their keys change);
# beyond this the oldest go first, and a removed entry is only compiled again.
MAX_BYTES = 2 * 2**30
# Root's folder: the periodic unit's (systemd CacheDirectory=) and, through env.sh, every root
# process's, so the deploy's warm-up (validation.workloads.warm) serves both; root-owned.
ROOT_DIRECTORY = "/var/cache/gpufleet/xla-compile-cache"
# Written there by a warm-up that compiled every step of both tiers: what it was keyed by
# (TensorFlow, payload, GPUs). Removed by prune() when it removes an entry (the set is then
# incomplete), so the deploy warms again.
MARKER = "gpufleet-warm-up"
# What makes the keys stable. TensorFlow keys an entry (tensorflow/compiler/jit/
# device_executable_persistor.h, BuildSerializedCacheKey; the file name is
# XlaSerializedCacheKeyToFileName of the key) by the hash of the cluster signature, the
# compiled function's name with its attributes and the arguments' dtypes and shapes
# (device_compilation_cluster_signature.h, Build and Hash), by a hash of the HLO module
# (DeterministicProtoHash64), the device type (XLA_GPU_JIT: no GPU ordinal) and the file
# prefix; loading, it checks the stored HLO equals the new one (VerifyLoadedCacheEntry), and
# a miss compiles and saves (device_compiler.h, CompileStrict). Shapes, dtypes and the code
# traced are the tier's own; the function's name is not: tf.function names a trace
# ``__inference_<name>_<uid>`` (tensorflow/python/eager/polymorphic_function/
# concrete_function.py, _inference_name) from a process-wide counter, ops.uid(), that every
# tf.function call and many eager ops advance (TF 2.21, measured: +1 a call; both halves of
# the file name change with it). A step traced after a data-dependent number of calls
# (warm-ups that stop when times settle) would get a new key in every process, so keyed()
# starts each compiled step's trace at a fixed mark of that counter: the n-th such trace of
# a process at (n + 1) * UID_STRIDE.
# Between two marks a workload uses far fewer (TF 2.21, measured: building and tracing the
# BERT-Large AMP step 48,000, the ResNet-50 one 11,000, a call 1).
UID_STRIDE = 2**20
_TRACES = {"aligned": 0, "missed": 0}


def cache_directory(environ: Mapping[str, str] | None = None) -> Path | None:
    """The directory TF_XLA_FLAGS names for the cache, None when it names none.

    Example:
        >>> cache_directory({"TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/c"})
        PosixPath('/c')
    """
    flags = (os.environ if environ is None else environ).get("TF_XLA_FLAGS", "")
    try:
        words = shlex.split(flags)
    except ValueError:  # unbalanced quotes: TensorFlow would refuse it too
        return None
    found = [w[len(FLAG) :] for w in words if w.startswith(FLAG)]
    return Path(found[-1]) if found and found[-1] else None


def entries(directory: Path) -> list[str]:
    """The names of the complete entries in ``directory``, sorted (TensorFlow writes each to a
    ``.tmp`` file first and renames it to ``<key>.pb``, SaveSerializedEntry)."""
    return sorted(p.name for p in directory.glob(ENTRY_GLOB) if p.name.endswith(".pb"))


def prune(directory: Path, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Remove the oldest cache entries (by modification time) until the rest fit ``max_bytes``;
    the removed paths. Files that are not cache entries are left alone."""
    entries = []
    for path in directory.glob(ENTRY_GLOB):
        try:
            info = path.stat()
        except OSError:  # removed by another process meanwhile
            continue
        if path.is_file():
            entries.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in entries)
    removed: list[Path] = []
    for _, size, path in sorted(entries):
        if total <= max_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    if removed:
        with contextlib.suppress(OSError):  # none, or removed meanwhile
            (directory / MARKER).unlink()
    return removed


def prepare(environ: MutableMapping[str, str] | None = None) -> dict[str, object] | None:
    """Before TensorFlow starts: create the cache directory (private to its user) and bound it.
    What a workload records in its config; None when no cache is configured. A directory of
    another owner, or one others may write to, is not used: its flag leaves ``environ``
    (default: this process's environment), as TensorFlow would load what is there."""
    environ = os.environ if environ is None else environ
    directory = cache_directory(environ)
    if directory is None:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            owner = f"owned by uid {info.st_uid}, mode {info.st_mode & 0o777:o}"
            flags = shlex.split(environ.get("TF_XLA_FLAGS", ""))
            environ["TF_XLA_FLAGS"] = " ".join(w for w in flags if not w.startswith(FLAG))
            return {
                "directory": str(directory),
                "error": f"not used: {owner} (uid {os.geteuid()} runs)",
            }
        removed = prune(directory)
    except OSError as exc:  # TensorFlow then compiles without the cache; say why
        return {"directory": str(directory), "error": f"{type(exc).__name__}: {exc}"}
    return {"directory": str(directory), "max_bytes": MAX_BYTES, "pruned": len(removed)}


def align_uids() -> bool:
    """Advance TensorFlow's uid counter to this process's next mark (see UID_STRIDE); False
    when it is already past it (the key of the step traced next then varies between runs)."""
    from tensorflow.python.framework import ops  # the counter tf.function names traces by

    target = (_TRACES["aligned"] + _TRACES["missed"] + 1) * UID_STRIDE
    current = ops.uid()
    if current >= target:
        _TRACES["missed"] += 1
        return False
    while current < target - 1:  # the counter only counts up, one per call
        current = ops.uid()
    _TRACES["aligned"] += 1
    return True


def trace_marks() -> dict[str, int]:
    """How many compiled steps this process traced at their mark, and how many missed it."""
    return dict(_TRACES)


class KeyedStep:
    """A ``tf.function(jit_compile=True)`` whose first call (its trace) starts at a uid mark,
    so that its persistent-cache key is the same in every process that traces the same steps
    in the same order, however many calls ran before. Attributes are the function's."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function
        self._traced = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._traced:
            self._traced = True
            align_uids()
        return self._function(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._function, name)


def keyed(function: Any, jit_compile: bool) -> Any:
    """``function`` as a KeyedStep when XLA compiles it, else unchanged."""
    return KeyedStep(function) if jit_compile else function

"""XLA's persistent compilation cache: where TF_XLA_FLAGS points it, and a bound on its size."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

# TensorFlow's flag (tensorflow/compiler/jit/flags.cc, MarkForCompilationPassFlags), read by
# its DeviceCompiler (xla_platform_info.cc): compiled executables are saved there and loaded
# by later processes instead of compiling again. XLA never evicts an entry itself.
FLAG = "--tf_xla_persistent_cache_directory="
# The files TensorFlow writes there (its default tf_xla_persistent_cache_prefix).
ENTRY_GLOB = "xla_compile_cache*"
# gpufleet's choice: entries of older TensorFlow builds or sizes pile up (their keys change);
# beyond this the oldest go first, and a removed entry is only compiled again.
MAX_BYTES = 2 * 2**30


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
    return removed


def prepare(environ: Mapping[str, str] | None = None) -> dict[str, object] | None:
    """Before TensorFlow starts: create the cache directory (private to its user) and bound it.
    What a workload records in its config; None when no cache is configured."""
    directory = cache_directory(environ)
    if directory is None:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        removed = prune(directory)
    except OSError as exc:  # TensorFlow then compiles without the cache; say why
        return {"directory": str(directory), "error": f"{type(exc).__name__}: {exc}"}
    return {"directory": str(directory), "max_bytes": MAX_BYTES, "pruned": len(removed)}

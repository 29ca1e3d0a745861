"""XLA's persistent compilation cache: where TF_XLA_FLAGS points it per GPU set, size, keys."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
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
# beyond this the oldest go first, and a removed entry is only compiled again. The bound is
# the base folder's with every GPU set's folder in it, so a set the host lost goes first.
MAX_BYTES = 2 * 2**30
# Root's folder: the periodic unit's (systemd CacheDirectory=) and, through env.sh, every root
# process's, so the deploy's warm-up (validation.workloads.warm) serves both; root-owned.
ROOT_DIRECTORY = "/var/cache/gpufleet/xla-compile-cache"
# Written there by a warm-up that compiled every step of both tiers: what it was keyed by
# (TensorFlow, payload, GPUs). Removed by prune() when it removes an entry (the set is then
# incomplete), and by prepare() when it creates the folder of a new GPU set (nothing is warm
# for it), so the deploy warms again. It stays in the base folder, beside the GPU sets'.
MARKER = "gpufleet-warm-up"
# One subfolder of the base folder per GPU set and driver: TensorFlow's key (below) holds the
# device type, XLA_GPU_JIT, but no GPU model, compute capability or driver, so in one folder an
# executable compiled for the A100s a host had would be loaded for the H100s that replaced
# them, or after a driver change. prepare() points TF_XLA_FLAGS at <base>/<gpu_set_key()>:
# the models of every GPU the driver lists (sorted: order does not matter; the count does)
# and the driver version, read from /proc, no process started. A host mixing models still
# shares one folder among them (the key cannot tell which GPU a process compiles for).
KEY_PREFIX = "gpus-"
NO_GPUS = "gpus-none"  # no NVIDIA driver loaded: a CPU host, CI
_KEY = re.compile(r"^gpus-(?:none|[0-9a-f]{12})$")
PROC_ROOT = Path("/proc/driver/nvidia")
# "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for ]x86_64  565.57.01  Release Build ...":
# the number only, since the build date and builder of a DKMS-built module change with kernels.
_DRIVER = re.compile(r"Kernel Module\b.*?\s(\d+(?:\.\d+)+)(?:\s|$)")
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


def _model(information: str) -> str | None:
    """The ``Model:`` of a GPU's information file ("Model:           NVIDIA H100 80GB HBM3")."""
    for line in information.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "Model" and value.strip():
            return value.strip()
    return None


def gpu_set(proc_root: Path | None = None) -> tuple[str, str | None]:
    """The GPU set's key (gpu_set_key) and, when a file could not be read or parsed, what was
    used instead (the key is still stable: the same failure gives the same key); never raises.

    Example:
        >>> gpu_set(Path("/nonexistent"))
        ('gpus-none', None)
    """
    root = PROC_ROOT if proc_root is None else proc_root
    try:
        os.stat(root)
    except (FileNotFoundError, NotADirectoryError):  # no NVIDIA driver loaded
        return NO_GPUS, None
    except OSError as exc:  # nothing tells the GPUs apart
        return NO_GPUS, f"{root}: {type(exc).__name__}"
    problems: list[str] = []
    try:
        first = (root / "version").read_text(errors="replace").partition("\n")[0]
        found = _DRIVER.search(first)
        driver = found[1] if found else first.strip()
        if not found:
            problems.append(f"no version number in {root}/version: keyed by its first line")
    except OSError as exc:
        driver = "unreadable"
        problems.append(f"{root}/version: {type(exc).__name__}")
    models = []
    try:
        folders = sorted(os.listdir(root / "gpus"))
    except FileNotFoundError:  # the driver holds no GPU
        folders = []
    except OSError as exc:
        folders = []
        problems.append(f"{root}/gpus: {type(exc).__name__}")
    for folder in folders:
        try:
            model = _model((root / "gpus" / folder / "information").read_text(errors="replace"))
        except OSError as exc:
            model = "unknown"
            problems.append(f"{root}/gpus/{folder}/information: {type(exc).__name__}")
        if model is None:
            model = "unknown"
            problems.append(f"no Model line in {root}/gpus/{folder}/information")
        models.append(model)
    text = "\n".join([f"driver {driver}", *sorted(models)])
    key = KEY_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:12]
    return key, "; ".join(problems) or None


def gpu_set_key(proc_root: Path | None = None) -> str:
    """The name of this host's GPU set and driver: ``gpus-`` and 12 hex digits of the sha256 of
    the driver version and the sorted GPU models (``/proc/driver/nvidia``), or ``gpus-none``.

    Example:
        >>> gpu_set_key(Path("/nonexistent"))
        'gpus-none'
    """
    return gpu_set(proc_root)[0]


def base_directory(directory: Path) -> Path:
    """The base folder of a cache folder: ``directory`` less a GPU set's component.

    Example:
        >>> base_directory(Path("/c/gpus-none")), base_directory(Path("/c"))
        (PosixPath('/c'), PosixPath('/c'))
    """
    return directory.parent if _KEY.match(directory.name) else directory


def drop_other_sets(base: Path, keep: str) -> list[str]:
    """Remove the GPU-set folders of ``base`` other than ``keep``; the names removed.

    Example: ``drop_other_sets(Path(ROOT_DIRECTORY), gpu_set_key())``
    """
    removed = []
    for path in sorted(base.glob(f"{KEY_PREFIX}*")):
        if path.name == keep or not _KEY.match(path.name) or path.is_symlink():
            continue
        with contextlib.suppress(OSError):  # best effort: prune() bounds what stays
            shutil.rmtree(path)
            removed.append(path.name)
    return removed


def entries(directory: Path) -> list[str]:
    """The names of the complete entries in ``directory``, sorted (TensorFlow writes each to a
    ``.tmp`` file first and renames it to ``<key>.pb``, SaveSerializedEntry)."""
    return sorted(p.name for p in directory.glob(ENTRY_GLOB) if p.name.endswith(".pb"))


def prune(directory: Path, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Remove the oldest cache entries (by modification time) of the base folder ``directory``
    and its GPU sets' folders until the rest fit ``max_bytes``; the removed paths. A set the
    host no longer has was used last longest ago: its entries go first. Files that are not
    cache entries are left alone.

    Example: ``prune(Path(ROOT_DIRECTORY))``
    """
    entries = []
    # The base folder's own: written before the cache was keyed, or by a process that did not
    # call prepare(); never loaded by the workloads.
    found = [*directory.glob(ENTRY_GLOB), *directory.glob(f"{KEY_PREFIX}*/{ENTRY_GLOB}")]
    for path in found:
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


def _not_private(folder: Path) -> str | None:
    info = folder.stat()
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        owner = f"owned by uid {info.st_uid}, mode {info.st_mode & 0o777:o}"
        return f"not used: {owner} (uid {os.geteuid()} runs)"
    return None


def prepare(
    environ: MutableMapping[str, str] | None = None, proc_root: Path | None = None
) -> dict[str, object] | None:
    """Before TensorFlow starts: point TF_XLA_FLAGS at this GPU set's folder of the cache it
    names (``<base>/<gpu_set_key()>``, once: a flag already naming a set's folder is re-keyed,
    not extended), create it private to its user and bound the whole cache. What a workload
    records in its config; None when no cache is configured. A folder of another owner, or
    one others may write to, is not used: its flag leaves ``environ`` (default: this
    process's environment), as TensorFlow would load what is there.

    Example: ``prepare({"TF_XLA_FLAGS": FLAG + "/c"})`` points it at ``/c/gpus-...``.
    """
    environ = os.environ if environ is None else environ
    named = cache_directory(environ)
    if named is None:
        return None
    base = base_directory(named)
    key, note = gpu_set(proc_root)
    directory = base / key
    record: dict[str, object] = {"directory": str(base), "gpu_set": key}
    if note:
        record["gpu_set_note"] = note
    flags = [w for w in shlex.split(environ.get("TF_XLA_FLAGS", "")) if not w.startswith(FLAG)]
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        new_set = not directory.is_dir()
        directory.mkdir(mode=0o700, exist_ok=True)
        for folder in (base, directory):
            refused = _not_private(folder)
            if refused:
                environ["TF_XLA_FLAGS"] = " ".join(flags)
                return {**record, "directory": str(folder), "error": refused}
        if new_set:  # nothing of this GPU set is warm: the next deploy warms it
            with contextlib.suppress(OSError):
                (base / MARKER).unlink()
        removed = prune(base)
    except OSError as exc:  # TensorFlow compiles without the cache (not the base's); say why
        environ["TF_XLA_FLAGS"] = " ".join(flags)
        return {**record, "error": f"{type(exc).__name__}: {exc}"}
    environ["TF_XLA_FLAGS"] = " ".join([f"{FLAG}{directory}", *flags])
    return {**record, "max_bytes": MAX_BYTES, "pruned": len(removed)}


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

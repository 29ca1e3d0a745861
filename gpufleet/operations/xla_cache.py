"""Warm XLA's persistent compile cache on a host once per TensorFlow, payload and GPU set."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

from pyinfra import host
from pyinfra.api import OperationError, QuoteString, StringCommand, operation

from gpufleet.operations.probes import file_digest
from validation.workloads.xla_cache import MARKER

# $1: the payload folder (``current``), $2: the environment's Python (its wrapper), $3: the
# cache folder, $4: the marker's text. Decided when it runs: the installed driver serves the
# GPUs only after the reboot it may need, and a GPU busy with a job is left alone; either way
# no marker is written, so the next deploy plans the warm-up again.
_WARM = r"""set -u
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpufleet: nvidia-smi sees no GPU (a driver reboot pending?): XLA's cache not warmed;" \
    "the next deploy warms it" >&2
  exit 0
fi
cd "$1" || exit 1
PYTHONPATH=$1 "$2" -m validation.workloads.warm --cache-dir "$3" --marker-text "$4"
rc=$?
if [ "$rc" = 3 ]; then
  echo "gpufleet: a GPU is busy: XLA's cache not warmed; the next deploy warms it" >&2
  exit 0
fi
exit "$rc"
"""
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9._/-]+$")


def marker_text(tensorflow: str, payload_sha256: str, gpu_device_ids: Iterable[str]) -> str:
    """What a warm cache's marker holds: the TensorFlow requirement, the payload's digest and
    the GPUs (PCI device ids with their counts), so that a change to any of them warms again.

    Example:
        >>> marker_text("tensorflow[and-cuda]==2.21.0", "ab12", ["20b2", "20b2"])
        'gpufleet XLA warm-up: tensorflow[and-cuda]==2.21.0; payload sha256 ab12; GPUs 2x 20b2'
    """
    counts = Counter(d.lower() for d in gpu_device_ids)
    gpus = ", ".join(f"{n}x {device}" for device, n in sorted(counts.items())) or "none"
    return f"gpufleet XLA warm-up: {tensorflow}; payload sha256 {payload_sha256}; GPUs {gpus}"


@operation()
def warmed(python: str, payload_dir: str, cache_dir: str, marker: str):
    """
    Compile every XLA step of the quick and full tiers into ``cache_dir``
    (``validation.workloads.warm``, run by ``python`` from ``payload_dir``), unless the cache's
    marker already holds ``marker``; the warm-up writes it when every step compiled. Nothing
    is written while no GPU answers (a driver reboot pending) or one is busy.

    + python: the environment's Python, e.g. ``/usr/local/bin/gpufleet-python``
    + payload_dir: the payload's ``current`` folder, holding ``validation/``
    + cache_dir: XLA's cache folder, e.g. ``/var/cache/gpufleet/xla-compile-cache``
    + marker: what the marker must hold (``marker_text``)

    **Example:**

    .. code:: python

        warmed(
            python="/usr/local/bin/gpufleet-python",
            payload_dir="/opt/gpufleet/validation/current",
            cache_dir="/var/cache/gpufleet/xla-compile-cache",
            marker=marker_text("tensorflow[and-cuda]==2.21.0", digest, ["20b2"] * 8),
        )
    """
    for what, path in (("python", python), ("payload_dir", payload_dir), ("cache_dir", cache_dir)):
        if not _PLAIN_PATH.match(path):
            raise OperationError(f"warmed: {what} {path!r} is not an absolute plain path")
    if not marker or any(ch in marker for ch in "\n\r\0"):
        raise OperationError(f"warmed: marker {marker!r} must be one non-empty line")
    marker_path = f"{cache_dir.rstrip('/')}/{MARKER}"
    current = file_digest(host, marker_path)
    wanted = hashlib.sha256(f"{marker}\n".encode()).hexdigest()
    if current is not None and current["sha256"] == wanted:
        host.noop(f"XLA's cache {cache_dir} is warm ({marker})")
        return
    yield StringCommand(
        "sh -c",
        QuoteString(_WARM),
        "gpufleet-xla-warm-up",
        QuoteString(payload_dir),
        QuoteString(python),
        QuoteString(cache_dir),
        QuoteString(marker),
    )

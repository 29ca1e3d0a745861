"""One GPU lookup for every command: a PCI device id, a name as nvidia-smi prints it, or part."""

from __future__ import annotations

import difflib
import re

from gpufleet.matrix.gpus import GPUS, GpuModel, gpu_by_device_id

# Words every name shares or that say nothing of the model: left out when matching words.
_NOISE = {"nvidia", "tesla"}


class GpuLookupError(ValueError):
    """No GPU, or more than one where one is needed; the message lists the known ones."""


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w and w not in _NOISE]


def _compact(text: str) -> str:
    return "".join(_words(text))


def known_names(nvswitch: bool = False) -> list[str]:
    """The models' names as nvidia-smi prints them (NVSwitch bridges only when asked)."""
    return [m.name for m in GPUS.values() if nvswitch or not m.is_nvswitch]


def lookup(text: str, *, nvswitch: bool = False) -> list[GpuModel]:
    """Every model ``text`` names: a PCI id (``2330``, ``0x2330``, ``10de:2330``), a full name
    in any case, or words of names (``A100``: the four A100s, never A10 or A10G).

    Example: ``[m.device_id for m in lookup("H100 NVL")] == ["2321"]``
    """
    models = [m for m in GPUS.values() if nvswitch or not m.is_nvswitch]
    by_id = gpu_by_device_id(text)
    if by_id is not None and by_id in models:
        return [by_id]
    wanted = text.strip().lower()
    exact = [m for m in models if m.name.lower() == wanted]
    if exact:
        return exact
    words = _words(text)
    if not words:
        return []
    if "nvswitch" not in words:  # "H100" is the GPUs, not the H100 boards' NVSwitch bridge
        models = [m for m in models if not m.is_nvswitch]
    found = [m for m in models if set(words) <= set(_words(m.name))]
    if found:
        return found
    compact = _compact(text)  # "A100-SXM4" written "a100sxm4"
    return [m for m in models if compact in _compact(m.name)]


def unknown_message(text: str, *, nvswitch: bool = False) -> str:
    """Why ``text`` names no GPU, with the closest names and every known one."""
    models = [m for m in GPUS.values() if nvswitch or not m.is_nvswitch]
    words = set(_words(text))
    sharing = [m.name for m in models if words & set(_words(m.name))]  # "H100 SXM": H100s
    ratio = {n: difflib.SequenceMatcher(None, _compact(text), _compact(n)).ratio() for n in sharing}
    close = sorted(sharing, key=lambda n: -ratio[n])[:4]
    if not close:
        by_compact = {_compact(m.name): m.name for m in models}
        found = difflib.get_close_matches(_compact(text), list(by_compact), n=3, cutoff=0.6)
        close = [by_compact[c] for c in found]
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return (
        f"unknown GPU model {text!r}.{hint} Give a PCI device id (e.g. 2330, as lspci -nn shows "
        f"10de:2330) or a name as nvidia-smi prints it, or part of one; known: "
        f"{', '.join(f'{m.name} ({m.device_id})' for m in models)}."
    )


def find_gpu(text: str) -> GpuModel:
    """Exactly one GPU model; GpuLookupError when ``text`` names none or several.

    Example: ``find_gpu("A100-SXM4-80GB").device_id == "20b2"``
    """
    found = lookup(text)
    if not found:
        raise GpuLookupError(unknown_message(text))
    if len(found) > 1:
        listed = ", ".join(f"{m.name!r} ({m.device_id})" for m in found)
        raise GpuLookupError(
            f"GPU {text!r} matches {len(found)} models: {listed}. Fix: give one of them, as "
            "nvidia-smi --query-gpu=name prints it, or its PCI device id."
        )
    return found[0]

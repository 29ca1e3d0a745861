"""The Floor record (a value with its figure, configuration and source) and FloorError."""

from __future__ import annotations

from dataclasses import dataclass, replace


class FloorError(ValueError):
    """A host kind, calibration file or figures file gpufleet cannot judge; says how to fix it."""


@dataclass(frozen=True)
class Floor:
    """One floor: ``bound`` "min" means figure >= value, "max" figure <= value.

    ``value`` None: no floor (the figure is reported only; calibration can set one).
    ``per_gpu``: the figure may be a {gpu: value} mapping; every GPU is held to the floor and,
    with ``outlier`` set, no GPU may sit more than that fraction below the host median.
    ``figure``, ``config`` and ``source``: the measured figure the value rests on, the
    configuration it was measured in (model, XLA, precision, batch, input pipeline) and where
    it is printed; empty where the floor is gpufleet's choice (``origin`` says why).
    ``between_run_sd``: the spread between processes calibration measured for the figure (sd
    of its log between runs); the verdicts use it in place of the assumed 5 %. None: not known.
    ``spread_source``: where it was measured (``calibration FILE``).
    """

    name: str
    value: float | None
    unit: str
    origin: str
    bound: str = "min"
    per_gpu: bool = False
    outlier: float | None = None
    figure: str = ""
    config: str = ""
    source: str = ""
    between_run_sd: float | None = None
    spread_source: str = ""

    def sourced(self, figure: str = "", config: str = "", source: str = "") -> Floor:
        """This floor with the figure, configuration and source it rests on."""
        return replace(self, figure=figure, config=config, source=source)

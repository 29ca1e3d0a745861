"""Facts about the fleet cache, read from a client host."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

from gpufleet.cache.derive import ANSWERS


class CacheAnswers(FactBase):
    """
    ``"answers"`` when the cache's apt-cacher-ng and wheelhouse answer HTTP from this host, else
    what failed (``"http://10.0.0.5:3143/simple/ (Connection refused)"``).
    """

    @override
    def command(self, apt_url: str, pip_url: str) -> StringCommand:
        return StringCommand(
            "python3 -c",
            QuoteString(ANSWERS),
            QuoteString(apt_url),
            QuoteString(pip_url),
            "2>&1 || true",
        )

    @override
    def process(self, output: list[str]) -> str:
        for line in output:
            if line.startswith("gpufleet-cache: "):
                return line.removeprefix("gpufleet-cache: ").strip()
        return " ".join(output[-2:]) or "python3 printed nothing"

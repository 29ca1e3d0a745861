"""Facts about the fleet cache, read from a client host."""

from __future__ import annotations

from pyinfra.api import FactBase, QuoteString, StringCommand
from typing_extensions import override

# Exit 0 when both of the cache's services answer HTTP within 10 s, proxies ignored (a client's
# apt proxy may not reach the cache); prints what failed. $1 apt-cacher-ng URL, $2 index URL.
ANSWERS = r"""
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
failed = []
for url, any_status in ((sys.argv[1] + "/", True), (sys.argv[2], False)):
    try:
        opener.open(url, timeout=10).close()
    except urllib.error.HTTPError as exc:
        if not any_status:
            failed.append(f"{url} (HTTP {exc.code})")
    except OSError as exc:
        failed.append(f"{url} ({getattr(exc, 'reason', exc)})")
print("gpufleet-cache: " + ("; ".join(failed) if failed else "answers"))
sys.exit(1 if failed else 0)
"""


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


class ResolvedAddresses(FactBase):
    """
    The IPv4 addresses a name resolves to on this host (``getent ahostsv4``), sorted; empty
    when it resolves to none. On Debian and Ubuntu a host's own name may resolve to
    ``127.0.1.1`` only (``/etc/hosts``).

    .. code:: python

        ["10.0.0.5"]
    """

    @override
    def command(self, hostname: str) -> StringCommand:
        return StringCommand("getent ahostsv4", QuoteString(hostname), "|| true")

    @staticmethod
    @override
    def default() -> list[str]:
        return []

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted({line.split()[0] for line in output if line.split()})

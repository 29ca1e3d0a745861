"""Which host is the fleet cache, and the URLs every other host gets from it."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from gpufleet.spec import NodeSpec

GROUP = "gpufleet_cache"
APT_PORT = 3142  # apt-cacher-ng's registered default
PIP_PORT = 3143  # nginx serving the wheelhouse as a PEP 503 index (autoindex)
NVIDIA_PREFIX = "gpufleet-nvidia"  # the apt-cacher-ng remap that stands for NVIDIA's repository
_ADDRESS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*")
# The keys the cache derives for its clients; a client's own value wins when it is not the
# default. apt's proxy for the OS archive is not one of them: it goes to apt's configuration
# only (nvidia_repo), as apt_proxy is also what pip and curl use, and apt-cacher-ng proxies
# nothing but archives.
DERIVED_KEYS = (
    "nvidia_repo_url",
    "nvidia_repo_key_url",
    "nvidia_repo_key_fingerprint",
    "pip_index_url",
    "pip_trusted_host",
)


class CacheError(ValueError):
    """The cache group is unusable as declared; the message names the fix."""


@dataclass(frozen=True)
class CacheRef:
    """The fleet cache as its clients see it: the host's name, its address, and its spec (whose
    URLs are the cache's upstreams)."""

    name: str
    address: str
    spec: NodeSpec

    @property
    def apt_url(self) -> str:
        return f"http://{self.address}:{APT_PORT}"

    @property
    def pip_index_url(self) -> str:
        return f"http://{self.address}:{PIP_PORT}/simple/"

    @property
    def nvidia_repo_url(self) -> str:
        return f"{self.apt_url}/{NVIDIA_PREFIX}"


def is_ipv4(address: str) -> bool:
    """Whether ``address`` is an IPv4 address (else a host name, resolved where it is used)."""
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return False
    return True


def cache_ref(inventory: Any, spec_of: Any) -> CacheRef | None:
    """The cache of an inventory: None without a ``gpufleet_cache`` group; ``CacheError`` when
    the group has more than one host or its address is not a plain host name or IPv4 address.

    ``spec_of(host)`` gives a host's NodeSpec (``spec_for_host``).
    """
    try:
        members = list(inventory.get_group(GROUP))
    except Exception:  # pyinfra raises NoGroupError (its own class) when there is none
        return None
    if not members:
        return None
    if len(members) != 1:
        raise CacheError(
            f"group {GROUP} has {len(members)} hosts ({', '.join(h.name for h in members)}); "
            "the fleet cache is one host. Fix: keep one host in the group."
        )
    host = members[0]
    address = str(host.data.get("ssh_hostname") or host.name)
    if not _ADDRESS.fullmatch(address):
        raise CacheError(
            f"the cache host {host.name!r} has the address {address!r}, which is not a host name "
            "or IPv4 address. Fix: set its ssh_hostname to the name other hosts reach it by."
        )
    return CacheRef(name=host.name, address=address, spec=spec_of(host))


def _through_cache(cache: CacheRef, url: str | None) -> str | None:
    """A URL below the cache's NVIDIA upstream, rewritten to the cache's remap of it."""
    base = cache.spec.nvidia_repo_url.rstrip("/")
    if url is None or not url.startswith(base + "/"):
        return None
    return cache.nvidia_repo_url + url[len(base) :]


def client_values(cache: CacheRef, spec: NodeSpec, *, own: bool = False) -> dict[str, Any]:
    """The keys a client of the cache gets, less those its inventory set to a value of its own
    (any value other than the default wins). The cache host itself (``own``) takes them all:
    its own values are the cache's upstreams."""
    default = NodeSpec()
    derived: dict[str, Any] = {
        "nvidia_repo_url": cache.nvidia_repo_url,
        "pip_index_url": cache.pip_index_url,
        "pip_trusted_host": f"{cache.address}:{PIP_PORT}",  # plain HTTP on the site's network
    }
    key_url = _through_cache(cache, cache.spec.nvidia_repo_key_url)
    if key_url:
        derived["nvidia_repo_key_url"] = key_url
    if cache.spec.nvidia_repo_key_fingerprint != default.nvidia_repo_key_fingerprint:
        derived["nvidia_repo_key_fingerprint"] = cache.spec.nvidia_repo_key_fingerprint
    return {
        key: value
        for key, value in derived.items()
        if own or getattr(spec, key) == getattr(default, key)
    }


def answers(host: Any, cache: CacheRef) -> bool:
    """Whether the cache answers from ``host`` now (a fact: one round trip); logs the fallback."""
    from pyinfra import logger

    from gpufleet.cache.facts import CacheAnswers

    found = host.get_fact(CacheAnswers, apt_url=cache.apt_url, pip_url=cache.pip_index_url)
    if found != "answers":
        logger.warning(
            f"{host.name}: the fleet cache {cache.name} does not answer ({found}); "
            "downloading from upstream (cache_fallback_direct: true)"
        )
    return found == "answers"

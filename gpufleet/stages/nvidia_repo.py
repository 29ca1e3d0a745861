"""NVIDIA's CUDA network repository: fingerprint-checked key, deb822 source, apt proxy."""

from __future__ import annotations

from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import files

from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import files as gpufleet_files
from gpufleet.operations.repo_signature import release_base
from gpufleet.spec import NodeSpec, urls
from gpufleet.stages import foreign
from gpufleet.stages.host_config import SOURCES
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.templates import render

KEYRING = "/usr/share/keyrings/gpufleet-nvidia-cuda.gpg"
APT_PROXY = "/etc/apt/apt.conf.d/95gpufleet-proxy"
APT_AUTH = "/etc/apt/auth.conf.d/gpufleet-nvidia-cuda.conf"
SIGNED_OPERATION = "NVIDIA CUDA repository signed by the pinned key"
# What the repository needs on a bare host: TLS roots, curl for the key, gpg to check it.
BOOTSTRAP_PACKAGES = ["ca-certificates", "curl", "gnupg"]


def repo_uri(spec: NodeSpec, distro: str, arch: str) -> str:
    """``<nvidia_repo_url>/<distro>/<arch>/``, the flat repository folder apt reads (with the
    URL's login, if any: for the key download; apt gets ``source_uri``)."""
    return f"{spec.nvidia_repo_url.rstrip('/')}/{distro}/{arch}/"


def source_uri(spec: NodeSpec, distro: str, arch: str) -> str:
    """``repo_uri`` without ``user:password@``: what the world-readable ``.sources`` holds."""
    return urls.without_login(repo_uri(spec, distro, arch))


def key_url(spec: NodeSpec, distro: str, arch: str) -> HiddenValue | str:
    """``nvidia_repo_key_url``, or the key file NVIDIA publishes in the repository folder; a
    ``HiddenValue`` when it carries a login or query."""
    url = spec.nvidia_repo_key_url or repo_uri(spec, distro, arch) + "3bf863cc.pub"
    return urls.hidden(url) or url


@deploy("gpufleet nvidia_repo")
def nvidia_repo(plan: NodePlan | None = None):
    """
    Configure NVIDIA's CUDA apt repository for the host's distro and architecture: the apt
    proxy (if any), the repository login (if any, in ``/etc/apt/auth.conf.d``, mode 600), the
    signing key (refused unless it is exactly the pinned key) and a deb822 source with
    ``Signed-By``; ``apt-get update`` runs only when the key or source changed. Then checks that
    the repository as served is signed by the pinned key.

    .. code:: python

        nvidia_repo()
    """
    plan = plan or node_plan()
    spec, resolution = plan.spec, plan.require_resolution()
    distro, arch = resolution.repo_distro, resolution.repo_arch
    cache = plan.cache if plan.uses_cache else None
    archive = cache is not None and spec.apt_proxy is None and spec.cache_os_archive
    apt_proxy(
        spec,
        via=cache.apt_url if cache and archive else None,
        direct=cache.address if cache else None,
    )
    repo_login(spec, distro, arch)
    gpufleet_apt.install(
        name="ca-certificates, curl, gnupg",
        packages=BOOTSTRAP_PACKAGES,
        no_recommends=True,
    )
    # NVIDIA's cuda-keyring package writes the same repository as a one-line source with its
    # own Signed-By; apt refuses two sources that disagree, so that file goes.
    files.file(
        name="no cuda-keyring one-line source",
        path=f"/etc/apt/sources.list.d/cuda-{distro}-{arch}.list",
        present=False,
    )
    # Any other file adding NVIDIA's repository (another Signed-By for the same URI makes apt
    # refuse every update; a second URI another route to NVIDIA's packages).
    foreign.repair(plan, "apt-source")
    sources_text = render(
        "nvidia-cuda.sources.j2",
        uri=source_uri(spec, distro, arch),
        keyring=KEYRING,
        distro=distro,
        arch=arch,
    )
    gpufleet_apt.repository(
        name="NVIDIA CUDA repository (key fingerprint checked)",
        key_url=key_url(spec, distro, arch),
        fingerprint=spec.nvidia_repo_key_fingerprint,
        keyring=KEYRING,
        sources=SOURCES,
        sources_text=sources_text,
        proxy=spec.apt_proxy_hidden,
    )
    # apt keeps the old lists, with a warning only, when the repository is re-signed by
    # another key: on a provisioned host that goes unnoticed unless checked here.
    gpufleet_apt.repository_signed(
        name=SIGNED_OPERATION,
        uri=release_base(sources_text),
        fingerprint=spec.nvidia_repo_key_fingerprint,
        keyring=KEYRING,
    )


def repo_login(spec: NodeSpec, distro: str, arch: str) -> None:
    """The repository's login, if its URL has one, where apt_auth.conf(5) says: a root-only
    file, not the world-readable ``.sources``."""
    line = urls.apt_login(repo_uri(spec, distro, arch))
    gpufleet_files.content(
        name=f"{APT_AUTH}: NVIDIA repository login" + ("" if line else " (none)"),
        path=APT_AUTH,
        text=HiddenValue(line) if line else "",
        mode="600",
        present=line is not None,
    )


def apt_proxy(spec: NodeSpec, via: str | None = None, direct: str | None = None) -> None:
    """The apt proxy file; a proxy with a login is written as a ``HiddenValue``, mode 600.
    ``via``: the fleet cache's apt-cacher-ng as apt's HTTP proxy for the OS archive (apt only:
    it proxies no HTTPS and nothing but archives); ``direct``: the fleet cache's address, which
    apt reaches without any proxy."""
    proxy = spec.apt_proxy_hidden
    if proxy is None and direct:
        text = render("apt-proxy.conf.j2", proxy="", cache_proxy=via or "", direct=direct)
        gpufleet_files.content(name=f"{APT_PROXY}: fleet cache", path=APT_PROXY, text=text)
        return
    if proxy is None:
        gpufleet_files.content(
            name=f"{APT_PROXY}: no apt proxy", path=APT_PROXY, text="", present=False
        )
        return
    if isinstance(proxy, HiddenValue):
        text = render("apt-proxy.conf.j2", proxy=proxy.unmask(), direct=direct)
        gpufleet_files.content(
            name=f"{APT_PROXY}: apt proxy", path=APT_PROXY, text=HiddenValue(text), mode="600"
        )
    else:
        text = render("apt-proxy.conf.j2", proxy=proxy, direct=direct)
        gpufleet_files.content(name=f"{APT_PROXY}: apt proxy", path=APT_PROXY, text=text)

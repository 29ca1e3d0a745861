"""NVIDIA's CUDA network repository: fingerprint-checked key, deb822 source, apt proxy."""

from __future__ import annotations

from pyinfra.api import HiddenValue, deploy
from pyinfra.operations import files

from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import files as gpufleet_files
from gpufleet.spec import NodeSpec
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.templates import render

KEYRING = "/usr/share/keyrings/gpufleet-nvidia-cuda.gpg"
SOURCES = "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"
APT_PROXY = "/etc/apt/apt.conf.d/95gpufleet-proxy"
# What the repository needs on a bare host: TLS roots, curl for the key, gpg to check it.
BOOTSTRAP_PACKAGES = ["ca-certificates", "curl", "gnupg"]


def repo_uri(spec: NodeSpec, distro: str, arch: str) -> str:
    """``<nvidia_repo_url>/<distro>/<arch>/``, the flat repository folder apt reads."""
    return f"{spec.nvidia_repo_url.rstrip('/')}/{distro}/{arch}/"


def key_url(spec: NodeSpec, distro: str, arch: str) -> str:
    """``nvidia_repo_key_url``, or the key file NVIDIA publishes in the repository folder."""
    return spec.nvidia_repo_key_url or repo_uri(spec, distro, arch) + "3bf863cc.pub"


def download_env(spec: NodeSpec) -> dict[str, str | HiddenValue]:
    """Environment for downloads on the host (key, installer) through the apt proxy, if any."""
    proxy = spec.apt_proxy_hidden
    if not proxy:
        return {}
    return {"http_proxy": proxy, "https_proxy": proxy}


@deploy("gpufleet nvidia_repo")
def nvidia_repo(plan: NodePlan | None = None):
    """
    Configure NVIDIA's CUDA apt repository for the host's distro and architecture: the apt
    proxy (if any), the signing key (refused unless its fingerprint matches) and a deb822
    source with ``Signed-By``; ``apt-get update`` runs only when the key or source changed.

    .. code:: python

        nvidia_repo()
    """
    plan = plan or node_plan()
    spec, resolution = plan.spec, plan.require_resolution()
    distro, arch = resolution.repo_distro, resolution.repo_arch
    apt_proxy(spec)
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
    uri = repo_uri(spec, distro, arch)
    gpufleet_apt.repository(
        name="NVIDIA CUDA repository (key fingerprint checked)",
        key_url=key_url(spec, distro, arch),
        fingerprint=spec.nvidia_repo_key_fingerprint,
        keyring=KEYRING,
        sources=SOURCES,
        sources_text=render(
            "nvidia-cuda.sources.j2", uri=uri, keyring=KEYRING, distro=distro, arch=arch
        ),
        _env=download_env(spec),
    )


def apt_proxy(spec: NodeSpec) -> None:
    """The apt proxy file; a proxy with credentials is written as a ``HiddenValue``, mode 600."""
    proxy = spec.apt_proxy_hidden
    if proxy is None:
        gpufleet_files.content(
            name=f"{APT_PROXY}: no apt proxy", path=APT_PROXY, text="", present=False
        )
        return
    if isinstance(proxy, HiddenValue):
        text = render("apt-proxy.conf.j2", proxy=proxy.unmask())
        gpufleet_files.content(
            name=f"{APT_PROXY}: apt proxy", path=APT_PROXY, text=HiddenValue(text), mode="600"
        )
    else:
        text = render("apt-proxy.conf.j2", proxy=proxy)
        gpufleet_files.content(name=f"{APT_PROXY}: apt proxy", path=APT_PROXY, text=text)

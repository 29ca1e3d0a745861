"""The cluster tier's tools on every host: iperf3, ping and nft from the distribution's archive."""

from __future__ import annotations

from pyinfra import host, logger
from pyinfra.api import deploy

from gpufleet.operations import apt as gpufleet_apt
from gpufleet.stages.node import NodePlan, node_plan

# Versions read from each release's archive indexes (security/updates pocket): Ubuntu 22.04
# through the sandbox's apt proxy, Debian 12 with apt-cache policy. iperf3's package asks
# whether to start a daemon at boot and defaults to no; the tier starts its own server, once.
# nft adds the run's table that closes the TensorFlow worker port to every address outside the
# group (gpufleet.cluster.firewall); the package's own nftables.service stays disabled, so the
# host's firewall is not changed at boot. nftables and libnftables1 are one source at one version.
CLUSTER_PACKAGES: dict[tuple[str, str], list[str]] = {
    ("ubuntu", "22.04"): [
        "iperf3=3.9-1+deb11u1ubuntu0.1",
        "libiperf0=3.9-1+deb11u1ubuntu0.1",
        "iputils-ping=3:20211215-1ubuntu0.1",
        "nftables=1.0.2-1ubuntu3.1",
        "libnftables1=1.0.2-1ubuntu3.1",
    ],
    ("debian", "12"): [
        "iperf3=3.12-1+deb12u2",
        "libiperf0=3.12-1+deb12u2",
        "iputils-ping=3:20221126-1+deb12u1",
        "nftables=1.0.6-2+deb12u2",
        "libnftables1=1.0.6-2+deb12u2",
    ],
}
UNPINNED = ["iperf3", "iputils-ping", "nftables"]


def cluster_packages(os_id: str, os_version: str) -> tuple[list[str], bool]:
    """(package specs, pinned) for a release: the pinned list, else the archive's versions."""
    version = os_version.split(".")[0] if os_id == "debian" else os_version
    pinned = CLUSTER_PACKAGES.get((os_id, version))
    return (list(pinned), True) if pinned else (list(UNPINNED), False)


@deploy("gpufleet cluster_tools")
def cluster_tools(plan: NodePlan | None = None):
    """
    Install iperf3, ping and nft, pinned where gpufleet knows the release's version (not held:
    they are the archive's own packages and take its security updates with a new pin).

    .. code:: python

        cluster_tools()
    """
    plan = plan or node_plan()
    packages, pinned = cluster_packages(plan.state.os_id, plan.state.os_version)
    # One name on every host: pyinfra shows an operation under the name its first host gave
    # it, so a per-host detail (pinned or not) would be shown for the wrong hosts.
    if not pinned:
        logger.warning(
            "%s: no pinned iperf3/ping/nft versions for %s %s; installing the archive's",
            host.name,
            plan.state.os_id,
            plan.state.os_version,
        )
    gpufleet_apt.install(name="iperf3, ping and nft for the cluster tier", packages=packages)

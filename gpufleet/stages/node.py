"""The per-host plan every stage shares: the NodeSpec, the host probe and the resolved versions."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from pyinfra.api import DeployError
from pyinfra.api.host import Host
from pyinfra.context import ctx_host

from gpufleet import matrix
from gpufleet.cache import derive
from gpufleet.spec import NodeSpec, SpecError, spec_for_host
from gpufleet.stages.host_probe import HostProbe, HostState
from gpufleet.stages.inventory_error import inventory_error
from gpufleet.stamp.ahead import read_with_stamp

# Where apt downloads packages before unpacking them.
APT_CACHE = "/var/cache/apt"


def disk_paths(spec: NodeSpec) -> tuple[str, ...]:
    """Every path the deploy writes to, each of which needs free space (preflight checks)."""
    return ("/", APT_CACHE, spec.env_prefix, spec.payload_dir)


class InventoryValueError(DeployError):
    """An inventory value no host can be provisioned with; raised while planning, before any
    host is changed, so that pyinfra stops the whole run."""


@dataclass(frozen=True)
class NodePlan:
    """What a stage needs to know about one host.

    ``resolution`` is None when the host's OS or architecture is unsupported (preflight then
    refuses the host); ``unsupported`` says why.
    """

    spec: NodeSpec
    state: HostState
    resolution: matrix.Resolution | None
    unsupported: str | None = None
    cache: derive.CacheRef | None = None  # the fleet cache this host downloads through
    is_cache_host: bool = False

    @property
    def uses_cache(self) -> bool:
        """Whether the host downloads through the fleet cache (not when it fell back)."""
        cache, spec = self.cache, self.spec
        return cache is not None and (
            spec.nvidia_repo_url == cache.nvidia_repo_url
            or spec.pip_index_url == cache.pip_index_url
        )

    @property
    def installed_branch_differs(self) -> bool:
        """An NVIDIA driver of another branch than the resolved one is installed."""
        if self.resolution is None:
            return False
        return bool(self.state.installed_branches - {self.resolution.driver_branch})

    def require_resolution(self) -> matrix.Resolution:
        if self.resolution is None:
            raise DeployError(
                f"{self.unsupported or 'host not resolved'}; run gpufleet's preflight stage first"
            )
        return self.resolution


# Keyed by the Host object itself: a new pyinfra run (new inventory) plans afresh.
_PLANS: WeakKeyDictionary[Host, NodePlan] = WeakKeyDictionary()


def node_plan(host: Host | None = None) -> NodePlan:
    """The plan of a host (default: the current one), read once per run: one ``HostProbe``.

    A bad inventory value raises ``InventoryValueError`` naming the host, the key and the fix.

    Example: ``plan = node_plan(); plan.resolution.driver_branch``
    """
    host = host if host is not None else ctx_host.get()
    cached = _PLANS.get(host)
    if cached is not None:
        return cached
    try:
        spec = spec_for_host(host)
    except SpecError as exc:
        raise inventory_error(InventoryValueError, host, str(exc)) from None
    try:
        cache = derive.cache_ref(host.inventory, spec_for_host)
    except (derive.CacheError, SpecError) as exc:
        raise InventoryValueError(str(exc)) from None
    if cache is not None:
        own = cache.name == host.name
        values = derive.client_values(cache, spec, own=own)
        if not own and spec.cache_fallback_direct and not derive.answers(host, cache):
            values = {}  # the operator allowed upstream; the message is in derive.answers
        spec = dataclasses.replace(spec, **values)
    # With the facts of the host's deploy stamp, if it has one: one round trip (gpufleet.stamp)
    probed = read_with_stamp(
        host,
        HostProbe,
        enabled=spec.deploy_stamp,
        env_dir=spec.env_dir,
        disk_paths=disk_paths(spec),
    )
    resolution = None
    unsupported = None
    try:
        matrix.nvidia_repo_distro(probed.os_id, probed.os_version)
        matrix.nvidia_repo_arch(probed.arch)
    except matrix.MatrixError as exc:
        unsupported = str(exc)
    if unsupported is None:
        try:
            resolution = spec.resolve(
                os_id=probed.os_id,
                os_version=probed.os_version,
                arch=probed.arch,
                gpu_device_ids=probed.device_ids,
            )
        except matrix.MatrixError as exc:
            raise InventoryValueError(f"host {host.name}: {exc}") from None
    plan = NodePlan(
        spec=spec,
        state=probed,
        resolution=resolution,
        unsupported=unsupported,
        cache=cache,
        is_cache_host=cache is not None and cache.name == host.name,
    )
    _PLANS[host] = plan
    return plan

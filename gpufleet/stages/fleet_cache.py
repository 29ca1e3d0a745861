"""The fleet cache stage: apt-cacher-ng and a wheelhouse on its host, checked by its clients."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from pyinfra import host
from pyinfra.api import DeployError, QuoteString, StringCommand, deploy, operation
from pyinfra.api.state import State
from pyinfra.context import ctx_state
from pyinfra.operations import systemd
from pyinfra.operations.util import any_changed

from gpufleet.cache import derive
from gpufleet.cache import wheelhouse as cache_wheelhouse
from gpufleet.cache.facts import ANSWERS, CacheAnswers, ResolvedAddresses
from gpufleet.matrix import locks
from gpufleet.operations import acng as gpufleet_acng
from gpufleet.operations import apt as gpufleet_apt
from gpufleet.operations import files as gpufleet_files
from gpufleet.operations import python
from gpufleet.operations.probes import planning_fact
from gpufleet.stages.host_config import ACNG_DROPIN, ACNG_SECURITY, NGINX_DEFAULT_SITE
from gpufleet.stages.monitoring import unit_files
from gpufleet.stages.node import NodePlan, node_plan
from gpufleet.templates import render

ACNG_CONF = "/etc/apt-cacher-ng/zz_gpufleet.conf"  # read after the package's own files
# Bound to one address, apt-cacher-ng fails to start before that address is up (its unit is
# After=network.target only): at boot it waits for the network, and retries every 5 s (its
# Restart=on-failure then stays within systemd's default start limit, 5 starts in 10 s);
# host_config.ACNG_DROPIN holds this.
ACNG_DROPIN_TEXT = (
    "# gpufleet fleet cache: bound to the cache address; generated, edits are overwritten.\n"
    "[Unit]\nWants=network-online.target\nAfter=network-online.target\n"
    "[Service]\nRestartSec=5\n"
)
NGINX_CONF = "/etc/nginx/conf.d/gpufleet-wheelhouse.conf"
TOOLS = "/opt/gpufleet/cache-tools"  # the venv whose pip fills the wheelhouse
PACKAGES = ["apt-cacher-ng", "nginx", "python3", "python3-venv"]


@deploy("gpufleet fleet_cache")
def fleet_cache(plan: NodePlan | None = None):
    """
    With a ``gpufleet_cache`` group: on its host, apt-cacher-ng (the OS archive, and NVIDIA's
    repository as a remapped backend) and nginx serving a wheelhouse of every client's hashed
    lock; on every client, a check that the cache answers, before anything else changes. The
    stage comes first in the deploy and pyinfra runs each operation on every host before the
    next, so the cache is provisioned before any client asks it for anything.

    .. code:: python

        fleet_cache(plan=plan)
    """
    plan = plan or node_plan()
    if plan.cache is None:
        return
    if plan.is_cache_host:
        _cache_host(plan)
    if plan.uses_cache:
        answers(
            name=f"fleet cache {plan.cache.name} answers (nothing changed before this)",
            cache=plan.cache.name,
            apt_url=plan.cache.apt_url,
            pip_url=plan.cache.pip_index_url,
        )


def _cache_host(plan: NodePlan) -> None:
    cache = plan.cache
    assert cache is not None  # for mypy: _cache_host runs only with a cache
    if plan.unsupported:
        raise DeployError(f"the fleet cache host {cache.name}: {plan.unsupported}")
    upstream = cache.spec
    if not upstream.nvidia_repo_url.startswith(("http://", "https://")):
        raise DeployError(
            f"the fleet cache host {cache.name}: apt-cacher-ng fetches NVIDIA's repository over "
            "http(s) only. Fix: give the cache an http(s):// nvidia_repo_url."
        )
    if "@" in upstream.nvidia_repo_url.split("/")[2]:
        raise DeployError(
            f"the fleet cache host {cache.name}: nvidia_repo_url carries a login, which "
            "apt-cacher-ng's world-readable config would hold. Fix: give the cache a mirror "
            "URL without a login."
        )
    bound_address(cache)
    gpufleet_apt.install(name="fleet cache: apt-cacher-ng, nginx", packages=PACKAGES)
    acng = gpufleet_files.content(
        name=f"{ACNG_CONF}: NVIDIA's repository remapped, upstream proxy",
        path=ACNG_CONF,
        text=acng_conf(cache),
    )
    login = gpufleet_acng.admin_login(
        # AdminAuth: a secret generated on the cache host, readable by the service's user alone.
        name=f"{ACNG_SECURITY}: apt-cacher-ng's admin login (generated once, mode 600)",
        path=ACNG_SECURITY,
        current=plan.state.config.acng_admin,
    )
    unit_files(
        name=f"{ACNG_DROPIN}: apt-cacher-ng starts once the network is up",
        units={ACNG_DROPIN: ACNG_DROPIN_TEXT},
        restart=["apt-cacher-ng.service"],
    )
    systemd.service(
        name="apt-cacher-ng running",
        service="apt-cacher-ng",
        running=True,
        enabled=True,
    )
    systemd.service(
        name="apt-cacher-ng restarted (its config changed)",
        service="apt-cacher-ng",
        restarted=True,
        _if=any_changed(acng, login),
    )
    # Simultaneous first requests for one file each go upstream (seen with apt-cacher-ng 3.7.4):
    # the signing key, which every client fetches at the same moment, is fetched here first.
    warmed(
        name="fleet cache: NVIDIA's signing key fetched once into the cache",
        urls=sorted(key_urls()),
        _if=acng.did_change,
    )
    site = gpufleet_files.content(
        name=f"{NGINX_CONF}: the wheelhouse index on :{derive.PIP_PORT}",
        path=NGINX_CONF,
        text=render(
            "nginx-wheelhouse.conf.j2",
            address=cache.address,
            port=derive.PIP_PORT,
            root=cache_wheelhouse.ROOT,
        ),
    )
    default_site = gpufleet_acng.absent(
        name=f"{NGINX_DEFAULT_SITE}: nginx's default site gone",  # Debian's welcome page, port 80
        path=NGINX_DEFAULT_SITE,
        present=plan.state.config.nginx_default_site,
    )
    systemd.service(
        name="nginx running",
        service="nginx",
        running=True,
        enabled=True,
    )
    systemd.service(
        name="nginx reloaded (its config changed)",
        service="nginx",
        reloaded=True,
        _if=any_changed(site, default_site),
    )
    python.venv(name="fleet cache: tool venv (pip download)", env_dir=TOOLS)
    for python_version, machine, lock in sorted(fleet_locks()):
        key = cache_wheelhouse.request_key(lock, python_version, machine)
        path = f"{cache_wheelhouse.ROOT}/locks/{key}.txt"
        gpufleet_files.content(
            name=f"{path}: lock for Python {python_version} on {machine}", path=path, text=lock
        )
        cache_wheelhouse.filled(
            name=f"wheelhouse: Python {python_version} on {machine} (pip download, hashes checked)",
            pip=f"{TOOLS}/bin/pip",
            lock_path=path,
            lock=lock,
            python_version=python_version,
            machine=machine,
            index_url=upstream.pip_index_url_hidden,
            trusted_host=upstream.pip_trusted_host,
            proxy=upstream.apt_proxy_hidden,
        )


def acng_conf(cache: derive.CacheRef) -> str:
    """The cache host's ``zz_gpufleet.conf``: bound to the fleet address, remaps only."""
    upstream = cache.spec
    return render(
        "acng-gpufleet.conf.j2",
        bind=cache.address,
        port=derive.APT_PORT,
        prefix=derive.NVIDIA_PREFIX,
        upstream=upstream.nvidia_repo_url.rstrip("/") + "/",
        proxy=upstream.cache_upstream_proxy or "",
    )


def bound_address(cache: derive.CacheRef) -> None:
    """Refuse a cache address that is a name resolving, on the cache host, to no address or to
    loopback only (apt-cacher-ng and nginx bind to what it resolves to there; Debian's
    ``/etc/hosts`` maps a host's own name to 127.0.1.1). An IPv4 address is taken as it is."""
    if derive.is_ipv4(cache.address):
        return
    found = host.get_fact(ResolvedAddresses, hostname=cache.address)
    if not [address for address in found if not address.startswith("127.")]:
        raise DeployError(
            f"the fleet cache host {cache.name}: its address {cache.address!r} resolves there "
            f"to {', '.join(found) or 'nothing'}, and the cache binds to that address only, "
            "so no other host could reach it. Fix: set its ssh_hostname to its fleet IPv4 "
            f"address, or make {cache.address} resolve on it to that address (/etc/hosts)."
        )


def fleet_locks() -> set[tuple[str, str, str]]:
    """``(python version, machine, lock for them)`` of every active host the cache serves."""
    from gpufleet.matrix.os_python import os_pythons
    from gpufleet.stages.python_env import UV_REQUIREMENT

    found = set()
    hosts = ctx_state.get().inventory.get_active_hosts()
    for other in sorted(hosts, key=lambda h: h.name):
        plan = node_plan(other)
        if plan.resolution is None or plan.cache is None:
            continue
        spec = plan.spec
        uses_version = spec.python_env == "conda" or spec.use_uv
        venv_python = os_pythons(plan.state.os_id, plan.state.os_version).get(
            spec.python_interpreter or "python3"
        )
        version = spec.python_version if uses_version else venv_python
        machine = plan.state.arch
        if version is None or machine not in cache_wheelhouse.PLATFORMS:
            continue
        try:
            texts = [locks.lock_text(spec.tensorflow_package, plan.resolution.tf_version)]
            if spec.use_uv:
                texts.append(locks.tool_lock_text(UV_REQUIREMENT))
        except locks.LockError as exc:
            raise DeployError(str(exc)) from None
        for text in texts:
            found.add((version, machine, cache_wheelhouse.host_lock(text, version, machine)))
    return found


# Per pyinfra run (its State): which host asked first for each install, by what it installs.
_FIRST: WeakKeyDictionary[State, dict[tuple[str, ...], str]] = WeakKeyDictionary()


def fetches_first(plan: NodePlan, name: str, packages: list[str], *options: bool) -> bool:
    """Whether this host is the first, in pyinfra's planning order, to install exactly these
    packages through the cache on its OS, release and architecture. pyinfra runs every host's
    deploy code (hosts side by side, in no fixed order) before it runs any operation, so one
    host is settled as first before the download runs. If that host drops out of the run
    before the download, the others still install (apt then fetches through the cache as
    before: possibly one file twice, never a wrong one)."""
    if plan.cache is None or not gpufleet_apt.missing_now(packages):
        return False  # a host with nothing to install must not be the one that fetches
    state = plan.state
    key = (plan.cache.name, state.os_id, state.os_version, state.arch, name, *packages)
    key += tuple(str(option) for option in options)
    firsts = _FIRST.setdefault(ctx_state.get(), {})
    return firsts.setdefault(key, host.name) == host.name


def install(
    plan: NodePlan,
    name: str,
    packages: list[str],
    allow_change: bool = False,
    no_recommends: bool = False,
    hold: bool = False,
) -> None:
    """`gpufleet.operations.apt.install` behind one download by the first host of the kind,
    when the host uses the fleet cache. Example::

        install(plan, "system CUDA toolkit", ["cuda-toolkit-12-5"])
    """
    if plan.uses_cache:
        gpufleet_apt.downloaded(
            name=f"{name}: fetched into the fleet cache once, by the first host of its kind",
            packages=packages,
            first=fetches_first(plan, name, packages, allow_change, no_recommends),
            allow_change=allow_change,
            no_recommends=no_recommends,
        )
    gpufleet_apt.install(
        name=name,
        packages=packages,
        allow_change=allow_change,
        no_recommends=no_recommends,
        hold=hold,
    )


def key_urls() -> set[str]:
    """The signing-key URLs (through the cache) of every active host that uses the cache."""
    from gpufleet.stages.nvidia_repo import key_url

    found = set()
    hosts = ctx_state.get().inventory.get_active_hosts()
    for other in sorted(hosts, key=lambda h: h.name):
        plan = node_plan(other)
        if plan.resolution is not None and plan.uses_cache:
            url = key_url(plan.spec, plan.resolution.repo_distro, plan.resolution.repo_arch)
            # Only keys the cache serves: a host's own key URL may carry a login.
            if isinstance(url, str) and plan.cache and url.startswith(plan.cache.nvidia_repo_url):
                found.add(url)
    return found


# Fetches each URL given (no proxy) and throws the body away, trying for 30 s (apt-cacher-ng
# may have just been restarted); fails naming the first URL that never came.
_WARM = r"""
import sys, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for url in sys.argv[1:]:
    deadline = time.monotonic() + 30
    while True:
        try:
            opener.open(url, timeout=60).read()
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                sys.exit(f"gpufleet: the fleet cache could not fetch {url} upstream: {exc}")
            print(f"gpufleet: {url} not fetched yet ({exc}); trying again", file=sys.stderr,
                  flush=True)
            time.sleep(0.5)
"""


@operation(is_idempotent=False)
def warmed(urls: list[str]):
    """
    Fetch ``urls`` through the cache once, so that the clients' first requests find them there.
    """
    if not urls:
        host.noop("nothing to fetch ahead")
        return
    yield StringCommand("python3 -c", QuoteString(_WARM), *[QuoteString(u) for u in urls])


@operation()
def answers(cache: str, apt_url: str, pip_url: str):
    """
    Fail the host, naming the cache and the fix, unless the fleet cache's apt-cacher-ng and
    wheelhouse answer from it. Nothing to do when they answer while planning (a re-run);
    otherwise (a first run: the cache is provisioned by the operations before this one) the
    check runs when this operation's turn comes.
    """
    if planning_fact(host, CacheAnswers, apt_url=apt_url, pip_url=pip_url) == "answers":
        host.noop(f"fleet cache {cache} answers")
        return
    fix = (
        f"gpufleet: the fleet cache {cache} (group {derive.GROUP}) does not answer; nothing "
        "was changed on this host. Fix: check the cache host (systemctl status apt-cacher-ng "
        "nginx) and re-run, or set cache_fallback_direct: true to download from upstream."
    )
    yield StringCommand(
        "python3 -c",
        QuoteString(ANSWERS),
        QuoteString(apt_url),
        QuoteString(pip_url),
        "|| { echo",
        QuoteString(fix),
        ">&2; exit 1; }",
    )

"""A 3-host sandbox deploy through a fleet cache (gfsb-h1 in group gpufleet_cache): every
artifact (deb, wheel, signing key) is fetched from the stand-in upstream once, as the upstream's
own request log says, and every host ends up provisioned. apt-cacher-ng sends simultaneous
first requests for one file upstream each; the deploy has the first host of each kind download
an install's debs before every host installs them (gpufleet.stages.fleet_cache.install)."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Iterator

import pytest

from gpufleet.sandbox.inventory import CACHE_ENV
from gpufleet.sandbox.serve import request_log
from gpufleet.sandbox.state import STATE_DIR
from gpufleet.sandbox.upstream import Served, counts
from tests import pyinfra_cli
from tests.integration.conftest import Sandbox, running_sandbox

# A whole first deploy of 3 bare hosts through the cache: the first deploy is what is tested.
pytestmark = pytest.mark.integration

CACHE = "gfsb-h1"
ARTIFACTS = (".deb", ".whl", ".pub")
UPSTREAM_LOG = request_log(STATE_DIR / "log" / "http-server.log")
NONE = Served(0, 0)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with running_sandbox(3, standins=True) as running:
        yield running


def deploy(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The real pyinfra CLI, JSON output, the sandbox inventory with gfsb-h1 as the cache."""
    started = time.monotonic()
    proc = pyinfra_cli.deploy(
        "inventories/sandbox.py", "--json", *args, env={CACHE_ENV: CACHE}, timeout=1500
    )
    return proc, time.monotonic() - started


def test_three_hosts_fetch_each_artifact_from_upstream_once(sandbox: Sandbox) -> None:
    before = counts(UPSTREAM_LOG)
    proc, wall = deploy("--parallel", "3")
    assert proc.returncode == 0, pyinfra_cli.failure(proc)
    after = counts(UPSTREAM_LOG)
    fetched = {
        path: Served(
            s.requests - before.get(path, NONE).requests, s.bytes - before.get(path, NONE).bytes
        )
        for path, s in after.items()
        if s.requests > before.get(path, NONE).requests
    }
    artifacts = {path: s for path, s in fetched.items() if path.endswith(ARTIFACTS)}
    print(
        f"\nfirst deploy of 3 hosts through the cache: {wall:.1f} s; {len(artifacts)} artifacts, "
        f"{sum(s.bytes for s in fetched.values()) / 1e6:.1f} MB, "
        f"{sum(s.requests for s in fetched.values())} requests from upstream"
    )
    for kind in ARTIFACTS:
        assert any(path.endswith(kind) for path in artifacts), f"no {kind} fetched: {fetched}"
    twice = {path: s.requests for path, s in artifacts.items() if s.requests != 1}
    assert not twice, f"fetched from upstream more than once: {twice}"
    # Every host installed from the cache: apt's source is its remap, TensorFlow imports.
    cache_url = f"http://{sandbox.state.hosts[0].address}:3142/gpufleet-nvidia/"
    for host in range(3):
        done = sandbox.ssh(
            host,
            "cat /etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources && /usr/local/bin/"
            "gpufleet-python -c 'import tensorflow as t; print(t.__version__)'",
        )
        assert done.returncode == 0, done.stderr
        assert cache_url in done.stdout
    dry, dry_s = deploy("--dry", "--parallel", "3")
    changing = {op["name"]: op["hosts_with_change"] for op in pyinfra_cli.json_of(dry)["plan"]
                if op["hosts_with_change"]}  # fmt: skip
    print(f"no-op --dry through the cache: {dry_s:.1f} s")
    assert changing == {}


# Run on a client: the HTTP status of each URL, asked directly or through the cache as proxy.
_STATUSES = r"""
import sys, urllib.error, urllib.request
cache = sys.argv[1]
for url, proxy in (("http://10.231.7.1/elsewhere.deb", cache),
                   (cache + "/acng-report.html?doExpire=Start+Scan+and%2For+Expiration", None)):
    proxies = {"http": proxy} if proxy else {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))
    try:
        print(opener.open(url, timeout=30).status)
    except urllib.error.HTTPError as exc:
        print(exc.code)
    except OSError as exc:
        print("error", exc)
"""


def test_the_cache_is_no_open_relay_and_its_maintenance_asks_a_login(sandbox: Sandbox) -> None:
    """After the deploy above (review finding 6): a client's proxied request for a server no
    remap names is refused (403), maintenance without the login is 401, nginx serves no port
    80, and the login file is the service user's, mode 600."""
    address = sandbox.state.hosts[0].address
    client = sandbox.ssh(1, f"python3 -c {shlex.quote(_STATUSES)} http://{address}:3142")
    assert client.returncode == 0, client.stderr
    assert client.stdout.split() == ["403", "401"], client.stdout
    port80 = sandbox.ssh(
        1, f"python3 -c 'import socket; socket.create_connection((\"{address}\", 80), 5)'"
    )
    assert port80.returncode != 0, "nginx still answers on port 80 (its default site)"
    login = sandbox.ssh(0, "stat -c '%U %a' /etc/apt-cacher-ng/zz_gpufleet_security.conf")
    assert login.stdout.split() == ["apt-cacher-ng", "600"], login.stdout + login.stderr

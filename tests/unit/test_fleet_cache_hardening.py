"""The fleet cache host closed (review finding 6): apt-cacher-ng bound to the cache address,
ForceManaged, an admin login generated on the host; nginx without its default site. The
rendered config and the login script are run by the real apt-cacher-ng and sh where here."""

from __future__ import annotations

import base64
import dataclasses
import getpass
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpufleet.cache import derive
from gpufleet.operations import acng
from gpufleet.sandbox import upstream
from gpufleet.sandbox.serve import request_log, start_server, stop_server
from gpufleet.spec import NodeSpec
from gpufleet.stages import fleet_cache, host_config
from gpufleet.templates import render
from tests import pyinfra_cli
from tests.unit.fake_fleet import FakeGpuHost
from tests.unit.test_fleet_cache import CACHE_HOST, _plan, low_free_port

NEEDS_ACNG = pytest.mark.skipif(
    shutil.which("apt-cacher-ng") is None, reason="apt-cacher-ng not installed"
)
MAINTENANCE = "acng-report.html?doExpire=Start+Scan+and%2For+Expiration"


def _cache(address: str, upstream_url: str = "http://10.231.7.1:8631/nvidia") -> derive.CacheRef:
    return derive.CacheRef(
        "cache", address, NodeSpec.from_host_data({"nvidia_repo_url": upstream_url})
    )


def _login(path: Path) -> subprocess.CompletedProcess[str]:
    """The stage's login script, run by a real sh, owned by whoever runs the tests."""
    return subprocess.run(
        ["sh", "-c", acng._GENERATE, "x", str(path), getpass.getuser()],
        capture_output=True, text=True, check=True,
    )  # fmt: skip


def test_rendered_config_binds_the_cache_address_and_forces_managed_downloads() -> None:
    text = fleet_cache.acng_conf(_cache("10.0.0.5"))
    lines = text.splitlines()
    assert "BindAddress: 10.0.0.5" in lines
    assert "ForceManaged: 1" in lines
    assert "Remap-gpufleetnvidia: /gpufleet-nvidia ; http://10.231.7.1:8631/nvidia/" in lines
    # The Ubuntu archives apt's proxy sends here that the package's mirror list leaves out.
    assert any(line.startswith("Remap-") and "security.ubuntu.com/ubuntu" in line for line in lines)
    assert not any(line.startswith("AdminAuth") for line in lines)  # the secret is elsewhere
    # Every archive host the clients' apt sends to the cache has a remap with a backend here
    # (security.debian.org: the package's own Remap-secdeb lists its backends inline).
    remaps = [line.split(":", 1)[1] for line in lines if line.startswith("Remap-")]
    assert all(backend.strip() for _urls, _, backend in (r.partition(";") for r in remaps))
    apt = render("apt-proxy.conf.j2", proxy="", cache_proxy="http://10.0.0.5:3142", direct="x")
    proxied = re.findall(r'^Acquire::http::Proxy::(\S+) "http://10.0.0.5:3142";$', apt, re.M)
    assert len(proxied) == 5
    for archive in set(proxied) - {"security.debian.org"}:
        assert any(r.partition(";")[0].split()[0].startswith(archive + "/") for r in remaps), (
            archive
        )


def test_login_script_writes_a_secret_only_into_a_mode_600_file(tmp_path: Path) -> None:
    path = tmp_path / "zz_gpufleet_security.conf"
    done = _login(path)
    secret = path.read_text().splitlines()[-1].rsplit(":", 1)[1]
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert secret not in done.stdout + done.stderr and len(secret) >= 32
    assert not list(tmp_path.glob("*.gpufleet-*"))  # no temp file left
    # What the host probe reads of it (its acng_admin section), run by a real sh.
    section = host_config.SCRIPT.split("echo '{s}acng_admin'")[1].split("echo '{s}nginx_default'")[
        0
    ]
    out = subprocess.run(
        ["sh", "-c", section.replace(host_config.ACNG_SECURITY, str(path))],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert secret not in out
    user = getpass.getuser()
    assert out.split() == [f"{user}:{user}:600", "1"]
    assert acng.IN_ORDER == ("apt-cacher-ng:apt-cacher-ng:600", "1")


def _get(url: str, proxy: str | None = None, auth: str | None = None) -> int:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": proxy} if proxy else {})
    )
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with opener.open(request, timeout=10) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@NEEDS_ACNG
def test_real_apt_cacher_ng_serves_remaps_only_and_asks_a_login_for_maintenance(tmp_path):
    """apt-cacher-ng 3.7.4 with the stage's files: NVIDIA's remap and the Ubuntu archive (the
    package's remap, given a backend by ours) are fetched; a proxied request naming any other
    server is refused (403) and never reaches it; maintenance needs the generated login. The
    stand-in upstream's port is allowed (AllowUserPorts) so that only ForceManaged refuses."""
    www = tmp_path / "www"
    for path in ("nvidia/ubuntu2204/x86_64/a.deb", "ubuntu/pool/b.deb", "elsewhere/c.deb"):
        (www / path).parent.mkdir(parents=True, exist_ok=True)
        (www / path).write_bytes(b"x" * 100)
    up_port, acng_port = low_free_port(), low_free_port()
    up = f"127.0.0.1:{up_port}"
    conf = tmp_path / "conf"
    conf.mkdir()
    # The package's own Ubuntu remap as acng.conf has it, its backends file empty (as on a
    # cache host whose own sources are not Ubuntu's), and ours with archive.ubuntu.com played
    # by the stand-in.
    (conf / "acng.conf").write_text(f"Remap-uburep: {up}/ubuntu ; file:backends_ubuntu\n")
    (conf / "backends_ubuntu").write_text("")
    ours = fleet_cache.acng_conf(_cache("127.0.0.1", f"http://{up}/nvidia"))
    (conf / "zz_gpufleet.conf").write_text(ours.replace("archive.ubuntu.com", up))
    _login(conf / "zz_gpufleet_security.conf")
    login = (conf / "zz_gpufleet_security.conf").read_text().splitlines()[-1].split(": ", 1)[1]
    log = tmp_path / "up.log"
    server = start_server(www, "127.0.0.1", up_port, log)
    run = tmp_path / "run"
    run.mkdir()
    daemon = subprocess.Popen(
        ["apt-cacher-ng", "-c", str(conf), "ForeGround=1", f"Port={acng_port}",
         f"AllowUserPorts=80 {up_port}", "ReportPage=acng-report.html",  # the package's acng.conf
         f"CacheDir={tmp_path / 'cache'}", f"LogDir={tmp_path}",
         f"PidFile={run / 'pid'}", f"SocketPath={run / 'sock'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_listening(acng_port)
        cache = f"http://127.0.0.1:{acng_port}"
        got = {
            "remap": _get(f"{cache}/{derive.NVIDIA_PREFIX}/ubuntu2204/x86_64/a.deb"),
            "ubuntu archive": _get(f"http://{up}/ubuntu/pool/b.deb", proxy=cache),
            "elsewhere": _get(f"http://{up}/elsewhere/c.deb", proxy=cache),
            "maintenance": _get(f"{cache}/{MAINTENANCE}"),
            "maintenance, login": _get(f"{cache}/{MAINTENANCE}", auth=login),
        }
    finally:
        daemon.terminate()
        daemon.wait(10)
        assert stop_server(server)
    assert got == {
        "remap": 200,
        "ubuntu archive": 200,
        "elsewhere": 403,
        "maintenance": 401,
        "maintenance, login": 200,
    }
    fetched = set(upstream.counts(request_log(log)))
    assert fetched == {"/nvidia/ubuntu2204/x86_64/a.deb", "/ubuntu/pool/b.deb"}


# What the probe prints where Debian's nginx package left its default site (a symlink).
DEFAULT_SITE = ("##gpufleet-probe:nginx_default", "present")


def test_cache_host_plan_writes_the_login_and_removes_the_default_site(tmp_path):
    own_dropin = ("##gpufleet-probe:unit_overrides", host_config.ACNG_DROPIN)
    cache = dataclasses.replace(CACHE_HOST, config_lines=DEFAULT_SITE + own_dropin)
    result, plan = _plan(tmp_path, {"cache": cache})
    assert result.returncode == 0, result.stderr[-3000:]
    changed = {op["name"].split(" | ")[1] for op in plan if op["hosts_with_change"]}
    login = f"{host_config.ACNG_SECURITY}: apt-cacher-ng's admin login (generated once, mode 600)"
    assert login in changed
    assert "/etc/nginx/sites-enabled/default: nginx's default site gone" in changed
    assert f"{host_config.ACNG_DROPIN}: apt-cacher-ng starts once the network is up" in changed
    # gpufleet's own drop-in is no foreign override (gpufleet.stages.foreign).
    assert f"{host_config.ACNG_DROPIN} overrides" not in result.stdout + result.stderr


def test_a_cache_host_without_nginx_yet_removes_the_default_site_in_the_same_run(tmp_path):
    """The first sandbox deploy through the hardened cache installed nginx (whose first install
    links the default site) after the probe had found no site: the next run removed it. The
    probe's "not-installed" plans the removal after the install, in the one run."""
    fresh = ("##gpufleet-probe:nginx_default", "not-installed")
    result, plan = _plan(tmp_path, {"cache": dataclasses.replace(CACHE_HOST, config_lines=fresh)})
    assert result.returncode == 0, result.stderr[-3000:]
    names = [op["name"].split(" | ")[1] for op in plan]
    removal = "/etc/nginx/sites-enabled/default: nginx's default site gone"
    assert removal in {op["name"].split(" | ")[1] for op in plan if op["hosts_with_change"]}
    assert names.index("fleet cache: apt-cacher-ng, nginx") < names.index(removal)


def test_cache_host_with_the_login_in_order_and_no_default_site_plans_neither(tmp_path):
    in_order = ("##gpufleet-probe:acng_admin", *acng.IN_ORDER)
    result, plan = _plan(
        tmp_path, {"cache": dataclasses.replace(CACHE_HOST, config_lines=in_order)}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    changed = {op["name"].split(" | ")[1] for op in plan if op["hosts_with_change"]}
    assert not any(host_config.ACNG_SECURITY in name or "default site" in name for name in changed)


@pytest.mark.parametrize(
    ("resolved", "refused"),
    [
        (["127.0.1.1       STREAM cachebox", "127.0.1.1       DGRAM  "], True),
        ([], True),
        (["10.0.0.5        STREAM cachebox"], False),
    ],
)
def test_a_cache_name_that_resolves_to_loopback_there_is_refused(tmp_path, resolved, refused):
    cache = FakeGpuHost(gpus=(), inventory={"gpu_less": True, "ssh_hostname": "cachebox"})
    data = cache.data("@fake/cache")
    data["fake_responses"]["getent ahostsv4 cachebox"] = resolved
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"fleet = [('@fake/cache', {data!r})]\ngpufleet_cache = ['@fake/cache']\n")
    result = pyinfra_cli.run(inventory, pyinfra_cli.GPU_NODE, "--dry", base=pyinfra_cli.BARE)
    output = result.stdout + result.stderr
    assert ("its address 'cachebox' resolves there to " in output) == refused, output[-3000:]
    assert (result.returncode != 0) == refused, output[-3000:]
    if refused:
        assert "127.0.1.1" in output if resolved else "resolves there to nothing" in output

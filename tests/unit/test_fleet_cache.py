"""The fleet cache (gpufleet/cache, stage fleet_cache): derived keys, checks, rendered configs
run by the real programs where they exist here (apt-cacher-ng, sh, apt-config), and the plan."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpufleet.cache import derive, facts
from gpufleet.cache import wheelhouse as cache_wheelhouse
from gpufleet.sandbox import upstream
from gpufleet.sandbox.serve import request_log, start_server, stop_server
from gpufleet.spec import NodeSpec, SpecError
from gpufleet.templates import render
from tests import pyinfra_cli
from tests.ports import refusing_port, serve_www
from tests.unit.fake_fleet import FakeGpuHost, root

ROOT = root()
UPSTREAM = "http://10.231.7.1:8631/nvidia"


def low_free_port() -> int:
    """A free loopback port below 32768: apt-cacher-ng 3.7.4 cannot bind a higher one ("Error
    resolving address for binding", seen here)."""
    import random
    import socket

    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000..32000")


def _ref(**data) -> derive.CacheRef:
    return derive.CacheRef("cache", "10.0.0.5", NodeSpec.from_host_data(data))


def test_clients_get_the_cache_urls_and_their_own_values_win() -> None:
    cache = _ref(
        nvidia_repo_url=UPSTREAM,
        nvidia_repo_key_url=f"{UPSTREAM}/ubuntu2204/x86_64/standin.pub",
        nvidia_repo_key_fingerprint="A" * 40,
    )
    values = derive.client_values(cache, NodeSpec())
    assert values == {
        "nvidia_repo_url": "http://10.0.0.5:3142/gpufleet-nvidia",
        "nvidia_repo_key_url": "http://10.0.0.5:3142/gpufleet-nvidia/ubuntu2204/x86_64/standin.pub",
        "nvidia_repo_key_fingerprint": "A" * 40,
        "pip_index_url": "http://10.0.0.5:3143/simple/",
        "pip_trusted_host": "10.0.0.5:3143",
    }
    own = NodeSpec.from_host_data({"pip_index_url": "https://pypi.example/simple"})
    assert "pip_index_url" not in derive.client_values(cache, own)
    # The cache host's own values are the upstreams: it takes every derived key.
    assert derive.client_values(cache, cache.spec, own=True)["nvidia_repo_url"].endswith(
        ":3142/gpufleet-nvidia"
    )


def _inventory(*hosts) -> SimpleNamespace:
    return SimpleNamespace(get_group=lambda name: list(hosts))


def _host(name: str, **data) -> SimpleNamespace:
    return SimpleNamespace(name=name, data=data)


def test_cache_group_of_two_hosts_or_a_bad_address_is_refused() -> None:
    with pytest.raises(derive.CacheError, match=r"has 2 hosts .* Fix: keep one"):
        derive.cache_ref(_inventory(_host("a"), _host("b")), lambda h: NodeSpec())
    with pytest.raises(derive.CacheError, match="not a host name or IPv4 address"):
        derive.cache_ref(_inventory(_host("a", ssh_hostname="x;rm -rf /")), lambda h: NodeSpec())
    ref = derive.cache_ref(_inventory(_host("a", ssh_hostname="10.1.2.3")), lambda h: NodeSpec())
    assert ref is not None and ref.apt_url == "http://10.1.2.3:3142"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"cache_upstream_proxy": "http://u:pw@proxy:3128"}, "has a login"),
        ({"cache_upstream_proxy": "http://proxy:3128/x"}, "has a path"),
        ({"cache_upstream_proxy": "ftp://proxy:3128"}, "is not an http"),
        ({"cache_upstream_proxy": "http://proxy:3128\nProxy: x"}, "control character"),
        ({"cache_fallback_direct": "yes"}, "wrong type"),
    ],
)
def test_new_keys_are_checked_strictly(data, message) -> None:
    with pytest.raises(SpecError, match=message):
        NodeSpec.from_host_data(data)


def test_upstream_counts_requests_and_bytes_per_path(tmp_path: Path) -> None:
    www = tmp_path / "www"
    (www / "repo").mkdir(parents=True)
    (www / "repo" / "a.deb").write_bytes(b"x" * 5000)
    log = tmp_path / "http.log"
    pid, port = serve_www(www, log)
    try:
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/repo/a.deb") as answer:
                assert answer.read() == b"x" * 5000
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/repo/missing.deb")
    finally:
        assert stop_server(pid)
    assert upstream.counts(request_log(log)) == {"/repo/a.deb": upstream.Served(2, 10000)}


@pytest.mark.skipif(shutil.which("apt-cacher-ng") is None, reason="apt-cacher-ng not installed")
def test_real_apt_cacher_ng_fetches_each_nvidia_file_from_upstream_once(tmp_path: Path) -> None:
    """The rendered zz_gpufleet.conf, read by apt-cacher-ng itself: NVIDIA's repository
    remapped, its files (the signing key too) fetched from upstream once for two clients."""
    www = tmp_path / "www"
    repo = www / "nvidia" / "ubuntu2204" / "x86_64"
    repo.mkdir(parents=True)
    files = {"cuda-toolkit-12-5_12.5.1-1_amd64.deb": b"d" * 70000, "3bf863cc.pub": b"k" * 900}
    for name, body in files.items():
        (repo / name).write_bytes(body)
    up_port, acng_port = low_free_port(), low_free_port()
    conf = tmp_path / "conf"
    conf.mkdir()
    text = render(
        "acng-gpufleet.conf.j2",
        bind="127.0.0.1",
        port=acng_port,
        prefix=derive.NVIDIA_PREFIX,
        upstream=f"http://127.0.0.1:{up_port}/nvidia/",
        proxy="",
    )
    (conf / "zz_gpufleet.conf").write_text(text)
    log = tmp_path / "up.log"
    up = start_server(www, "127.0.0.1", up_port, log)
    run = tmp_path / "run"
    run.mkdir()
    acng = subprocess.Popen(
        ["apt-cacher-ng", "-c", str(conf), "ForeGround=1", f"Port={acng_port}",
         "BindAddress=127.0.0.1", f"CacheDir={tmp_path / 'cache'}", f"LogDir={tmp_path}",
         f"PidFile={run / 'pid'}", f"SocketPath={run / 'sock'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{acng_port}/{derive.NVIDIA_PREFIX}/ubuntu2204/x86_64/"
        deadline = time.monotonic() + 10
        for _client in range(2):
            for name, body in files.items():
                while True:
                    try:
                        with urllib.request.urlopen(base + name, timeout=10) as answer:
                            assert answer.read() == body
                        break
                    except urllib.error.URLError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
    finally:
        acng.terminate()
        acng.wait(10)
        assert stop_server(up)
    got = upstream.counts(request_log(log))
    assert {path: served.requests for path, served in got.items()} == {
        f"/nvidia/ubuntu2204/x86_64/{name}": 1 for name in files
    }


def test_wheelhouse_index_script_lays_out_pep503_projects(tmp_path: Path) -> None:
    """The index step run by a real sh: each wheel hard-linked under its normalized name."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in (
        "Typing_Extensions-4.12.2-py3-none-any.whl",
        "nvidia_cudnn_cu12-9.3.0.75-py3-none-manylinux2014_x86_64.whl",
    ):
        (wheels / name).write_bytes(b"w")
    stamp = tmp_path / ".gpufleet-abc"
    subprocess.run(
        ["sh", "-c", cache_wheelhouse._INDEX, "x", str(tmp_path), str(stamp), "abc"], check=True
    )
    assert sorted(p.name for p in (tmp_path / "simple").iterdir()) == [
        "nvidia-cudnn-cu12",
        "typing-extensions",
    ]
    linked = tmp_path / "simple" / "typing-extensions" / "Typing_Extensions-4.12.2-py3-none-any.whl"
    assert linked.stat().st_ino == (wheels / linked.name).stat().st_ino
    assert stamp.read_text().splitlines() == [
        "abc",
        "1 wheels/Typing_Extensions-4.12.2-py3-none-any.whl",
        "1 wheels/nvidia_cudnn_cu12-9.3.0.75-py3-none-manylinux2014_x86_64.whl",
    ]


@pytest.mark.skipif(shutil.which("apt-config") is None, reason="apt-config not installed")
@pytest.mark.parametrize(
    ("values", "proxy"),
    [
        ({"proxy": "http://10.231.7.1:3142"}, "http://10.231.7.1:3142"),  # the site's own wins
        ({"proxy": "", "cache_proxy": "http://10.0.0.5:3142"}, None),  # per archive host
        ({"proxy": "", "cache_proxy": ""}, None),  # cache_os_archive: False
    ],
)
def test_apt_reaches_the_cache_directly_and_the_archive_through_it(tmp_path, values, proxy):
    conf = tmp_path / "95gpufleet-proxy"
    conf.write_text(render("apt-proxy.conf.j2", direct="10.0.0.5", **values))
    dump = subprocess.run(
        ["apt-config", "-c", str(conf), "dump", "Acquire"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert 'Acquire::http::Proxy::10.0.0.5 "DIRECT";' in dump
    assert (f'Acquire::http::Proxy "{proxy}";' in dump) == (proxy is not None), dump
    # The cache proxies the archives it has remaps for, no other host (ForceManaged refuses).
    cache = values.get("cache_proxy")
    for archive in ("archive.ubuntu.com", "security.ubuntu.com", "deb.debian.org"):
        line = f'Acquire::http::Proxy::{archive} "{cache}";'
        assert (line in dump) == bool(cache), dump
    # apt-cacher-ng tunnels no HTTPS: it is never apt's https proxy.
    assert 'Acquire::https::Proxy "http://10.0.0.5:3142"' not in dump


def _plan(
    tmp_path: Path,
    hosts: dict[str, FakeGpuHost],
    responses: dict[str, dict] | None = None,
    cache: bool = True,
) -> tuple[subprocess.CompletedProcess, list]:
    lines = ["fleet = ["]
    for name, fake in hosts.items():
        data = fake.data("@fake/" + name)
        data["fake_responses"].update((responses or {}).get(name, {}))
        lines.append(f"    ({'@fake/' + name!r}, {data!r}),")
    lines += ["]", "gpufleet_cache = ['@fake/cache']" if cache else ""]
    inventory = tmp_path / "inventory.py"
    inventory.write_text("\n".join(lines) + "\n")
    return pyinfra_cli.plan(inventory, pyinfra_cli.GPU_NODE, "-vv", base=pyinfra_cli.BARE)


CACHE_HOST = FakeGpuHost(gpus=(), inventory={"gpu_less": True, "ssh_hostname": "10.0.0.5"})
# What the cache check prints on a host that cannot reach the cache (gpufleet.cache.derive).
DOWN = {"ProxyHandler({})": ["gpufleet-cache: http://10.0.0.5:3142/ (Connection refused)"]}
CHECK = "gpufleet fleet_cache | fleet cache @fake/cache answers (nothing changed before this)"


def test_plan_provisions_the_cache_first_and_clients_check_it_before_any_change(tmp_path):
    hosts = {
        "cache": CACHE_HOST,
        "gpu1": FakeGpuHost(),
        "gpu2": FakeGpuHost(inventory={"cache_fallback_direct": True}),
    }
    result, plan = _plan(tmp_path, hosts, {"gpu2": DOWN})
    assert result.returncode == 0, result.stderr[-3000:]
    names = [op["name"] for op in plan]
    changed = {
        host: [i for i, op in enumerate(plan) if f"@fake/{host}" in op["hosts_with_change"]]
        for host in hosts
    }
    check = names.index(CHECK)
    cache_ops = [i for i in changed["cache"] if i < check]
    assert [names[i].split(" | ")[1] for i in cache_ops[:2]] == [
        "fleet cache: apt-cacher-ng, nginx",
        "/etc/apt-cacher-ng/zz_gpufleet.conf: NVIDIA's repository remapped, upstream proxy",
    ]
    assert any("wheelhouse: Python 3.11 on x86_64" in names[i] for i in cache_ops)
    warm = "fleet cache: NVIDIA's signing key fetched once into the cache"
    warm_at = next(i for i in range(check) if names[i].endswith(warm))
    assert plan[warm_at]["hosts_with_conditional_change"] == ["@fake/cache"]
    # gpu1 is checked first, and only then changed; its repository is the cache's remap.
    assert changed["gpu1"][0] == check
    assert "[@fake/gpu1]  >>> sh -c" in result.stderr
    gpu1 = [line for line in result.stderr.splitlines() if "[@fake/gpu1]" in line]
    assert any("http://10.0.0.5:3142/gpufleet-nvidia/ubuntu2204/x86_64/" in line for line in gpu1)
    # gpu2 could not reach the cache and may fall back: upstream URLs, a warning, no check.
    assert "@fake/gpu2" not in plan[check]["hosts_with_change"]
    assert "downloading from upstream (cache_fallback_direct: true)" in result.stderr
    gpu2 = [line for line in result.stderr.splitlines() if "[@fake/gpu2]" in line]
    assert not any("10.0.0.5:3142/gpufleet-nvidia" in line for line in gpu2)
    assert any("developer.download.nvidia.com/compute/cuda/repos/ubuntu2204" in x for x in gpu2)


def test_sandbox_inventory_with_a_cache_gives_the_stand_ins_to_the_cache_alone(tmp_path):
    """inventories/sandbox.py with GPUFLEET_SANDBOX_CACHE, read by pyinfra itself."""
    from gpufleet.sandbox.inventory import CACHE_ENV
    from gpufleet.sandbox.state import HostState, SandboxState, save_state

    state = SandboxState(
        image="ubuntu22.04",
        os=["ubuntu", "22.04"],
        hosts=[HostState(f"gfsb-h{n}", f"10.231.7.{10 + n}") for n in (1, 2, 3)],
        nvidia_repo_url=UPSTREAM,
        nvidia_repo_key_url=f"{UPSTREAM}/ubuntu2204/x86_64/k.pub",
        nvidia_repo_key_fingerprint="A" * 40,
        pip_index_url="http://10.231.7.1:8631/simple",
    )
    save_state(state, tmp_path)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "GPUFLEET_SANDBOX_STATE": str(tmp_path),
    }
    result = pyinfra_cli.run(
        "inventories/sandbox.py", "debug-inventory", "--json", base={**env, CACHE_ENV: "gfsb-h1"}
    )
    assert result.returncode == 0, result.stderr
    hosts = {entry["name"]: entry for entry in json.loads(result.stdout)}
    cache, client = hosts["gfsb-h1"], hosts["gfsb-h2"]
    assert "gpufleet_cache" in cache["groups"] and "gpufleet_cache" not in client["groups"]
    assert cache["data"]["nvidia_repo_url"] == UPSTREAM
    # The client keeps the defaults (inventories/group_data/all.py), which the cache replaces.
    assert client["data"].get("nvidia_repo_url") == NodeSpec().nvidia_repo_url
    assert client["data"].get("pip_index_url") is None
    assert client["data"]["cache_os_archive"] is False
    bad = pyinfra_cli.run(
        "inventories/sandbox.py", "debug-inventory", "--json", base={**env, CACHE_ENV: "gfsb-h9"}
    )
    assert bad.returncode != 0 and "GPUFLEET_SANDBOX_CACHE names gfsb-h9" in bad.stdout + bad.stderr


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        ("file:///srv/cuda-mirror", "fetches NVIDIA's repository over http(s) only"),
        ("https://u:pw@mirror.example/cuda", "nvidia_repo_url carries a login"),
    ],
)
def test_cache_host_refuses_an_upstream_it_cannot_use(tmp_path, upstream, message):
    cache = FakeGpuHost(
        gpus=(),
        inventory={"gpu_less": True, "ssh_hostname": "10.0.0.5", "nvidia_repo_url": upstream},
    )
    lines = ["fleet = [", f"    ('@fake/cache', {cache.data('@fake/cache')!r}),", "]"]
    lines.append("gpufleet_cache = ['@fake/cache']")
    (tmp_path / "inventory.py").write_text("\n".join(lines) + "\n")
    result = pyinfra_cli.run(
        tmp_path / "inventory.py", pyinfra_cli.GPU_NODE, "--dry", base=pyinfra_cli.BARE
    )
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert "u:pw" not in result.stdout + result.stderr


def test_cache_check_fails_naming_what_does_not_answer(tmp_path: Path) -> None:
    """The clients' check (facts.ANSWERS, the stage's `answers` command) run by a real python:
    any HTTP answer from apt-cacher-ng will do, the index must answer 200."""
    (tmp_path / "www" / "simple").mkdir(parents=True)
    pid, port = serve_www(tmp_path / "www", tmp_path / "http.log")
    try:
        with refusing_port() as dead:  # bound, not listening: refused, and nobody's
            up = f"http://127.0.0.1:{port}"
            ok = subprocess.run(
                [sys.executable, "-c", facts.ANSWERS, up, f"{up}/simple/"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            down = subprocess.run(
                [sys.executable, "-c", facts.ANSWERS, up, f"http://127.0.0.1:{dead}/simple/"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
    finally:
        assert stop_server(pid)
    assert (ok.returncode, ok.stdout.strip()) == (0, "gpufleet-cache: answers")
    assert down.returncode == 1
    assert f"127.0.0.1:{dead}/simple/ (" in down.stdout and "refused" in down.stdout


def test_warming_waits_for_a_restarting_cache_and_fetches_each_url(tmp_path: Path) -> None:
    """The cache host's warm-up (fleet_cache._WARM) run by a real python: it keeps trying while
    the server is not up yet, then fetches every URL once. The server starts only once the
    warm-up has said that a try was refused, so the retry is certain, not a matter of timing."""
    from gpufleet.stages.fleet_cache import _WARM

    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "k.pub").write_text("key")
    with refusing_port() as port:  # the "restart": the port is bound, nothing listens
        url = f"http://127.0.0.1:{port}/k.pub"
        warm = subprocess.Popen(
            [sys.executable, "-c", _WARM, url], stderr=subprocess.PIPE, text=True
        )
        assert warm.stderr is not None
        first = warm.stderr.readline()  # its first refused try (or its end, 30 s on)
    assert first.startswith(f"gpufleet: {url} not fetched yet (") and "refused" in first, first
    pid = start_server(tmp_path / "www", "127.0.0.1", port, tmp_path / "http.log")
    try:
        assert warm.wait(30) == 0, warm.stderr.read()
    finally:
        assert stop_server(pid)
    assert upstream.counts(request_log(tmp_path / "http.log")) == {"/k.pub": upstream.Served(1, 3)}

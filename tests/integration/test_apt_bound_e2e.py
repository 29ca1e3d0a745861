"""Issue 34 item 4 on the sandbox: an apt source that answers nothing fails one host, bounded.

Three hosts booted on the session's provisioned snapshot. On gfsb-h2 a TCP listener accepts
connections and never replies, and apt's proxy points at it; every host loses the NVIDIA
.sources file, so the deploy's repository operation runs its (bounded) apt-get update again.
With `apt_timeout_s = 5` the silent host fails with the bounded-apt message naming the proxy,
and the other two finish (their source back in place). Events are asserted, not durations.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.stages.host_config import SOURCES
from tests.integration.conftest import Sandbox, running_sandbox
from tests.integration.fault_helpers import INVENTORY_TEXT, OVERRIDES_ENV, ok, pyinfra

pytestmark = pytest.mark.integration

HOSTS = ("gfsb-h1", "gfsb-h2", "gfsb-h3")
SILENT = "gfsb-h2"
PORT = 18999
PROXY_CONF = "/etc/apt/apt.conf.d/zzzz-gf-silent-proxy"
PID_FILE = "/run/gf-silent-listener.pid"
# Accepts every connection and keeps it open, reading what comes and never answering.
LISTENER = f"""
import socket, threading
def drain(conn):
    while conn.recv(65536):
        pass
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", {PORT}))
server.listen(64)
while True:
    conn, _ = server.accept()
    threading.Thread(target=drain, args=(conn,), daemon=True).start()
"""


@pytest.fixture(scope="module")
def sandbox(provisioned: str) -> Iterator[Sandbox]:
    with running_sandbox(len(HOSTS), standins=True, from_snapshot=provisioned) as running:
        yield running


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("apt-bound") / "inventory.py"
    path.write_text(INVENTORY_TEXT.format(env=OVERRIDES_ENV))
    return path


def test_a_silent_apt_source_fails_its_host_within_the_bound_the_others_finish(
    sandbox: Sandbox, inventory: Path
) -> None:
    start = (
        f"setsid nohup python3 -c {shlex.quote(LISTENER)} >/dev/null 2>&1 < /dev/null & "
        f"echo $! > {PID_FILE}; "
        f"for i in $(seq 100); do ss -ltn | grep -q ':{PORT} ' && exit 0; sleep 0.1; done; exit 1"
    )
    ok(sandbox, SILENT, start)
    proxy = f"http://127.0.0.1:{PORT}/"
    conf = f'Acquire::http::Proxy "{proxy}";\\nAcquire::https::Proxy "{proxy}";\\n'
    ok(sandbox, SILENT, f"printf '{conf}' > {PROXY_CONF}")
    for host in HOSTS:  # the repository operation's update runs again on every host
        ok(sandbox, host, f"rm -f {SOURCES}")
    overrides = {host: {"apt_timeout_s": 5, "deploy_stamp": False} for host in HOSTS}
    try:
        proc = pyinfra(
            inventory, "--json", *[a for h in HOSTS for a in ("--limit", h)], overrides=overrides
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, output[-3000:]
        failed = json.loads(proc.stdout)["results"]["failed_hosts"]
        assert failed == [SILENT], output[-4000:]
        assert "gpufleet: bounded apt:" in output, output[-4000:]
        assert f"(proxy: {proxy})" in output
        assert "each request 5 s, retried once; the whole update at most 20 s" in output
        for host in HOSTS:  # the others finished: their source is back
            if host != SILENT:
                ok(sandbox, host, f"test -f {SOURCES}")
    finally:
        sandbox.ssh(SILENT, f"rm -f {PROXY_CONF}; kill $(cat {PID_FILE}) 2>/dev/null; true")

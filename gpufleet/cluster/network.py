"""The network between the group's hosts: iperf3 TCP throughput and ping latency per link.

Which links: every ordered pair for groups of up to ``ALL_PAIRS_MAX`` hosts, else a ring in
both directions (each host to the next and back), which reaches every host's link with 2N
measurements instead of N(N-1). One measurement at a time, so links never share the wire.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from gpufleet.cluster.config import IPERF3_PORT, ClusterHost
from gpufleet.cluster.launcher import Launcher

ALL_PAIRS_MAX = 8
# iperf3: 4 parallel TCP streams (one stream is CPU-bound on fast links) for 3 s.
IPERF3_STREAMS = 4
IPERF3_SECONDS = 3
# gpufleet's choice: TCP over Ethernet carries ~94 % of the line rate at MTU 1500 (headers),
# and a loaded host or a shared switch takes some more; a link below 70 % is not the link
# the inventory declares (a 1 G fallback on a 10 G port gets 10 %).
THROUGHPUT_MARGIN = 0.70
# gpufleet's choice: hosts one switch apart answer in tens of microseconds; 1 ms means a
# routed or congested path, which all-reduce latency pays at every step.
LATENCY_MAX_MS = 1.0
PING_COUNT = 10
# Tries per link before it fails: iperf3 itself fails now and again (see measure_link).
LINK_TRIES = 3
# How long a just-started iperf3 server may take to listen (it takes milliseconds when well).
LISTEN_WAIT_S = 10
_RTT = re.compile(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms")
_LOSS = re.compile(r"([0-9.]+)% packet loss")


def links(hosts: Sequence[ClusterHost]) -> tuple[str, list[tuple[ClusterHost, ClusterHost]]]:
    """(mode, ordered (client, server) pairs): ``all_pairs`` or ``ring``."""
    if len(hosts) <= ALL_PAIRS_MAX:
        return "all_pairs", [(a, b) for a in hosts for b in hosts if a is not b]
    ring = []
    for i, a in enumerate(hosts):
        b = hosts[(i + 1) % len(hosts)]
        ring += [(a, b), (b, a)]
    return "ring", ring


def parse_iperf3(text: str) -> tuple[float | None, str]:
    """(received Gbit/s, error) from ``iperf3 -J`` output."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None, f"iperf3 printed no JSON: {text.strip()[:200]!r}"
    if not isinstance(doc, dict):
        return None, "iperf3 printed JSON that is not an object"
    if doc.get("error"):
        return None, f"iperf3: {doc['error']}"
    end: dict[str, Any] = doc["end"] if isinstance(doc.get("end"), dict) else {}
    try:
        if "sum_received" in end:
            return float(end["sum_received"]["bits_per_second"]) / 1e9, ""
        streams = [s["receiver"]["bits_per_second"] for s in end["streams"]]
        if streams:
            return sum(float(v) for v in streams) / 1e9, ""
    except (KeyError, TypeError, ValueError):
        pass
    return None, f"iperf3 reported no received throughput (end: {sorted(end) or 'empty'})"


def parse_ping(text: str) -> tuple[float | None, float | None]:
    """(average RTT in ms, packet loss in %) from ``ping -q`` output."""
    rtt, loss = _RTT.search(text), _LOSS.search(text)
    return (float(rtt.group(2)) if rtt else None, float(loss.group(1)) if loss else None)


def judge_link(link: dict[str, Any], declared_gbps: int) -> dict[str, Any]:
    """Add status and reason to one measured link."""
    floor = THROUGHPUT_MARGIN * declared_gbps
    problems = []
    if link.get("error"):
        problems.append(link["error"])
    elif link["gbps"] < floor:
        problems.append(
            f"{link['gbps']:.3g} Gbit/s < {floor:.3g} ({THROUGHPUT_MARGIN} x the declared "
            f"{declared_gbps} Gbit/s)"
        )
    if link.get("latency_ms") is None:
        problems.append("no ping answer")
    elif link["latency_ms"] > LATENCY_MAX_MS:
        problems.append(f"latency {link['latency_ms']:.3g} ms > {LATENCY_MAX_MS} ms")
    if link.get("loss_pct"):
        problems.append(f"{link['loss_pct']:g} % of pings lost")
    return {
        **link,
        "declared_gbps": declared_gbps,
        "floor_gbps": floor,
        "status": "fail" if problems else "pass",
        "reason": "; ".join(problems),
    }


def interface_of(launcher: Launcher, host: ClusterHost, peer: str) -> dict[str, Any]:
    """The interface and MTU ``host`` reaches ``peer`` through (``ip route get``)."""
    status, out, err = launcher.run(host, f"ip -j route get {plain_address(peer)}", timeout=20)
    try:
        dev = str(json.loads(out)[0]["dev"])
    except (json.JSONDecodeError, IndexError, KeyError, TypeError):
        return {"interface": None, "mtu": None, "error": f"ip route get: {err.strip()[:120]}"}
    if not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", dev):
        return {"interface": None, "mtu": None, "error": f"odd interface name {dev!r}"}
    status, out, _err = launcher.run(host, f"cat /sys/class/net/{dev}/mtu", timeout=20)
    mtu = int(out.strip()) if status == 0 and out.strip().isdigit() else None
    return {"interface": dev, "mtu": mtu}


def measure_link(launcher: Launcher, client: ClusterHost, server: ClusterHost) -> dict[str, Any]:
    """iperf3 from ``client`` to ``server`` and ping between them."""
    address = plain_address(server.address)
    link: dict[str, Any] = {"source": client.name, "target": server.name}
    link.update(interface_of(launcher, client, server.address))
    link["error"] = link.pop("error", "")
    label = "iperf3-server"
    serving = launcher.start(
        server, label, ["iperf3", "-s", "-1", "-p", str(IPERF3_PORT), "-B", address]
    )
    # No --connect-timeout (esnet/iperf#1150). The client starts only once the server listens:
    # iperf3 3.9 reports a client that came too early as "unable to send control message: Bad
    # file descriptor" (esnet/iperf#1233), and a -1 server may end after such a try. The
    # retries below are for a server that still was not ready, however the client words it.
    client_argv = f"iperf3 -J -c {address} -p {IPERF3_PORT} -t {IPERF3_SECONDS} -P {IPERF3_STREAMS}"
    gbps, error = None, "iperf3 server did not answer"
    try:
        listening = wait_listening(launcher, server, IPERF3_PORT)
        if not listening:
            error = f"iperf3 server on {server.name} was not listening on {IPERF3_PORT} within "
            error += f"{LISTEN_WAIT_S} s"
        for _attempt in range(10 if listening else 0):
            if serving.finished():
                _status, _out, err = serving.wait(1)
                error = f"iperf3 server on {server.name} exited: {err.strip()[:200]}"
                break
            _status, out, err = launcher.run(client, client_argv, timeout=IPERF3_SECONDS + 30)
            gbps, error = parse_iperf3(out)
            # 3.9 puts the reason on stderr and leaves an empty "end" in its JSON
            if gbps is not None or not server_not_ready(f"{error} {err}"):
                if err.strip():
                    error += f" (stderr: {err.strip()[-200:]})"
                break
            time.sleep(0.5)
    finally:
        if not serving.finished():
            launcher.stop(server, label)
        serving.wait(10)
    link["gbps"] = gbps if gbps is not None else 0.0
    if error:
        link["error"] = error
    _status, out, _err = launcher.run(
        client, f"ping -q -n -c {PING_COUNT} -i 0.2 -W 1 {address}", timeout=30
    )
    link["latency_ms"], link["loss_pct"] = parse_ping(out)
    return link


def listening_script(port: int, wait_s: int) -> str:
    """A shell line that exits 0 once something listens on TCP ``port``, 1 after ``wait_s``."""
    tries = int(wait_s) * 10
    return (
        f"i=0; while [ $i -lt {tries} ]; do ss -Htln 'sport = :{int(port)}' | grep -q . "
        f"&& exit 0; sleep 0.1; i=$((i+1)); done; exit 1"
    )


def wait_listening(launcher: Launcher, host: ClusterHost, port: int) -> bool:
    """Whether ``host`` listens on ``port`` within LISTEN_WAIT_S (one ssh round trip)."""
    status, _out, _err = launcher.run(
        host, listening_script(port, LISTEN_WAIT_S), timeout=LISTEN_WAIT_S + 20
    )
    return status == 0


def server_not_ready(error: str) -> bool:
    """Whether an iperf3 client error means the server was not listening yet (try again).

    iperf3 3.9 (Ubuntu 22.04) can report a refused connection (no server listening yet) as
    "unable to send control message: Bad file descriptor" rather than "unable to connect to
    server": a user reports exactly that in esnet/iperf#1233. Later releases say "unable to
    connect". Not confirmed on the sandbox yet (issue 16 note).
    """
    return "unable to connect" in error or "Bad file descriptor" in error


def plain_address(address: str) -> str:
    """The address, refused unless plain: it goes into remote shell lines unquoted (it was
    checked already, as ``cluster_address`` or the ssh host name; this is the last guard)."""
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,253}", address):
        raise ValueError(f"address {address!r} is not plain")
    return address


def measure(launcher: Launcher, hosts: Sequence[ClusterHost]) -> dict[str, Any]:
    """Every link of the group, measured and judged; the interfaces and MTUs seen."""
    mode, pairs = links(hosts)
    results = []
    for client, server in pairs:
        declared = min(client.interconnect_gbps, server.interconnect_gbps)
        link = measure_link(launcher, client, server)
        tries = [link["error"]] if link.get("error") else []
        while link.get("error") and len(tries) < LINK_TRIES:  # a fresh server, and again
            link = measure_link(launcher, client, server)
            tries += [link["error"]] if link.get("error") else []
        link["failed_tries"] = tries
        results.append(judge_link(link, declared))
    return {
        "mode": mode,
        "margin": THROUGHPUT_MARGIN,
        "latency_max_ms": LATENCY_MAX_MS,
        "iperf3": {"streams": IPERF3_STREAMS, "seconds": IPERF3_SECONDS, "port": IPERF3_PORT},
        "links": results,
    }

"""Loopback ports for tests, without racing anyone for them.

A port picked by binding 0 and then closed can be taken before the test binds it again: where a
server of the test binds it, `serve_www` retries on a taken port; a port that must refuse
connections is `refusing_port`, a socket kept bound (never listening) for the test's length.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpufleet.sandbox.serve import start_server
from gpufleet.sandbox.state import SandboxError


def free_port() -> int:
    """A loopback port free at the time of the call (use `serve_www` or retry on bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections while the block runs: bound, not listening, so
    nothing else can take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def serve_www(www: Path, log: Path, *, tries: int = 5) -> tuple[int, int]:
    """`start_server` for ``www`` on a free loopback port: ``(pid, port)``. A port taken between
    picking and binding is another try on a new port."""
    for attempt in range(tries):
        port = free_port()
        try:
            return start_server(www, "127.0.0.1", port, log), port
        except SandboxError as exc:
            if "in use" not in str(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports, free at the time of the call (all bound at once, so
    no two are the same). A server that binds one later may find it taken: retry on that."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# What a server that lost its port to someone else says (the kernel's EADDRINUSE; TensorFlow's
# gRPC server when it cannot bind its port).
TAKEN = ("Address already in use", "Could not start gRPC server", "Failed to add port")


def lost_its_port(output: str) -> bool:
    return any(words in output for words in TAKEN)

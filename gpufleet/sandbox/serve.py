"""The sandbox's static HTTP server (stand-in apt repository and wheel index), by PID."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

from gpufleet.sandbox.procs import spawn_detached
from gpufleet.sandbox.state import SandboxError

_MARKER = "gpufleet.sandbox.upstream"


def request_log(log: Path) -> Path:
    """Where the server started with output ``log`` records each request (`upstream.counts`)."""
    return log.with_name("upstream-requests.jsonl")


def start_server(www: Path, bind: str, port: int, log: Path, *, ready_timeout: float = 10.0) -> int:
    """Start the stand-in upstream (``python -m gpufleet.sandbox.upstream``, a static server
    like ``http.server`` that logs each request's bytes to `request_log`) on ``bind:port``
    serving ``www``, detached; return its PID.

    Its output goes to ``log``. Returns once the port answers, or raises `SandboxError` with the
    log's tail when the server exits first (e.g. the address is taken or not configured).

    Example: ``pid = start_server(STATE / "www", "10.231.7.1", 8631, STATE / "http.log")``
    """
    if not www.is_dir():
        raise SandboxError(
            f"{www} is not a directory. Fix: build the repository and wheel index first."
        )
    _check_free(bind, port)
    command = [
        sys.executable,
        "-m",
        _MARKER,
        "--bind",
        bind,
        "--directory",
        str(www),
        "--log",
        str(request_log(log)),
        str(port),
    ]
    process = spawn_detached(command, log)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SandboxError(
                f"the HTTP server on {bind}:{port} exited with status {process.returncode}: "
                f"{_tail(log)}. Fix: free the port or bring the sandbox's bridge up first."
            )
        try:
            with socket.create_connection((bind, port), timeout=0.2):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        if process.poll() is None:
            return process.pid
    stop_server(process.pid)
    raise SandboxError(f"the HTTP server on {bind}:{port} did not answer within {ready_timeout} s")


def _check_free(bind: str, port: int) -> None:
    """Fail early, with the reason, when ``bind:port`` cannot be listened on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind, port))
        except OSError as exc:
            raise SandboxError(
                f"cannot serve on {bind}:{port}: {exc.strerror}. Fix: stop what listens there, "
                "or bring the sandbox's bridge (which holds the address) up first."
            ) from exc


def stop_server(pid: int, *, timeout: float = 5.0) -> bool:
    """Stop the server started by `start_server`; False when no such server runs any more.

    Refuses to signal a PID that is not the stand-in upstream's process (the PID may have
    been reused).
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    if _MARKER not in cmdline:
        raise SandboxError(
            f"PID {pid} is not the sandbox's HTTP server (it runs {cmdline.strip()!r}); "
            "not stopping it. Fix: correct the PID in state.json."
        )
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def _alive(pid: int) -> bool:
    # Reap it when it is our own child; otherwise look at its state (a zombie is gone).
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"

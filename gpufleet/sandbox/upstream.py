"""The sandbox's stand-in upstream: a static HTTP server that logs each request's path and bytes.

    python -m gpufleet.sandbox.upstream --bind 10.231.7.1 --directory WWW --log LOG 8631

One JSON line per request (``{"path": ..., "status": 200, "bytes": 1234}``) goes to ``--log``;
`counts` sums them per path, which is how the tests and benchmarks see what the fleet fetched
from "upstream" (the stand-in NVIDIA repository and wheel index).
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _CountingHandler(SimpleHTTPRequestHandler):
    """Serves files like ``http.server`` and appends one line per request to the server's log."""

    log_path: Path
    log_lock = threading.Lock()

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def copyfile(self, source: Any, outputfile: Any) -> None:
        sent = 0
        while chunk := source.read(1 << 16):
            outputfile.write(chunk)
            sent += len(chunk)
        self._sent = sent

    def do_GET(self) -> None:
        self._sent, self._status = 0, 0
        try:
            super().do_GET()
        finally:
            self._record()

    def do_HEAD(self) -> None:
        self._sent, self._status = 0, 0
        try:
            super().do_HEAD()
        finally:
            self._record()

    def _record(self) -> None:
        line = json.dumps({"path": self.path, "status": self._status, "bytes": self._sent})
        with self.log_lock, open(self.log_path, "a") as log:
            log.write(line + "\n")


@dataclass(frozen=True)
class Served:
    """What the upstream served for one path: requests (status 200) and their bytes."""

    requests: int
    bytes: int


def counts(log: Path) -> dict[str, Served]:
    """Requests answered 200 and bytes sent, per path (query strings dropped); empty when the
    log does not exist."""
    requests: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return {}
    for line in lines:
        entry = json.loads(line)
        if entry["status"] != 200:
            continue
        path = entry["path"].split("?", 1)[0]
        requests[path] += 1
        sent[path] += entry["bytes"]
    return {path: Served(requests[path], sent[path]) for path in sorted(requests)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True)
    parser.add_argument("--directory", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("port", type=int)
    args = parser.parse_args(argv)
    handler = functools.partial(_CountingHandler, directory=str(args.directory))
    _CountingHandler.log_path = args.log
    server = ThreadingHTTPServer((args.bind, args.port), handler)
    # SIGTERM (stop_server) lets the requests in flight finish and log their line: a client
    # has its whole answer a moment before the server records it.
    server.daemon_threads = False
    server.block_on_close = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    finally:
        server.server_close()  # joins the request threads


if __name__ == "__main__":
    main()

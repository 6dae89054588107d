"""A stand-in for the provider's GraphQL endpoint on 127.0.0.1, and a fake clock."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OK = (200, json.dumps({"data": {"podTerminate": None}}))


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: dict


class FakeGraphQL:
    """Answers each POST with the next scripted (status, body), then OK for ever."""

    def __init__(self, script: list[tuple[int, str]] | None = None) -> None:
        self.script = list(script or [])
        self.calls: list[Call] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                api.calls.append(Call(self.path, dict(self.headers), json.loads(raw)))
                status, text = api.script.pop(0) if api.script else OK
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> "FakeGraphQL":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class FakeClock:
    """Wall time that only moves when the watchdog sleeps; ``on_sleep`` runs after each sleep."""

    t: float = 1_800_000_000.0
    sleeps: list[float] = field(default_factory=list)
    on_sleep: object = None
    max_sleeps: int = 100_000

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        assert len(self.sleeps) < self.max_sleeps, "the watchdog never stopped"
        self.t += seconds
        if callable(self.on_sleep):
            self.on_sleep(self)


def touch(path: Path, at: float) -> None:
    path.touch()
    os.utime(path, (at, at))

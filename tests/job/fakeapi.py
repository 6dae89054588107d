"""A stand-in for the provider's API on 127.0.0.1 (REST v2 DELETE and GraphQL), and a fake clock."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OK = (200, json.dumps({"data": {"podTerminate": None}}))
DELETED = (204, "")
REFUSED = (403, json.dumps({"title": "Forbidden", "status": 403, "detail": "access denied"}))


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: dict


class FakeGraphQL:
    """Answers each request with the next scripted (status, body): DELETEs (REST v2) from
    ``deletes`` (then ``REFUSED`` for ever, so the GraphQL fallback is exercised by default),
    POSTs (GraphQL) from ``script`` (then OK for ever)."""

    def __init__(self, script: list[tuple[int, str]] | None = None,
                 deletes: list[tuple[int, str]] | None = None) -> None:
        self.script = list(script or [])
        self.deletes = list(deletes or [])
        self.calls: list[Call] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                api.calls.append(Call(self.path, dict(self.headers), json.loads(raw)))
                self._answer(*(api.script.pop(0) if api.script else OK))

            def do_DELETE(self) -> None:  # noqa: N802
                api.calls.append(Call(self.path, dict(self.headers), {}))
                self._answer(*(api.deletes.pop(0) if api.deletes else REFUSED))

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def posts(self) -> list[Call]:
        return [c for c in self.calls if c.path == "/graphql"]

    @property
    def v2_deletes(self) -> list[Call]:
        return [c for c in self.calls if c.path.startswith("/v2/pods/")]

    def __enter__(self) -> FakeGraphQL:
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

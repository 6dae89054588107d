"""A small stand-in for Vast.ai's REST API on 127.0.0.1, for the provider's unit tests.

Not the mock cloud (that one runs the real job on SSH "instances"): this answers the routes the
provider calls with scripted state and faults, and records every request, so a test can say
what the provider sent and how it reacted.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

KEY = "vast_test_key_0123456789abcdef"


@dataclass
class Seen:
    method: str
    path: str
    query: dict
    body: Any
    auth: str


@dataclass
class FakeVast:
    offers: list[dict] = field(default_factory=lambda: [
        {"id": 11, "ask_contract_id": 11, "num_gpus": 2, "gpu_name": "RTX 4090", "min_bid": 0.50,
         "dph_total": 0.80, "storage_cost": 0.15, "direct_port_count": 10},
        {"id": 12, "ask_contract_id": 12, "num_gpus": 2, "gpu_name": "RTX 4090", "min_bid": 0.40,
         "dph_total": 0.90, "storage_cost": 0.15, "direct_port_count": 10}])
    instances: dict[str, dict] = field(default_factory=dict)
    charges: list[dict] = field(default_factory=list)
    balance: float = 10.0
    #: (method, path prefix) -> list of (status, body) answered first, one per request
    faults: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    #: what a create leaves: "running", a failed bid ("failed_bid"), or an on-demand instance
    #: whatever the price said ("ondemand": the answer is a bid's all the same)
    create_mode: str = "running"
    #: the v1 list's page size (its cursor is the last id shown)
    page_size: int = 25
    boot_status: str = "running"
    seen: list[Seen] = field(default_factory=list)
    next_id: int = 9000

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _go(self) -> None:
                url = urlparse(self.path)
                path = url.path.rstrip("/") or "/"   # clients write the trailing slash
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else None
                fake.seen.append(Seen(self.command, path, parse_qs(url.query), body,
                                      self.headers.get("Authorization", "")))
                status, answer = fake.answer(self.command, path, parse_qs(url.query), body,
                                             self.headers.get("Authorization", ""))
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _go

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeVast:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def calls(self, method: str, prefix: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path.startswith(prefix)]

    # ---- the routes ----------------------------------------------------------------------
    def answer(self, method: str, path: str, query: dict, body: Any, auth: str) -> tuple[int, Any]:
        for (m, prefix), script in self.faults.items():
            if m == method and path.startswith(prefix) and script:
                return script.pop(0)
        if auth != f"Bearer {KEY}":   # as Vast answers a key it does not know: 404
            return 404, {"success": False, "error": "auth_error", "msg": "Invalid API key"}
        if method == "POST" and path == "/api/v0/bundles":
            kind = body.get("type")
            names = (body.get("gpu_name") or {}).get("in") or []
            counts = (body.get("num_gpus") or {}).get("in")
            offers = [o for o in self.offers if o["gpu_name"] in names
                      and (counts is None or o["num_gpus"] in counts)]
            if kind == "bid":
                offers = [o for o in offers if o.get("min_bid") is not None]
            return 200, {"offers": offers}
        if method == "PUT" and path.startswith("/api/v0/asks/"):
            iid = self.next_id
            self.next_id += 1
            status = "stopped" if self.create_mode == "failed_bid" else None
            self.instances[str(iid)] = {
                "id": iid, "label": body["label"], "actual_status": status,
                "intended_status": "stopped" if status else "running", "num_gpus": 2,
                "gpu_name": "RTX 4090", "dph_total": body.get("price", 0.8),
                "dph_base": body.get("price", 0.8), "is_bid": body.get("price") is not None,
                **({"dph_base": 0.8, "dph_total": 0.81, "is_bid": False}
                   if self.create_mode == "ondemand" else {}),
                "public_ipaddr": "", "ports": {}}
            if self.create_mode == "failed_bid":
                return 200, {"success": False, "error": "bid_failed",
                             "msg": "bid below the going rate", "new_contract": iid}
            return 200, {"success": True, "new_contract": iid, "instance_api_key": "inst-key"}
        if method == "POST" and path.endswith("/ssh") and path.startswith("/api/v0/instances/"):
            iid = path.split("/")[4]
            inst = self.instances.get(iid)
            if inst is None:
                return 404, {"success": False, "error": "no_such_instance", "msg": "gone"}
            inst["actual_status"] = self.boot_status
            if self.boot_status == "running":
                inst.update(public_ipaddr="127.0.0.1",
                            ports={"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]})
            return 200, {"success": True, "msg": "key added"}
        if path.startswith("/api/v0/instances/"):
            iid = path.rstrip("/").split("/")[-1]
            inst = self.instances.get(iid)
            if method == "GET":
                return 200, {"instances": inst}
            if method == "DELETE":
                if inst is None:
                    return 404, {"success": False, "error": "no_such_instance", "msg": "gone"}
                del self.instances[iid]
                return 200, {"success": True}
        if method == "GET" and path == "/api/v1/instances":
            after = int((query.get("after_token") or ["0"])[0])
            rest = sorted((i for i in self.instances.values() if i["id"] > after),
                          key=lambda i: i["id"])
            page = rest[:self.page_size]
            more = len(rest) > len(page)
            return 200, {"success": True, "instances": page,
                         "next_token": str(page[-1]["id"]) if more else None}
        if method == "GET" and path == "/api/v0/charges":
            return 200, {"success": True, "results": self.charges, "next_token": None}
        if method == "GET" and path == "/api/v0/users/current":
            return 200, {"id": 1, "credit": self.balance, "balance": -4.2}
        return 404, {"success": False, "error": "not_found", "msg": f"{method} {path}"}

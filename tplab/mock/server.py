"""The mock cloud's HTTP server (aiohttp, 127.0.0.1 only): GraphQL, REST v1 and admin routes.

Routes:

- ``POST /graphql`` — RunPod's GraphQL subset (graphql_api.py). The runpod SDK reaches it through
  ``RUNPOD_API_BASE_URL=<api_url>``.
- ``/v1/pods...`` — RunPod's REST v1 pod routes (rest_api.py).
- ``GET /_mock/state``, ``GET /_mock/pods``, ``POST /_mock/faults`` — for tests and the
  orchestrator's mock mode: account figures, every pod ever created (with its live pids), and fault
  switches changed at run time (a JSON object merged into the current faults).

Auth: ``Authorization: Bearer <key>`` (or ``?api_key=``, as RunPod also accepts). A wrong or missing
key gets HTTP 401, as on RunPod. The account key may do everything; a pod-scoped key only what
graphql_api.py allows. The key is never logged (no access log).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from tplab.mock import graphql_api
from tplab.mock.faults import Faults
from tplab.mock.rest_api import create_from_rest, rest_pod
from tplab.mock.state import CloudError, CloudState

LOOPBACK = "127.0.0.1"
_STATE = web.AppKey("state", CloudState)


def _key_of(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.query.get("api_key", "")


def _unauthorized() -> web.Response:
    return web.Response(status=401, text="401 Unauthorized")


def _scope(request: web.Request) -> str | None | bool:
    key = _key_of(request)
    if not key:
        return False
    return request.app[_STATE].key_scope(key)


def _http_500(state: CloudState, call: str) -> web.Response | None:
    if state.faults.take_http_500(call):
        return web.Response(status=500, text="500 Internal Server Error")
    return None


async def handle_graphql(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    scope = _scope(request)
    if scope is False:
        return _unauthorized()
    try:
        payload = await request.json()
        query = payload["query"]
        if not isinstance(query, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return web.json_response({"errors": [{"message": "Must provide query string."}]},
                                 status=400)
    try:
        import graphql

        calls = graphql_api.root_fields(graphql.parse(query))
    except Exception:  # a syntax error: execute() reports it properly
        calls = []
    for call in calls:
        failed = _http_500(state, call)
        if failed is not None:
            return failed
    status, body = await graphql_api.execute(
        state, query, scope if isinstance(scope, str) else None,
        payload.get("variables"), payload.get("operationName"))
    return web.json_response(body, status=status)


def _rest_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message, "status": status}, status=status)


def _rest_refused(request: web.Request, call: str,
                  pod_id: str | None = None) -> web.Response | None:
    """What a REST call gets before it runs, or None to run it: 401 unless the key is account-wide
    (or, for a call on ``pod_id``, scoped to that pod), else the 500 injected for ``call``, if any.
    """
    scope = _scope(request)
    if pod_id is None:
        if scope is not None:
            return _unauthorized()
    elif scope is False or (scope is not None and scope != pod_id):
        return _unauthorized()
    return _http_500(request.app[_STATE], call)


async def rest_create(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    refused = _rest_refused(request, "POST /v1/pods")
    if refused is not None:
        return refused
    try:
        body = await request.json()
    except ValueError:
        return _rest_error(400, "request body must be JSON")
    try:
        pod = create_from_rest(state, body)
    except CloudError as exc:
        return _rest_error(400, str(exc))
    except (TypeError, ValueError) as exc:
        return _rest_error(400, f"invalid request: {exc}")
    return web.json_response(rest_pod(state, pod), status=201)


async def rest_list(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    refused = _rest_refused(request, "GET /v1/pods")
    if refused is not None:
        return refused
    return web.json_response([rest_pod(state, p) for p in state.live_pods()])


async def rest_get(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    pod_id = request.match_info["pod_id"]
    refused = _rest_refused(request, "GET /v1/pods", pod_id)
    if refused is not None:
        return refused
    pod = state.get_live(pod_id)
    if pod is None:
        return _rest_error(404, "pod not found")
    return web.json_response(rest_pod(state, pod))


async def rest_delete(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    pod_id = request.match_info["pod_id"]
    refused = _rest_refused(request, "DELETE /v1/pods", pod_id)
    if refused is not None:
        return refused
    if state.get_live(pod_id) is None:
        return _rest_error(404, "pod not found")
    try:
        await state.terminate_pod(pod_id)
    except CloudError as exc:
        return _rest_error(500, str(exc))
    return web.Response(status=204)


async def admin_state(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if _scope(request) is not None:
        return _unauthorized()
    return web.json_response({
        "balance": state.balance(), "initialBalance": state.initial_balance,
        "spendPerHr": state.spend_per_hr(), "faults": state.faults.to_dict(),
        "bootDelayS": state.boot_delay_s, "stateDir": str(state.state_dir),
        "pods": len(state.pods), "livePods": len(state.live_pods()),
    })


async def admin_pods(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if _scope(request) is not None:
        return _unauthorized()
    views = await asyncio.to_thread(lambda: [state.admin_view(p) for p in state.pods.values()])
    return web.json_response(views)


async def admin_faults(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if _scope(request) is not None:
        return _unauthorized()
    try:
        changes = await request.json()
        state.faults = state.faults.merged(changes)
    except (ValueError, TypeError) as exc:
        return _rest_error(400, f"bad faults: {exc}")
    return web.json_response(state.faults.to_dict())


def build_app(state: CloudState) -> web.Application:
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app[_STATE] = state
    app.router.add_post("/graphql", handle_graphql)
    app.router.add_post("/v1/pods", rest_create)
    app.router.add_get("/v1/pods", rest_list)
    app.router.add_get("/v1/pods/{pod_id}", rest_get)
    app.router.add_delete("/v1/pods/{pod_id}", rest_delete)
    app.router.add_get("/_mock/state", admin_state)
    app.router.add_get("/_mock/pods", admin_pods)
    app.router.add_post("/_mock/faults", admin_faults)
    return app


class MockCloudServer:
    """The mock cloud in this process: ``await start()``, use ``api_url``, ``await stop()``."""

    def __init__(self, *, api_key: str, balance_usd: float = 10.0, faults: Faults | None = None,
                 boot_delay_s: float = 1.0, state_dir: Path, port: int = 0,
                 keep_sandboxes: bool = False) -> None:
        self.state = CloudState(api_key=api_key, balance_usd=balance_usd,
                                faults=faults or Faults(), boot_delay_s=boot_delay_s,
                                state_dir=state_dir, keep_sandboxes=keep_sandboxes)
        self.port = port
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[Any] | None = None

    @property
    def api_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def rest_url(self) -> str:
        return f"{self.api_url}/v1"

    async def start(self) -> None:
        self._runner = web.AppRunner(build_app(self.state), access_log=None,
                                     handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.port)
        await site.start()
        server = site._server  # aiohttp keeps the bound sockets here
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self.state.api_url = self.api_url
        self._watch = asyncio.get_running_loop().create_task(self.state.watch_balance())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self.state.shutdown()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if not self.state.keep_sandboxes:
            import shutil

            await asyncio.to_thread(shutil.rmtree, self.state.state_dir, True)

    def ready_line(self) -> str:
        """The one JSON line printed when ready (parents read it: see handle.py)."""
        return json.dumps({"api_url": self.api_url, "rest_url": self.rest_url,
                           "api_key": self.state.api_key, "state_dir": str(self.state.state_dir),
                           "pid": __import__("os").getpid()})

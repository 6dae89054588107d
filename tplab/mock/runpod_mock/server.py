"""The mock cloud's HTTP server (aiohttp, 127.0.0.1 only): REST v2, GraphQL, REST v1 (gone), admin.

Routes:

- ``/v2/pods``, ``/v2/pods/{id}``, ``/v2/catalog/gpus``, ``/v2/billing/pods`` — RunPod's REST v2,
  held to RunPod's OpenAPI document (routes.py, contract.py).
- ``POST /graphql`` — what tplab still uses of RunPod's GraphQL: balance, spot quote and create,
  ``podTerminate`` (graphql_api.py). The runpod SDK reaches it through
  ``RUNPOD_API_BASE_URL=<api_url>``.
- ``/v1/...`` — 410 Gone, as RunPod's retired REST v1.
- ``GET /_mock/state``, ``GET /_mock/pods``, ``POST /_mock/faults`` — for tests and the
  orchestrator's mock mode: account figures, requests per route (``calls``: ``METHOD /route``
  for REST, ``graphql <root field>`` for each GraphQL root field asked), answers of the mock's
  that broke RunPod's document (``schemaViolations``), every pod ever created (with its live
  pids), and fault switches changed at run time (a JSON object merged into the current faults).

Errors outside GraphQL are RunPod's ``application/problem+json``: an unknown route (404), a
method a route does not take (405, with ``Allow``), and a crash of the mock's own (500, also
recorded in ``schemaViolations`` so the test that caused it fails).

Auth: ``Authorization: Bearer <key>``. A wrong or missing key gets HTTP 401, as on RunPod. The
account key may do everything; a pod-scoped key only what routes.py and graphql_api.py allow.
The key is never logged (no access log).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Awaitable, Callable

from aiohttp import web

from tplab.mock.runpod_mock import graphql_api, routes
from tplab.mock.runpod_mock.faults import Faults
from tplab.mock.loopback import LOOPBACK, LoopbackServer, error_page
from tplab.mock.runpod_mock.state import CloudState

__all__ = ["LOOPBACK", "MockCloudServer", "build_app"]
_STATE = routes.STATE


def _unauthorized() -> web.Response:
    return web.Response(status=401, text="401 Unauthorized")


def _server_error() -> web.Response:
    return web.Response(status=500, text="500 Internal Server Error")


@web.middleware
async def problem_errors(request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                         ) -> web.StreamResponse:
    """aiohttp's own 404/405 and any crash of the mock's, as RunPod answers errors:
    ``application/problem+json``, never a text page. A crash is a mock bug: also recorded in
    ``schemaViolations``, so the test that caused it fails."""
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        return routes.problem(405, f"{request.method} is not allowed on {request.path}; "
                               f"allowed: {allowed}", headers={"Allow": allowed})
    except web.HTTPNotFound:
        return routes.problem(404, f"no route {request.path}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return routes.problem(exc.status, exc.reason)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        msg = f"mock cloud bug: {request.method} {request.path} crashed: {exc!r}"
        request.app[_STATE].schema_violations.append(msg)
        print(msg, file=sys.stderr)
        return routes.problem(500, msg[:2000])


@web.middleware
async def count_calls(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
    """Count each API request by route (``METHOD /v2/pods/{id}``), so tests see which API was used."""
    resource = request.match_info.route.resource
    path = resource.canonical if resource is not None else request.path
    if not path.startswith("/_mock/"):
        if path.startswith("/v1/"):
            path = "/v1/..."
        request.app[_STATE].calls[f"{request.method} {path}"] += 1
    return await handler(request)


#: what RunPod's URL answers once GraphQL is retired (the ``graphql_retired`` switch)
_RETIRED_PAGE = ("<!DOCTYPE html><html><head><title>Not Found</title></head><body><h1>This API "
                 "has been retired</h1><p>Use https://rest.runpod.io/v2</p></body></html>")


async def handle_graphql(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    retired = state.faults.graphql_retired
    if retired:
        state.calls["graphql (retired)"] += 1
        if retired == "410":
            return web.json_response({"error": "gone", "message": "The GraphQL API has been "
                                      "retired: use REST v2."}, status=410)
        return web.Response(status=404 if retired == "404" else 200, text=_RETIRED_PAGE,
                            content_type="text/html")
    scope = routes.scope_of(request)
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

        document = graphql.parse(query)
        calls = graphql_api.root_fields(document)
        valid = not graphql.validate(graphql_api.schema(state.faults.spot_removed), document)
    except Exception:  # a syntax error: execute() reports it properly
        calls, valid = [], False
    for call in calls:  # a document refused at validation runs nothing: counted apart
        state.calls[f"graphql {call}" + ("" if valid else " (invalid)")] += 1
    for call in calls if valid else ():  # a document refused at validation is no such call
        if state.faults.take_http_429(call):
            return web.Response(status=429, text="429 Too Many Requests",
                                 headers={"Retry-After": str(int(state.faults.retry_after_s))})
        if state.faults.take_http_500(call):
            return error_page(500) if state.faults.error_page else _server_error()
        delay = state.faults.take_http_delay(call)
        if delay:
            await asyncio.sleep(delay)
    status, body = await graphql_api.execute(
        state, query, scope if isinstance(scope, str) else None,
        payload.get("variables"), payload.get("operationName"))
    if body is None:
        return _server_error()
    return web.json_response(body, status=status)


def _admin_only(request: web.Request) -> bool:
    return routes.scope_of(request) is None


async def admin_state(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if not _admin_only(request):
        return _unauthorized()
    return web.json_response({
        "balance": state.balance(), "initialBalance": state.initial_balance,
        "spendPerHr": state.spend_per_hr(), "faults": state.faults.to_dict(),
        "bootDelayS": state.boot_delay_s, "stateDir": str(state.state_dir),
        "pods": len(state.pods), "livePods": len(state.live_pods()),
        "calls": dict(sorted(state.calls.items())),
        "schemaViolations": list(state.schema_violations),
    })


async def admin_pods(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if not _admin_only(request):
        return _unauthorized()
    pods = list(state.pods.values())  # here, on the loop: a create meanwhile cannot change it
    for attempt in range(3):  # a pod's set of process roots may change while it is read
        try:
            views = await asyncio.to_thread(lambda: [state.admin_view(p) for p in pods])
            break
        except RuntimeError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.05)
    return web.json_response(views)


async def admin_faults(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if not _admin_only(request):
        return _unauthorized()
    try:
        changes = await request.json()
        state.faults = state.faults.merged(changes)
    except (ValueError, TypeError) as exc:
        return web.json_response({"error": f"bad faults: {exc}"}, status=400)
    return web.json_response(state.faults.to_dict())


def build_app(state: CloudState) -> web.Application:
    app = web.Application(client_max_size=4 * 1024 * 1024,
                          middlewares=[problem_errors, count_calls])
    app[_STATE] = state
    app.router.add_post("/graphql", handle_graphql)
    routes.add_routes(app)
    app.router.add_get("/_mock/state", admin_state)
    app.router.add_get("/_mock/pods", admin_pods)
    app.router.add_post("/_mock/faults", admin_faults)
    return app


class MockCloudServer(LoopbackServer):
    """The RunPod mock in this process: ``await start()``, use ``api_url``, ``await stop()``."""

    provider = "runpod"

    def __init__(self, *, api_key: str, balance_usd: float = 10.0, faults: Faults | None = None,
                 boot_delay_s: float = 1.0, state_dir: Path, port: int = 0,
                 keep_sandboxes: bool = False) -> None:
        super().__init__(port)
        self.state = CloudState(api_key=api_key, balance_usd=balance_usd,
                                faults=faults or Faults(), boot_delay_s=boot_delay_s,
                                state_dir=state_dir, keep_sandboxes=keep_sandboxes)

    def build_app(self) -> web.Application:
        return build_app(self.state)

    async def watch(self) -> None:
        await self.state.watch_balance()

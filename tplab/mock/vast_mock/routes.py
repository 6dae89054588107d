"""The mock Vast cloud's API routes, as Vast serves them under ``https://console.vast.ai``.

Each route is served with and without the trailing slash (clients send ``/api/v0/asks/{id}/``;
the document spells ``/api/v0/asks/{id}``). Every request passes, in order: auth (``Bearer``;
a key Vast does not know is 404 ``auth_error``, as Vast answers it; the ``key_refused`` switch
answers the account key as a deleted key, an expired session or an account with 2FA would be:
``refusal``), the per-instance key's scope (start/stop/destroy its own instance only; 401), the
rate limit and the fault switches (429 ``{"detail": "API requests too frequent ..."}`` without a
Retry-After header, per endpoint and per key: limits.py with ``rate_scale``, ``http_429``;
500, as Vast's JSON or a proxy's HTML page; an answer held back), the document's path, query and
body schemas (400 ``invalid_args``, or the code the route's 400 lists), the handler; and every
answer is held to the document (contract.py) — one that breaks it is a mock bug, answered 500
and recorded in ``/_mock/state`` (``schemaViolations``) so the test that caused it fails.
Errors are Vast's JSON: ``{"success": false, "error": "...", "msg": "..."}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Awaitable, Callable

from aiohttp import web

from tplab.mock.document import SchemaViolation
from tplab.mock.loopback import error_page
from tplab.mock.vast_mock import contract, handlers
from tplab.mock.vast_mock.faults import TOO_FREQUENT
from tplab.mock.vast_mock.state import VastError, VastState

STATE = web.AppKey("vast_state", VastState)
JSON_TYPE = "application/json"
Handler = Callable[[VastState, dict[str, Any], Any, int | None], Awaitable[tuple[int, Any]]]
#: what a per-instance key may do: (method, route) on its own instance only
INSTANCE_KEY_MAY = {("delete", "/api/v0/instances/{id}"), ("put", "/api/v0/instances/{id}")}


def error_body(error: str, msg: str, **extra: Any) -> dict[str, Any]:
    return {"success": False, "error": error, "msg": msg, **extra}


def json_answer(status: int, body: Any) -> web.Response:
    """JSON with ``Content-Type: application/json`` exactly, no charset (contract.BEHAVIOURS:
    the CLI refuses an offers answer whose type is anything else)."""
    return web.Response(status=status, body=json.dumps(body).encode(),
                        headers={"Content-Type": JSON_TYPE})


def key_of(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def bug(state: VastState, what: str) -> web.Response:
    """A mock bug: recorded (the test that caused it fails), answered 500 in Vast's shape."""
    msg = f"mock vast bug: {what}"
    state.schema_violations.append(msg)
    print(msg, file=sys.stderr)
    return json_answer(500, error_body("server_error", msg[:2000]))


def answer(state: VastState, route: str, method: str, status: int, body: Any) -> web.Response:
    """The answer, after Vast's document has confirmed it (else a 500 and a recorded bug)."""
    try:
        contract.check_response(route, method, status, body)
    except SchemaViolation as exc:
        return bug(state, f"the answer broke Vast's OpenAPI document: {exc}")
    return json_answer(status, body)


#: how Vast refuses a key (departures.BEHAVIOURS): the ``key_refused`` switch -> (status, body)
REFUSALS: dict[str, tuple[int, dict[str, Any]]] = {
    "revoked": (404, error_body("auth_error", "Invalid API key: no user is logged in with it.")),
    "deleted": (401, error_body("auth_error", "Invalid user key")),
    "session": (404, error_body("auth_error", "Session expired. Please log in again.")),
    "2fa": (401, error_body("auth_error", "This account requires Two Factor Authentication: "
                                          "log in with your second factor.")),
}


def refusal(state: VastState, key: str) -> tuple[int, dict[str, Any]] | None:
    """How Vast answers this key, when it refuses it (None: the key is accepted)."""
    scope = state.key_scope(key)
    if scope is False:
        return REFUSALS["revoked"]
    if scope is None and state.faults.key_refused:
        return REFUSALS[state.faults.key_refused]
    return None


def route_handler(route: str, method: str, handler: Handler) -> Callable[[web.Request],
                                                                        Awaitable[web.Response]]:
    call = f"{method.upper()} {route}"
    code = contract.CONTRACT.error_code(route, method)

    async def wrapped(request: web.Request) -> web.Response:
        state = request.app[STATE]
        state.calls[call] += 1
        key = key_of(request)
        refused = refusal(state, key)
        if refused is not None:
            return answer(state, route, method, *refused)
        scope = state.key_scope(key)
        if scope is not None and ((method, route) not in INSTANCE_KEY_MAY
                                  or request.match_info.get("id") != str(scope)):
            return answer(state, route, method, 401, error_body(
                "auth_error", "This key may only start, stop or destroy its own instance."))
        limited = TOO_FREQUENT if state.faults.take(state.faults.http_429, call) \
            else state.limiter.refuse(call, key)
        if limited is not None:
            state.rate_limited[call] += 1
            return json_answer(429, {"detail": limited})  # no Retry-After: Vast sends none
        if state.faults.take(state.faults.http_500, call):
            return error_page(500) if state.faults.error_page else \
                json_answer(500, error_body("server_error", "Internal server error."))
        if state.faults.take(state.faults.http_delay, call):
            await asyncio.sleep(state.faults.delay_s)
        try:
            params = contract.CONTRACT.check_values(route, method, "path",
                                                    dict(request.match_info))
            query = contract.CONTRACT.check_values(route, method, "query", dict(request.query))
        except SchemaViolation as exc:
            return answer(state, route, method, 400, error_body(code, str(exc)))
        body: Any = None
        if contract.CONTRACT.body_fields(route, method) is not None:
            try:
                body = await request.json()
            except ValueError:
                return answer(state, route, method, 400,
                              error_body(code, "The request body is not JSON."))
            try:
                contract.check_request_body(route, method, body)
            except SchemaViolation as exc:
                return answer(state, route, method, 400, error_body(code, str(exc)))
        try:
            status, out = await handler(state, {**query, **params}, body,
                                        scope if isinstance(scope, int) else None)
        except VastError as exc:
            status, out = exc.status, error_body(exc.error, exc.msg, **exc.extra)
        return answer(state, route, method, status, out)

    return wrapped


ROUTE_HANDLERS: dict[tuple[str, str], Handler] = {
    ("/api/v0/bundles", "post"): handlers.search_offers,
    ("/api/v0/asks/{id}", "put"): handlers.create_instance,
    ("/api/v0/instances/{id}", "get"): handlers.show_instance,
    ("/api/v0/instances/{id}", "put"): handlers.manage_instance,
    ("/api/v0/instances/{id}", "delete"): handlers.destroy_instance,
    ("/api/v0/instances/{id}/ssh", "post"): handlers.attach_ssh,
    ("/api/v0/instances/{id}/ssh", "get"): handlers.show_instance_ssh,
    ("/api/v0/instances/{id}/ssh/{ssh_key_id}", "delete"): handlers.detach_ssh,
    ("/api/v0/instances/bid_price/{id}", "put"): handlers.change_bid,
    ("/api/v0/ssh", "post"): handlers.create_ssh_key,
    ("/api/v0/ssh", "get"): handlers.list_ssh_keys,
    ("/api/v0/ssh/{id}", "put"): handlers.update_ssh_key,
    ("/api/v0/ssh/{id}", "delete"): handlers.delete_ssh_key,
    ("/api/v1/instances", "get"): handlers.list_instances,
    ("/api/v0/users/current", "get"): handlers.show_user,
    ("/api/v0/charges", "get"): handlers.show_charges,
}


async def deprecated_list(request: web.Request) -> web.Response:
    """``GET /api/v0/instances/`` (the old list, not in the document): deprecated, answered as
    the service answers it (contract.BEHAVIOURS) and counted, so a test sees who still asks."""
    state = request.app[STATE]
    state.calls[DEPRECATED_LIST] += 1
    refused = refusal(state, key_of(request))
    if refused is not None:
        return json_answer(*refused)
    return json_answer(410, error_body(
        "deprecated_endpoint", "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead."))


#: the name ``calls`` counts the deprecated list under
DEPRECATED_LIST = "GET /api/v0/instances (deprecated list)"


def add_routes(app: web.Application) -> None:
    assert {r for r, _ in ROUTE_HANDLERS} == set(contract.ROUTES)
    for (route, method), handler in ROUTE_HANDLERS.items():
        wrapped = route_handler(route, method, handler)
        for path in (route, route + "/"):
            app.router.add_route(method.upper(), path, wrapped)
    for path in ("/api/v0/instances", "/api/v0/instances/"):
        app.router.add_get(path, deprecated_list)

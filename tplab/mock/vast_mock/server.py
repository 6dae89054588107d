"""The mock Vast cloud's HTTP server (aiohttp, 127.0.0.1 only): Vast's API routes plus admin routes.

- The API (routes.py): ``/api/v0/bundles``, ``/api/v0/asks/{id}``, ``/api/v0/instances/...``,
  ``/api/v0/ssh/...``, ``/api/v1/instances``, ``/api/v0/users/current``, ``/api/v0/charges``;
  the old list ``GET /api/v0/instances/`` answers 410 ``deprecated_endpoint``.
- Admin, as on the RunPod mock (so ``MockCloud`` in handle.py drives both alike):
  ``GET /_mock/state`` (credit, faults, ``calls`` per route as ``METHOD /route``,
  ``rateLimited``: the 429s answered per route, ``schemaViolations``), ``GET /_mock/pods``
  (every instance ever created, with its live pids), ``POST /_mock/faults`` (merge fault switches: faults.py), ``POST /_mock/outbid``
  (``{"id": N}``: a higher bid takes that running bid instance now). Account key only.
- Anything else — an unknown route, a method a route does not take, a crash of the mock's own —
  answers in Vast's JSON error shape (404 ``not_found``, 405 ``method_not_allowed``, 500
  ``server_error``), never a text page; a crash is also recorded in ``schemaViolations``, so
  the test that caused it fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable

from aiohttp import web

from tplab.mock.loopback import LoopbackServer
from tplab.mock.vast_mock import routes
from tplab.mock.vast_mock.faults import VastFaults
from tplab.mock.vast_mock.routes import STATE, bug, error_body, json_answer
from tplab.mock.vast_mock.state import VastError, VastState


@web.middleware
async def vast_errors(request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
    """aiohttp's own 404/405 and any exception, in Vast's error shape."""
    state = request.app[STATE]
    try:
        return await handler(request)
    except web.HTTPMethodNotAllowed as exc:
        state.calls[f"{request.method} (wrong method)"] += 1
        return json_answer(405, error_body("method_not_allowed",
                                           f"{request.method} is not allowed on {request.path}; "
                                           f"allowed: {', '.join(sorted(exc.allowed_methods))}"))
    except web.HTTPNotFound:
        state.calls[f"{request.method} (unknown route)"] += 1
        return json_answer(404, error_body("not_found", f"No API route {request.path}."))
    except web.HTTPException as exc:  # e.g. 413 body too large
        return json_answer(exc.status, error_body("invalid_request", exc.reason))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a mock bug
        return bug(state, f"{request.method} {request.path} crashed: {exc!r}")


def _admin(request: web.Request) -> bool:
    return request.app[STATE].key_scope(routes.key_of(request)) is None


def _unauthorized() -> web.Response:
    return json_answer(401, error_body("auth_error", "admin routes take the account key"))


async def admin_state(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not _admin(request):
        return _unauthorized()
    live = state.live()
    return web.json_response({
        "provider": "vast", "credit": state.credit(), "initialCredit": state.initial_credit,
        "faults": state.faults.to_dict(), "bootDelayS": state.boot_delay_s,
        "stateDir": str(state.state_dir), "instances": len(state.instances),
        "liveInstances": len(live), "accountKeys": len(state.account_keys),
        "calls": dict(sorted(state.calls.items())),
        "rateLimited": dict(sorted(state.rate_limited.items())),
        "schemaViolations": list(state.schema_violations),
    })


async def admin_pods(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not _admin(request):
        return _unauthorized()
    instances = list(state.instances.values())
    views = await asyncio.to_thread(lambda: [state.admin_view(i) for i in instances])
    return web.json_response(views)


async def admin_faults(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not _admin(request):
        return _unauthorized()
    try:
        changes = await request.json()
        state.faults = state.faults.merged(changes)
        if "offer_taken" in changes:  # a new script: every offer back on the market
            state.taken.clear()
            state.repriced.clear()
    except (ValueError, TypeError) as exc:
        return json_answer(400, error_body("invalid_args", f"bad faults: {exc}"))
    return web.json_response(state.faults.to_dict())


async def admin_outbid(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if not _admin(request):
        return _unauthorized()
    try:
        inst = state.get(int((await request.json())["id"]))
    except VastError as exc:
        return json_answer(exc.status, error_body(exc.error, exc.msg))
    except (ValueError, TypeError, KeyError) as exc:
        return json_answer(400, error_body("invalid_args", f"bad outbid: {exc}"))
    if not inst.is_bid:
        return json_answer(400, error_body("invalid_args", f"instance {inst.id} is not a bid"))
    inst.tasks.append(asyncio.get_running_loop().create_task(state.outbid(inst)))
    return web.json_response({"id": inst.id})


def build_app(state: VastState) -> web.Application:
    app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[vast_errors])
    app[STATE] = state
    routes.add_routes(app)
    app.router.add_get("/_mock/state", admin_state)
    app.router.add_get("/_mock/pods", admin_pods)
    app.router.add_post("/_mock/faults", admin_faults)
    app.router.add_post("/_mock/outbid", admin_outbid)
    return app


class VastMockServer(LoopbackServer):
    """The mock Vast cloud in this process: ``await start()``, use ``api_url``, ``await stop()``."""

    provider = "vast"

    def __init__(self, *, api_key: str, balance_usd: float = 10.0,
                 faults: VastFaults | None = None, boot_delay_s: float = 1.0, state_dir: Path,
                 port: int = 0, keep_sandboxes: bool = False) -> None:
        super().__init__(port)
        self.state = VastState(api_key=api_key, balance_usd=balance_usd,
                               faults=faults or VastFaults(), boot_delay_s=boot_delay_s,
                               state_dir=state_dir, keep_sandboxes=keep_sandboxes)

    def build_app(self) -> web.Application:
        return build_app(self.state)

    async def watch(self) -> None:
        await self.state.watch_credit()

"""The mock's REST v2 routes, as RunPod serves them at ``https://api.runpod.io/v2``.

- ``POST /v2/pods`` -> 201 ``Pod`` (``PROVISIONING``); ``GET /v2/pods`` -> ``{"pods": [...]}``;
  ``GET /v2/pods/{id}`` -> ``Pod`` (404 once terminated); ``DELETE /v2/pods/{id}`` -> 204 (404
  when not found).
- ``GET /v2/catalog/gpus`` (``include=AVAILABILITY&product=POD``, ``count``, ``cloud``) -> GPU
  types with per-GPU prices and stock; ``GET /v2/billing/pods`` (``podId``, ``bucketSize``,
  ``lastN`` or ``startTime``/``endTime``) -> billing records.
- Every other ``/v1/...`` request answers 410 Gone: REST v1 was retired (2026-11-15).

Every request (body and query) and every answer of these routes is checked against RunPod's
OpenAPI document (contract.py): a body with a field the document does not allow gets 422 with
``errors`` listing each violation, as on RunPod; an answer of the mock's that breaks the document
is a mock bug, answered as HTTP 500 and recorded in ``/_mock/state`` (``schemaViolations``) so
the test that caused it fails. Errors are ``application/problem+json``
(``{title, status, detail, errors?}``).

Keys: the account key may do everything; a pod-scoped key (``RUNPOD_API_KEY`` inside a pod) may
read and delete its own pod only (403 otherwise; and 403, or the status it names, for its DELETE
under the ``pod_key_delete_refused`` fault).
"""

from __future__ import annotations

import asyncio
import json
import sys
from http import HTTPStatus
from typing import Any, Awaitable, Callable

from aiohttp import web

from tplab.mock.loopback import error_page
from tplab.mock.runpod_mock import answers, contract
from tplab.mock.runpod_mock.state import CloudError, CloudState

STATE = web.AppKey("state", CloudState)
V1_GONE = ("RunPod's REST API v1 was retired on 2026-11-15; use REST API v2 "
           "(https://api.runpod.io/v2).")
Handler = Callable[[web.Request, CloudState, dict[str, Any], Any],
                   Awaitable[tuple[int, Any]]]


def problem(status: int, detail: str, errors: list[str] | None = None,
            headers: dict[str, str] | None = None) -> web.Response:
    body: dict[str, Any] = {"title": HTTPStatus(status).phrase, "status": status,
                            "detail": detail}
    if errors:
        body["errors"] = errors
    return web.Response(status=status, text=json.dumps(body), headers=headers,
                        content_type="application/problem+json")


def key_of(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def scope_of(request: web.Request) -> str | None | bool:
    """None: the account key; a pod id: a pod-scoped key; False: no valid key."""
    key = key_of(request)
    return request.app[STATE].key_scope(key) if key else False


def _answer(state: CloudState, route: str, method: str, status: int, body: Any) -> web.Response:
    """The answer, after RunPod's document has confirmed it (else a 500 and a recorded bug)."""
    try:
        media = contract.check_response(route, method, status, body)
    except contract.SchemaViolation as exc:
        msg = f"mock cloud bug: {exc}"
        state.schema_violations.append(msg)
        print(msg, file=sys.stderr)
        return problem(500, "The mock cloud's answer broke RunPod's OpenAPI document: "
                       + "; ".join(exc.errors)[:2000])
    if body is None:
        return web.Response(status=status)
    return web.Response(status=status, text=json.dumps(body),
                        content_type=media or "application/json")


def v2(route: str, method: str, handler: Handler, *,
       pod_scoped: bool = False) -> Callable[[web.Request], Awaitable[web.Response]]:
    """Wrap ``handler`` with auth, faults, request validation and answer validation."""
    call = f"{method.upper()} {route}"

    async def wrapped(request: web.Request) -> web.Response:
        state = request.app[STATE]
        scope = scope_of(request)
        if scope is False:
            return _answer(state, route, method, 401, {
                "title": "Unauthorized", "status": 401,
                "detail": "missing bearer token" if not key_of(request) else "invalid API key"})
        if scope is not None:
            pod_id = request.match_info.get("id")
            if not pod_scoped or pod_id != scope:
                return _answer(state, route, method, 403, {
                    "title": "Forbidden", "status": 403,
                    "detail": "access denied: this API key is scoped to a single pod"})
        if state.faults.take_http_429(call):
            wait = max(0, int(state.faults.retry_after_s))
            return problem(429, "rate limit exceeded for the minute window",
                           headers={"Retry-After": str(wait)})
        if state.faults.take_http_500(call):
            return error_page(500) if state.faults.error_page else problem(500, "internal error")
        delay = state.faults.take_http_delay(call)
        if delay:
            await asyncio.sleep(delay)
        try:
            query = contract.check_query(route, method, dict(request.query))
        except contract.SchemaViolation as exc:
            return _answer(state, route, method, 400, {
                "title": "Bad Request", "status": 400, "detail": str(exc),
                "errors": exc.errors})
        body: Any = None
        if method == "post":
            try:
                body = await request.json()
            except ValueError:
                return _answer(state, route, method, 400, {
                    "title": "Bad Request", "status": 400,
                    "detail": "the request body is not JSON"})
            try:
                contract.check_request_body(route, method, body)
            except contract.SchemaViolation as exc:
                return _answer(state, route, method, 422, {
                    "title": "Unprocessable Entity", "status": 422,
                    "detail": "Request validation failed.", "errors": exc.errors})
        try:
            status, answer = await handler(request, state, query, body)
        except CloudError as exc:
            status, answer = exc.status, {"title": HTTPStatus(exc.status).phrase,
                                          "status": exc.status, "detail": str(exc)}
        return _answer(state, route, method, status, answer)

    return wrapped


# ---- the routes ------------------------------------------------------------------------------
async def create_pod(request: web.Request, state: CloudState, query: dict[str, Any],
                     body: dict[str, Any]) -> tuple[int, Any]:
    if "gpu" not in body:
        raise CloudError("The mock cloud has GPU pods only: give `gpu`.")
    if "templateId" in body:
        raise CloudError("The mock cloud has no templates: give `image`.")
    gpu = body["gpu"]
    pod = state.create_pod(
        name=body["name"], image=body.get("image", ""), gpu_type_id=gpu["id"],
        gpu_count=int(gpu.get("count", 1)), interruptible=False, bid_per_gpu=None,
        env=dict(body.get("env") or {}), ports=list(body.get("ports") or []),
        disk_gb=body.get("disk"), args=body.get("args", ""),
        min_cuda=gpu.get("minCudaVersion"), cloud=body.get("cloud", "SECURE"),
        allowed_cuda=list(gpu.get("allowedCudaVersions") or []))
    if state.faults.take_create_500():  # the pod exists and bills; the caller hears an error
        return 500, {"title": "Internal Server Error", "status": 500,
                     "detail": "upstream error while creating the pod"}
    return 201, answers.pod_view(state, pod)


async def list_pods(request: web.Request, state: CloudState, query: dict[str, Any],
                    body: Any) -> tuple[int, Any]:
    return 200, {"pods": [answers.pod_view(state, p) for p in await state.read_pods()]}


async def get_pod(request: web.Request, state: CloudState, query: dict[str, Any],
                  body: Any) -> tuple[int, Any]:
    pods = await state.read_pods(request.match_info["id"])
    if not pods:
        raise CloudError("pod not found", 404)
    return 200, answers.pod_view(state, pods[0])


async def delete_pod(request: web.Request, state: CloudState, query: dict[str, Any],
                     body: Any) -> tuple[int, Any]:
    pod_id = request.match_info["id"]
    refused = state.faults.pod_key_delete_refused
    if refused and scope_of(request) == pod_id:
        status = 403 if refused is True else int(refused)
        raise CloudError("access denied: a pod-scoped key may not delete pods" if status == 403
                         else f"Pod {pod_id} not found.", status)
    await state.terminate_pod(pod_id)
    return 204, None


async def list_gpus(request: web.Request, state: CloudState, query: dict[str, Any],
                    body: Any) -> tuple[int, Any]:
    include = "AVAILABILITY" in query.get("include", [])
    if include != bool(query.get("product")):
        raise CloudError("product is required with include=AVAILABILITY, and valid only with it")
    if not include and ("count" in query or "cloud" in query):
        raise CloudError("count and cloud are valid only with include=AVAILABILITY")
    count = int(query.get("count", 1)) if include else None
    cuda_versions, min_cuda = query.get("cudaVersions"), query.get("minCudaVersion")
    if (cuda_versions or min_cuda) and not include:
        raise CloudError("cudaVersions and minCudaVersion are valid only with "
                         "include=AVAILABILITY")
    if cuda_versions and min_cuda:
        raise CloudError("cudaVersions and minCudaVersion are mutually exclusive")
    view = answers.catalog_view(state, count, cuda_versions, min_cuda)
    if include and query.get("cloud") == "COMMUNITY":  # the mock's machines are all SECURE
        for gpu in view["gpus"]:
            gpu["availability"], gpu["dataCenters"] = "NONE", []
    return 200, view


async def pod_billing(request: web.Request, state: CloudState, query: dict[str, Any],
                      body: Any) -> tuple[int, Any]:
    if "lastN" in query and ({"startTime", "endTime"} & set(query)):
        raise CloudError("lastN is mutually exclusive with startTime/endTime")
    return 200, answers.billing_view(state, query)


async def v1_gone(request: web.Request) -> web.Response:
    return problem(410, V1_GONE)


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/v2/pods", v2("/v2/pods", "post", create_pod))
    r.add_get("/v2/pods", v2("/v2/pods", "get", list_pods))
    r.add_get("/v2/pods/{id}", v2("/v2/pods/{id}", "get", get_pod, pod_scoped=True))
    r.add_delete("/v2/pods/{id}", v2("/v2/pods/{id}", "delete", delete_pod, pod_scoped=True))
    r.add_get("/v2/catalog/gpus", v2("/v2/catalog/gpus", "get", list_gpus))
    r.add_get("/v2/billing/pods", v2("/v2/billing/pods", "get", pod_billing))
    r.add_route("*", "/v1/{tail:.*}", v1_gone)

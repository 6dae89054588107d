"""What the mock's REST v2 routes answer: a pod, the GPU catalog, pod billing — in RunPod's shapes.

Why apart from the routes: these are the mock's claims about RunPod's answers, so they are the
part the OpenAPI document checks (contract.py); keeping them as plain functions of the state lets
a test validate them directly. Field names and required fields follow ``Pod``,
``ListGpuTypesResponse`` and ``ListPodBillingResponse`` of RunPod's document.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from tplab.mock.runpod_mock.catalog import CATALOG, GpuOffer
from tplab.mock.runpod_mock.state import MACHINE_CUDA, CloudState, MockPod, cuda_tuple

DATA_CENTER = {"id": "MOCK-LOOPBACK-1", "name": "Mock loopback 1"}
_ACTIONS = {"PROVISIONING": ["terminate"], "STARTING": ["terminate"],
            "RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
            "ERROR": ["terminate"], "TERMINATED": []}


def pod_view(state: CloudState, pod: MockPod) -> dict[str, Any]:
    """A pod as RunPod's ``Pod`` (never the pod-scoped key: the API does not show it)."""
    port = state.ssh_port(pod)
    since = pod.runtime_since if pod.status == "RUNNING" else None
    runtime = None
    if since is not None:
        runtime = {
            "uptime": int(time.monotonic() - since),
            "gpus": [{"util": 0, "memoryUtil": 0} for _ in range(pod.gpu_count)],
            "cpu": {"util": 0}, "memory": {"util": 0},
            "ports": ([{"private": 22, "public": port, "type": "tcp", "ip": "127.0.0.1"}]
                      if port else []),
        }
    direct = None
    if port:
        direct = {"host": "127.0.0.1", "port": port, "username": "root",
                  "command": f"ssh root@127.0.0.1 -p {port}"}
    billing = pod.status in ("PROVISIONING", "STARTING", "RUNNING")
    return {
        "id": pod.id, "name": pod.name, "status": pod.status,
        "actions": list(_ACTIONS[pod.status]),
        "image": pod.image, "args": pod.args, "disk": pod.disk_gb, "ports": list(pod.ports),
        "env": dict(pod.user_env), "registry": None,
        "mounts": {}, "gpu": {"id": pod.offer.id, "count": pod.gpu_count},
        "cloud": "SECURE", "dataCenterId": DATA_CENTER["id"],
        "cudaVersion": pod.host_cuda or MACHINE_CUDA,
        "ssh": {"proxy": None, "direct": direct},
        "template": None, "cost": pod.cost_per_hr if billing else 0,
        "locked": False, "globalNetworking": {"enabled": False},
        "runtime": runtime, "createdAt": pod.created_at, "startedAt": pod.started_at,
    }


def _availability(offer: GpuOffer, count: int, state: CloudState) -> str:
    if count > offer.max_count or state.faults.no_on_demand_capacity:
        return "NONE"
    return offer.stock.upper()


def host_versions(offer: GpuOffer, cuda_versions: list[str] | None = None,
                  min_cuda: str | None = None) -> list[str]:
    """The GPU type's hosts' CUDA versions, scoped by the catalog's ``cudaVersions`` (exact)
    or ``minCudaVersion`` (a floor; a bare major is any release of it) filter."""
    out = list(offer.host_cuda)
    if cuda_versions:
        out = [v for v in out if v in cuda_versions]
    if min_cuda:
        floor = cuda_tuple(min_cuda if "." in min_cuda else f"{min_cuda}.0")
        out = [v for v in out if cuda_tuple(v) >= floor]
    return out


def gpu_type_view(offer: GpuOffer, state: CloudState, count: int | None,
                  cuda_versions: list[str] | None = None,
                  min_cuda: str | None = None) -> dict[str, Any]:
    """A GPU type as RunPod's ``GpuType``; with ``count`` (include=AVAILABILITY) its stock and
    its hosts' CUDA versions (scoped by the query's CUDA filter)."""
    view: dict[str, Any] = {
        "id": offer.id, "name": offer.display_name, "pool": None, "manufacturer": "NVIDIA",
        "memory": offer.memory_gb, "secure": True, "community": False,
        "price": {"secure": offer.on_demand_usd, "community": offer.on_demand_usd},
        "maxCount": {"secure": offer.max_count, "community": 0},
    }
    if count is not None:
        hosts = host_versions(offer, cuda_versions, min_cuda)
        level = _availability(offer, count, state) if hosts else "NONE"
        view["availability"] = level
        view["dataCenters"] = [{**DATA_CENTER, "availability": level}] if level != "NONE" else []
        view["cudaVersions"] = [{"version": v, "available": level != "NONE"} for v in hosts]
    return view


def catalog_view(state: CloudState, count: int | None, cuda_versions: list[str] | None = None,
                 min_cuda: str | None = None) -> dict[str, Any]:
    return {"gpus": [gpu_type_view(o, state, count, cuda_versions, min_cuda) for o in CATALOG]}


# ---- billing ---------------------------------------------------------------------------------
#: the span a date-time can have here; windows reaching past it are clamped (the document allows
#: any RFC 3339 date-time and any lastN >= 1, so year 0001 and lastN=10**9 must not crash)
_MIN = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
_MAX = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC)
_MONTHS = {"month": 1, "year": 12}
_STEP = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1),
         "week": dt.timedelta(days=7)}


def _floor(ts: dt.datetime, bucket: str) -> dt.datetime:
    """The start of the bucket ``ts`` is in."""
    ts = ts.replace(minute=0, second=0, microsecond=0)
    if bucket == "hour":
        return ts
    ts = ts.replace(hour=0)
    if bucket == "week":
        return max(_MIN, ts - dt.timedelta(days=min(ts.weekday(), (ts - _MIN).days)))
    if bucket == "month":
        return ts.replace(day=1)
    if bucket == "year":
        return ts.replace(month=1, day=1)
    return ts


def _shift(ts: dt.datetime, bucket: str, n: int) -> dt.datetime:
    """``ts`` (a bucket start) moved by ``n`` buckets, clamped to [_MIN, _MAX]."""
    try:
        if bucket in _MONTHS:
            months = ts.year * 12 + ts.month - 1 + n * _MONTHS[bucket]
            year, month = divmod(months, 12)
            return ts.replace(year=year, month=month + 1)
        return ts + _STEP.get(bucket, _STEP["day"]) * n
    except (OverflowError, ValueError):
        return _MIN if n < 0 else _MAX


def _next(ts: dt.datetime, bucket: str) -> dt.datetime:
    return _shift(ts, bucket, 1)


def _iso(ts: dt.datetime) -> str:
    """RFC 3339 (``date-time``): a four-digit year even before 1000 (strftime's ``%Y`` drops the
    zeros on Linux: ``190-02-24`` for 0190, which the document's format refuses)."""
    return (f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T"
            f"{ts.hour:02d}:{ts.minute:02d}:{ts.second:02d}Z")


def _parse(text: str) -> dt.datetime:
    """An RFC 3339 date-time (already checked by the document's format) in UTC: lower-case
    ``t``/``z`` and a leap second (``:60``) are RFC 3339 too; offsets past year 1 or 9999 clamp."""
    text = text.upper().replace("Z", "+00:00")
    if text[17:19] == "60":
        text = text[:17] + "59" + text[19:]
    ts = dt.datetime.fromisoformat(text)
    try:
        return ts.astimezone(dt.UTC)
    except OverflowError:
        return _MIN if ts.year < 5000 else _MAX


def billing_view(state: CloudState, query: dict[str, Any]) -> dict[str, Any]:
    """``/v2/billing/pods``: one record per pod per bucket with spend in the window. The mock's
    only charge is the GPU's (no CPU or disk amounts), billed per started second."""
    bucket = query.get("bucketSize", "day")
    now = dt.datetime.now(dt.UTC)
    if "lastN" in query:
        current = _floor(now, bucket)
        end = _next(current, bucket)
        start = _shift(current, bucket, -(min(int(query["lastN"]), 10**7) - 1))
    else:
        start = _floor(_parse(query["startTime"]), bucket) if "startTime" in query else \
            _floor(now - dt.timedelta(days=30), bucket)
        end_at = _parse(query["endTime"]) if "endTime" in query else now
        end = end_at if _floor(end_at, bucket) == end_at else _next(_floor(end_at, bucket), bucket)
    records: list[dict[str, Any]] = []
    pod_id = query.get("podId")
    for pod in state.pods.values():
        if pod_id and pod.id != pod_id:
            continue
        begin = dt.datetime.fromtimestamp(pod.created_epoch, dt.UTC)
        seconds = pod.billed_seconds()
        finish = begin + dt.timedelta(seconds=seconds)
        cursor = _floor(begin, bucket)
        while cursor < finish and cursor < end:
            nxt = _next(cursor, bucket)
            lo, hi = max(begin, cursor, start), min(finish, nxt, end)
            if hi > lo:
                amount = round(pod.cost_per_hr * (hi - lo).total_seconds() / 3600.0, 8)
                records.append({"startTime": _iso(cursor), "endTime": _iso(nxt), "podId": pod.id,
                                "totalAmount": amount, "gpuAmount": amount, "cpuAmount": 0,
                                "diskAmount": 0})
            cursor = nxt
    total = round(sum(r["totalAmount"] for r in records), 8)
    return {
        "records": records,
        "metadata": {
            "query": {"startTime": _iso(start), "endTime": _iso(end), "bucketSize": bucket,
                      "podId": pod_id},
            "recordCount": len(records),
            "uniquePodCount": len({r["podId"] for r in records}),
            "totals": {"totalAmount": total, "gpuAmount": total, "cpuAmount": 0,
                       "diskAmount": 0},
        },
    }

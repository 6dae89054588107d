"""What the mock's REST v2 routes answer: a pod, the GPU catalog, pod billing — in RunPod's shapes.

Why apart from the routes: these are the mock's claims about RunPod's answers, so they are the
part the OpenAPI document checks (openapi.py); keeping them as plain functions of the state lets
a test validate them directly. Field names and required fields follow ``Pod``,
``ListGpuTypesResponse`` and ``ListPodBillingResponse`` of RunPod's document.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from tplab.mock.catalog import CATALOG, GpuOffer
from tplab.mock.state import MACHINE_CUDA, CloudState, MockPod

DATA_CENTER = {"id": "MOCK-LOOPBACK-1", "name": "Mock loopback 1"}
_ACTIONS = {"PROVISIONING": ["terminate"], "STARTING": ["terminate"],
            "RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"],
            "ERROR": ["terminate"], "TERMINATED": []}


def pod_view(state: CloudState, pod: MockPod) -> dict[str, Any]:
    """A pod as RunPod's ``Pod`` (never the pod-scoped key: the API does not show it)."""
    port = state.ssh_port(pod)
    running = pod.status == "RUNNING" and pod.runtime_since is not None
    runtime = None
    if running:
        runtime = {
            "uptime": int(time.monotonic() - (pod.runtime_since or 0.0)),
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
        "cloud": "SECURE", "dataCenterId": DATA_CENTER["id"], "cudaVersion": MACHINE_CUDA,
        "ssh": {"proxy": None, "direct": direct},
        "template": None, "cost": pod.cost_per_hr if billing else 0,
        "locked": False, "globalNetworking": {"enabled": False},
        "runtime": runtime, "createdAt": pod.created_at, "startedAt": pod.started_at,
    }


def _availability(offer: GpuOffer, count: int, state: CloudState) -> str:
    if count > offer.max_count or state.faults.no_on_demand_capacity:
        return "NONE"
    return offer.stock.upper()


def gpu_type_view(offer: GpuOffer, state: CloudState, count: int | None) -> dict[str, Any]:
    """A GPU type as RunPod's ``GpuType``; with ``count`` (include=AVAILABILITY) its stock."""
    view: dict[str, Any] = {
        "id": offer.id, "name": offer.display_name, "pool": None, "manufacturer": "NVIDIA",
        "memory": offer.memory_gb, "secure": True, "community": False,
        "price": {"secure": offer.on_demand_usd, "community": offer.on_demand_usd},
        "maxCount": {"secure": offer.max_count, "community": 0},
    }
    if count is not None:
        level = _availability(offer, count, state)
        view["availability"] = level
        view["dataCenters"] = [{**DATA_CENTER, "availability": level}] if level != "NONE" else []
        view["cudaVersions"] = [{"version": MACHINE_CUDA, "available": level != "NONE"}]
    return view


def catalog_view(state: CloudState, count: int | None) -> dict[str, Any]:
    return {"gpus": [gpu_type_view(o, state, count) for o in CATALOG]}


# ---- billing ---------------------------------------------------------------------------------
def _floor(ts: dt.datetime, bucket: str) -> dt.datetime:
    ts = ts.replace(minute=0, second=0, microsecond=0)
    if bucket == "hour":
        return ts
    ts = ts.replace(hour=0)
    if bucket == "week":
        return ts - dt.timedelta(days=ts.weekday())
    if bucket == "month":
        return ts.replace(day=1)
    if bucket == "year":
        return ts.replace(month=1, day=1)
    return ts


def _next(ts: dt.datetime, bucket: str) -> dt.datetime:
    if bucket == "hour":
        return ts + dt.timedelta(hours=1)
    if bucket == "week":
        return ts + dt.timedelta(days=7)
    if bucket == "month":
        return (ts + dt.timedelta(days=32)).replace(day=1)
    if bucket == "year":
        return ts.replace(year=ts.year + 1)
    return ts + dt.timedelta(days=1)


def _iso(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def billing_view(state: CloudState, query: dict[str, Any]) -> dict[str, Any]:
    """``/v2/billing/pods``: one record per pod per bucket with spend in the window. The mock's
    only charge is the GPU's (no CPU or disk amounts), billed per started second."""
    bucket = query.get("bucketSize", "day")
    now = dt.datetime.now(dt.UTC)
    if "lastN" in query:
        end = _next(_floor(now, bucket), bucket)
        start = end
        for _ in range(int(query["lastN"])):
            start = _floor(start - dt.timedelta(seconds=1), bucket)
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

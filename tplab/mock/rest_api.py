"""The mock's REST v1 pod routes, modelled on RunPod's ``https://rest.runpod.io/v1``.

RunPod has said ``podRentInterruptable`` (GraphQL) is going away; its REST API creates a spot pod
with ``POST /pods`` and ``"interruptible": true``. The mock serves, under ``/v1``:

- ``POST /v1/pods`` JSON ``{name, imageName, gpuTypeIds: [..], gpuCount, interruptible,
  bidPerGpu?, ports: ["22/tcp"], env: {K: V}, containerDiskInGb, cloudType, supportPublicIp}``
  -> 201 with the pod; 400 ``{"error": ...}`` when the request or capacity says no.
  Without ``bidPerGpu`` a spot pod gets the current minimum bid.
- ``GET /v1/pods`` (the account's pods), ``GET /v1/pods/{id}`` (404 when gone),
  ``DELETE /v1/pods/{id}`` (204; 404 when gone).
"""

from __future__ import annotations

from typing import Any

from tplab.mock.catalog import find_offer
from tplab.mock.state import CloudError, CloudState, MockPod


def rest_pod(state: CloudState, pod: MockPod) -> dict[str, Any]:
    runtime = state.runtime(pod)
    mappings = {str(p["privatePort"]): p["publicPort"] for p in (runtime or {}).get("ports", [])}
    return {
        "id": pod.id, "name": pod.name, "desiredStatus": pod.desired_status,
        "image": pod.image, "imageName": pod.image, "costPerHr": pod.cost_per_hr,
        "adjustedCostPerHr": pod.cost_per_hr, "interruptible": pod.interruptible,
        "gpuCount": pod.gpu_count,
        "gpu": {"id": pod.offer.id, "count": pod.gpu_count, "displayName": pod.offer.display_name},
        "machineId": pod.machine_id, "env": dict(pod.user_env),
        "ports": [p for p in pod.ports_spec.split(",") if p],
        "publicIp": "127.0.0.1" if runtime else None, "portMappings": mappings or None,
        "lastStatusChange": pod.last_status_change, "containerDiskInGb": pod.container_disk_gb,
    }


def create_from_rest(state: CloudState, body: dict[str, Any]) -> MockPod:
    if not isinstance(body, dict):
        raise CloudError("request body must be a JSON object")
    gpu_ids = body.get("gpuTypeIds") or []
    if not isinstance(gpu_ids, list) or not gpu_ids:
        raise CloudError("gpuTypeIds must be a non-empty list of GPU type ids")
    gpu_id = next((g for g in gpu_ids if find_offer(g)), gpu_ids[0])
    interruptible = bool(body.get("interruptible", False))
    bid = body.get("bidPerGpu")
    offer = find_offer(gpu_id)
    if interruptible and bid is None and offer is not None:
        bid = offer.spot_usd
    env = body.get("env") or {}
    if not isinstance(env, dict):
        raise CloudError("env must be an object of string values")
    ports = body.get("ports") or []
    return state.create_pod(
        name=str(body.get("name") or ""), image=str(body.get("imageName") or ""),
        gpu_type_id=gpu_id, gpu_count=int(body.get("gpuCount") or 1),
        interruptible=interruptible, bid_per_gpu=bid,
        env={str(k): str(v) for k, v in env.items()},
        ports=",".join(ports) if isinstance(ports, list) else str(ports),
        container_disk_gb=body.get("containerDiskInGb"),
        docker_args=" ".join(map(str, body.get("dockerStartCmd") or [])))

"""The mock's GraphQL endpoint: RunPod's schema subset (schema.graphql) executed by graphql-core.

Every request is parsed and validated against the schema before anything runs, so what RunPod
would reject (an unknown field, a missing required argument) is rejected here too, with
graphql-core's message. Root fields resolve against ``CloudState``; errors a caller causes come back
as ``errors[].message`` with the data field null, the way RunPod answers.

Pod-scoped keys (the ``RUNPOD_API_KEY`` inside a pod) may only ask ``pod``, ``podStop`` and
``podTerminate`` about their own pod; anything else gets a permission error.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import graphql

from tplab.mock.state import CloudError, CloudState, MockPod

SCHEMA_PATH = Path(__file__).with_name("schema.graphql")
POD_SCOPED_FIELDS = frozenset({"pod", "podStop", "podTerminate", "__typename"})
PERMISSION_DENIED = "Permission denied: this API key is scoped to a single pod."


@lru_cache(maxsize=1)
def schema() -> graphql.GraphQLSchema:
    return graphql.build_schema(SCHEMA_PATH.read_text())


def root_fields(document: graphql.DocumentNode) -> list[str]:
    """Root field names of the document's operations (the "call names" faults refer to)."""
    names: list[str] = []
    for definition in document.definitions:
        if isinstance(definition, graphql.OperationDefinitionNode):
            for sel in definition.selection_set.selections:
                if isinstance(sel, graphql.FieldNode):
                    names.append(sel.name.value)
    return names


def _env_list(env: Any) -> dict[str, str]:
    return {str(item["key"]): str(item["value"]) for item in (env or [])}


def pod_view(state: CloudState, pod: MockPod) -> dict[str, Any]:
    """A pod as RunPod's ``Pod`` type (never the pod-scoped key: the API does not show it)."""
    return {
        "id": pod.id, "name": pod.name, "desiredStatus": pod.desired_status,
        "imageName": pod.image, "gpuCount": pod.gpu_count, "vcpuCount": 8.0 * pod.gpu_count,
        "memoryInGb": 31.0 * pod.gpu_count, "containerDiskInGb": pod.container_disk_gb,
        "volumeInGb": 0.0, "volumeMountPath": "/workspace", "costPerHr": pod.cost_per_hr,
        "adjustedCostPerHr": pod.cost_per_hr, "machineId": pod.machine_id, "dockerArgs": pod.docker_args,
        "dockerId": None, "env": [f"{k}={v}" for k, v in pod.user_env.items()],
        "port": None, "ports": pod.ports_spec,
        "podType": "INTERRUPTABLE" if pod.interruptible else "RESERVED",
        "interruptible": pod.interruptible, "lastStatusChange": pod.last_status_change,
        "uptimeSeconds": (state.runtime(pod) or {}).get("uptimeInSeconds", 0),
        "runtime": state.runtime(pod),
        "machine": {"podHostId": f"{pod.id}-{pod.machine_id[:8]}",
                    "gpuDisplayName": pod.offer.display_name, "gpuTypeId": pod.offer.id,
                    "location": "MOCK-LOOPBACK", "secureCloud": True},
    }


class Root:
    """Root value for graphql-core: each root field is a method ``(info, **args)``."""

    def __init__(self, state: CloudState, scope: str | None) -> None:
        self.state = state
        self.scope = scope  # None: account key; else the pod id a pod-scoped key belongs to

    def _check_scope(self, pod_id: str | None = None) -> None:
        if self.scope is not None and pod_id != self.scope:
            raise CloudError(PERMISSION_DENIED)

    # ---- queries ---------------------------------------------------------------------------
    def myself(self, info: Any) -> dict[str, Any]:
        self._check_scope()
        st = self.state
        return {
            "id": st.user_id, "email": "mock@tplab.invalid", "pubKey": "",
            "clientBalance": round(st.balance(), 6), "currentSpendPerHr": st.spend_per_hr(),
            "spendLimit": 80, "networkVolumes": [],
            "pods": [pod_view(st, p) for p in st.live_pods()],
        }

    def gpuTypes(self, info: Any, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self._check_scope()
        from tplab.mock.catalog import CATALOG

        wanted: set[str] | None = None
        if input:
            wanted = set(input.get("ids") or [])
            if input.get("id"):
                wanted.add(input["id"])
        faults = self.state.faults
        out = []
        for offer in CATALOG:
            if wanted is not None and offer.id not in wanted:
                continue

            def lowest(info: Any, input: dict[str, Any] | None = None, _o=offer) -> dict[str, Any]:
                count = int((input or {}).get("gpuCount") or 1)
                fits = count <= _o.max_count
                spot = fits and not faults.no_spot_capacity
                ond = fits and not faults.no_on_demand_capacity
                return {
                    "gpuName": _o.display_name, "gpuTypeId": _o.id,
                    "minimumBidPrice": _o.spot_usd if spot else None,
                    "uninterruptablePrice": _o.on_demand_usd if ond else None,
                    "minMemory": 31, "minVcpu": 8, "rentalPercentage": 0.5,
                    "rentedCount": 10, "totalCount": 20,
                    "stockStatus": _o.stock if (spot or ond) else None,
                    "maxUnreservedGpuCount": _o.max_count if (spot or ond) else 0,
                    "availableGpuCounts": list(range(1, _o.max_count + 1)) if (spot or ond) else [],
                    "countryCode": "ZZ", "supportPublicIp": True,
                }

            out.append({
                "id": offer.id, "displayName": offer.display_name, "manufacturer": "Nvidia",
                "memoryInGb": offer.memory_gb, "cudaCores": 0, "maxGpuCount": offer.max_count,
                "secureCloud": True, "communityCloud": True,
                "securePrice": offer.on_demand_usd, "communityPrice": offer.on_demand_usd,
                "oneMonthPrice": None, "threeMonthPrice": None, "oneWeekPrice": None,
                "communitySpotPrice": offer.spot_usd, "secureSpotPrice": offer.spot_usd,
                "lowestPrice": lowest,
            })
        return out

    def pod(self, info: Any, input: dict[str, Any] | None = None) -> dict[str, Any] | None:
        pod_id = (input or {}).get("podId")
        self._check_scope(pod_id)
        pod = self.state.get_live(pod_id) if pod_id else None
        return pod_view(self.state, pod) if pod else None

    # ---- mutations -------------------------------------------------------------------------
    def _create(self, input: dict[str, Any], interruptible: bool) -> dict[str, Any]:
        self._check_scope()
        pod = self.state.create_pod(
            name=input.get("name") or "", image=input.get("imageName") or "",
            gpu_type_id=input.get("gpuTypeId"), gpu_count=int(input.get("gpuCount") or 1),
            interruptible=interruptible, bid_per_gpu=input.get("bidPerGpu"),
            env=_env_list(input.get("env")), ports=input.get("ports"),
            container_disk_gb=input.get("containerDiskInGb"), docker_args=input.get("dockerArgs"))
        return pod_view(self.state, pod)

    def podRentInterruptable(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        return self._create(input, interruptible=True)

    def podFindAndDeployOnDemand(self, info: Any, input: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._create(input or {}, interruptible=False)

    async def podTerminate(self, info: Any, input: dict[str, Any]) -> None:
        self._check_scope(input["podId"])
        await self.state.terminate_pod(input["podId"])
        return None

    async def podStop(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        self._check_scope(input["podId"])
        pod = await self.state.stop_pod(input["podId"])
        return pod_view(self.state, pod)


async def execute(state: CloudState, query: str, scope: str | None,
                  variables: dict[str, Any] | None = None,
                  operation_name: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run one request; returns (HTTP status, JSON body)."""
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError as exc:
        return 400, {"errors": [exc.formatted]}
    errors = graphql.validate(schema(), document)
    if errors:
        return 400, {"errors": [e.formatted for e in errors]}
    if scope is not None and not set(root_fields(document)) <= POD_SCOPED_FIELDS:
        return 200, {"errors": [{"message": PERMISSION_DENIED}], "data": None}
    result = graphql.execute(schema(), document, root_value=Root(state, scope),
                             variable_values=variables, operation_name=operation_name)
    if graphql.pyutils.is_awaitable(result):
        result = await result  # type: ignore[misc]
    body: dict[str, Any] = {"data": result.data}  # type: ignore[union-attr]
    if result.errors:  # type: ignore[union-attr]
        body["errors"] = [{"message": e.message, "path": e.path}
                          for e in result.errors]  # type: ignore[union-attr]
    return 200, body

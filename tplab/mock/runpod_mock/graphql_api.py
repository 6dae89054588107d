"""The mock's GraphQL endpoint: what tplab still uses of RunPod's GraphQL (schema.graphql).

Every request is parsed and validated against the schema before anything runs, so what RunPod
would reject (an unknown field or mutation, a missing required argument) is rejected here too,
with graphql-core's message. Introspection is refused, as RunPod refuses it in production
(``__schema``/``__type``: HTTP 200 with ``errors[]``, no data). Root fields resolve
against ``CloudState``; errors a caller causes come back as ``errors[].message`` with the data
field null, the way RunPod answers. With the ``spot_removed`` fault the schema has no
``podRentInterruptable`` at all.

Pod-scoped keys (the ``RUNPOD_API_KEY`` inside a pod) may only ask ``podTerminate`` about their
own pod; anything else gets a permission error.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import graphql

from tplab.mock.runpod_mock.state import CloudError, CloudState

SCHEMA_PATH = Path(__file__).with_name("schema.graphql")
SPOT_FIELD = "  podRentInterruptable(input: PodRentInterruptableInput!): Pod\n"
POD_SCOPED_FIELDS = frozenset({"podTerminate", "__typename"})
PERMISSION_DENIED = "Permission denied: this API key is scoped to a single pod."


@lru_cache(maxsize=2)
def schema(spot_removed: bool = False) -> graphql.GraphQLSchema:
    text = SCHEMA_PATH.read_text()
    if spot_removed:
        assert SPOT_FIELD in text
        text = text.replace(SPOT_FIELD, "")
    return graphql.build_schema(text)


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


class Root:
    """Root value for graphql-core: each root field is a method ``(info, **args)``."""

    def __init__(self, state: CloudState, scope: str | None) -> None:
        self.state = state
        self.scope = scope  # None: account key; else the pod id a pod-scoped key belongs to
        self.answer_500 = False  # the create_500_after_create fault: made the pod, answer 500

    def _check_scope(self, pod_id: str | None = None) -> None:
        if self.scope is not None and pod_id != self.scope:
            raise CloudError(PERMISSION_DENIED)

    # ---- queries ---------------------------------------------------------------------------
    def myself(self, info: Any) -> dict[str, Any]:
        self._check_scope()
        st = self.state
        return {"id": st.user_id, "email": "mock@tplab.invalid",
                "clientBalance": round(st.balance(), 6), "currentSpendPerHr": st.spend_per_hr(),
                "spendLimit": 80}

    def gpuTypes(self, info: Any, input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self._check_scope()
        from tplab.mock.runpod_mock.catalog import CATALOG, GpuOffer

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

            def lowest(info: Any, input: dict[str, Any] | None = None,
                       _o: GpuOffer = offer) -> dict[str, Any]:
                count = int((input or {}).get("gpuCount") or 1)
                fits = count <= _o.max_count
                spot = fits and not (faults.no_spot_capacity or faults.spot_removed)
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
                "memoryInGb": offer.memory_gb, "maxGpuCount": offer.max_count,
                "secureCloud": True, "communityCloud": False,
                "securePrice": offer.on_demand_usd, "communityPrice": offer.on_demand_usd,
                "communitySpotPrice": None if faults.spot_removed else offer.spot_usd,
                "secureSpotPrice": None if faults.spot_removed else offer.spot_usd,
                "lowestPrice": lowest,
            })
        return out

    # ---- mutations -------------------------------------------------------------------------
    def podRentInterruptable(self, info: Any, input: dict[str, Any]) -> dict[str, Any]:
        self._check_scope()
        ports = [p.strip() for p in str(input.get("ports") or "").split(",") if p.strip()]
        pod = self.state.create_pod(
            name=input.get("name") or "", image=input.get("imageName") or "",
            gpu_type_id=input.get("gpuTypeId"), gpu_count=int(input.get("gpuCount") or 1),
            interruptible=True, bid_per_gpu=input.get("bidPerGpu"),
            env=_env_list(input.get("env")), ports=ports,
            disk_gb=input.get("containerDiskInGb"), args=input.get("dockerArgs") or "",
            cloud="SECURE" if input.get("cloudType") in (None, "SECURE", "ALL") else "COMMUNITY",
            allowed_cuda=[str(v) for v in input.get("allowedCudaVersions") or []])
        if self.state.faults.take_create_500():
            self.answer_500 = True
        return {"id": pod.id, "name": pod.name, "desiredStatus": "RUNNING",
                "imageName": pod.image, "gpuCount": pod.gpu_count, "costPerHr": pod.cost_per_hr,
                "podType": "INTERRUPTABLE", "machineId": pod.machine_id}

    async def podTerminate(self, info: Any, input: dict[str, Any]) -> None:
        self._check_scope(input["podId"])
        try:
            await self.state.terminate_pod(input["podId"])
        except CloudError as exc:
            raise CloudError("Pod not found." if exc.status == 404 else str(exc)) from None
        return None


async def execute(state: CloudState, query: str, scope: str | None,
                  variables: dict[str, Any] | None = None,
                  operation_name: str | None = None) -> tuple[int, dict[str, Any] | None]:
    """Run one request; returns (HTTP status, JSON body, or None for a server error page)."""
    try:
        document = graphql.parse(query)
    except graphql.GraphQLError as exc:
        return 400, {"errors": [exc.formatted]}
    gql_schema = schema(state.faults.spot_removed)
    refused = graphql.validate(gql_schema, document,
                               [graphql.validation.NoSchemaIntrospectionCustomRule])
    if refused:   # production RunPod: introspection disabled, answered 200 with errors
        return 200, {"errors": [e.formatted for e in refused], "data": None}
    errors = graphql.validate(gql_schema, document)
    if errors:
        return 400, {"errors": [e.formatted for e in errors]}
    if scope is not None and not set(root_fields(document)) <= POD_SCOPED_FIELDS:
        return 200, {"errors": [{"message": PERMISSION_DENIED}], "data": None}
    root = Root(state, scope)
    result = graphql.execute(gql_schema, document, root_value=root,
                             variable_values=variables, operation_name=operation_name)
    done = await result if graphql.pyutils.is_awaitable(result) else result
    assert isinstance(done, graphql.ExecutionResult)
    if root.answer_500:  # the pod exists; the answer is a server error page (body None)
        return 500, None
    body: dict[str, Any] = {"data": done.data}
    if done.errors:
        body["errors"] = [{"message": e.message, "path": e.path} for e in done.errors]
    return 200, body

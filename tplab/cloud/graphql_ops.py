"""The GraphQL tplab sends to RunPod itself (what the SDK has no function for), as text builders.

The SDK's ``run_graphql_query`` sends only a query string (no variables), so values are inlined:
``gql_str`` writes a GraphQL string literal with JSON escaping, which GraphQL accepts exactly
(\\" \\\\ \\n \\uXXXX ...), so no value can break out of its literal. Field names are RunPod's;
the mock cloud validates against the same names (tplab/mock/schema.graphql).
"""

from __future__ import annotations

import json
from typing import Mapping

POD_FIELDS = """
    id
    name
    desiredStatus
    imageName
    gpuCount
    costPerHr
    podType
    lastStatusChange
    machineId
    runtime {
      uptimeInSeconds
      ports { ip isIpPublic privatePort publicPort type }
    }
    machine { gpuDisplayName }
"""

BALANCE_QUERY = "query myself { myself { id clientBalance currentSpendPerHr } }"


def gql_str(value: str) -> str:
    """A GraphQL string literal for ``value``."""
    return json.dumps(str(value), ensure_ascii=True)


def gql_num(value: float | int) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return repr(round(float(value), 6)) if isinstance(value, float) else str(value)


def gpu_quote_query(gpu_type: str, gpu_count: int) -> str:
    return f"""
query GpuTypes {{
  gpuTypes(input: {{id: {gql_str(gpu_type)}}}) {{
    id
    displayName
    maxGpuCount
    lowestPrice(input: {{gpuCount: {int(gpu_count)}}}) {{
      minimumBidPrice
      uninterruptablePrice
      stockStatus
    }}
  }}
}}"""


def pod_query(pod_id: str) -> str:
    return f"query pod {{ pod(input: {{podId: {gql_str(pod_id)}}}) {{ {POD_FIELDS} }} }}"


def env_list(env: Mapping[str, str]) -> str:
    items = ", ".join(f"{{key: {gql_str(k)}, value: {gql_str(v)}}}" for k, v in env.items())
    return f"[{items}]"


def spot_create_mutation(*, name: str, image: str, gpu_type: str, gpu_count: int,
                         bid_per_gpu: float, env: Mapping[str, str], container_disk_gb: int,
                         cloud_type: str = "SECURE", ports: str = "22/tcp") -> str:
    """``podRentInterruptable``: a spot pod. No ``dockerArgs`` (it would replace the image's start
    script and sshd would never come up); no ``terminateAfter``/``stopAfter`` (ignored by RunPod)."""
    if cloud_type not in ("ALL", "SECURE", "COMMUNITY"):
        raise ValueError(f"cloud_type must be ALL, SECURE or COMMUNITY, not {cloud_type!r}")
    fields = [
        f"bidPerGpu: {gql_num(float(bid_per_gpu))}",
        f"gpuCount: {int(gpu_count)}",
        f"cloudType: {cloud_type}",
        f"gpuTypeId: {gql_str(gpu_type)}",
        f"name: {gql_str(name)}",
        f"imageName: {gql_str(image)}",
        f"containerDiskInGb: {int(container_disk_gb)}",
        "volumeInGb: 0",
        f"ports: {gql_str(ports)}",
        "startSsh: true",
        "supportPublicIp: true",
        f"env: {env_list(env)}",
    ]
    body = ",\n      ".join(fields)
    return f"""
mutation {{
  podRentInterruptable(input: {{
      {body}
  }}) {{ {POD_FIELDS} }}
}}"""


def on_demand_create_mutation(*, name: str, image: str, gpu_type: str, gpu_count: int,
                              env: Mapping[str, str], container_disk_gb: int,
                              cloud_type: str = "SECURE", ports: str = "22/tcp") -> str:
    """``podFindAndDeployOnDemand`` with safe escaping (used when an env value would break the
    SDK's own unescaped mutation text)."""
    fields = [
        f"cloudType: {cloud_type}", f"gpuCount: {int(gpu_count)}",
        f"gpuTypeId: {gql_str(gpu_type)}", f"name: {gql_str(name)}",
        f"imageName: {gql_str(image)}", f"containerDiskInGb: {int(container_disk_gb)}",
        "volumeInGb: 0", f"ports: {gql_str(ports)}", "startSsh: true", "supportPublicIp: true",
        f"env: {env_list(env)}",
    ]
    body = ",\n      ".join(fields)
    return f"""
mutation {{
  podFindAndDeployOnDemand(input: {{
      {body}
  }}) {{ {POD_FIELDS} }}
}}"""

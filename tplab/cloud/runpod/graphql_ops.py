"""The GraphQL tplab still sends to RunPod (spot and the balance), as text builders.

Why still GraphQL: REST v2 has no spot (no bid, no interruptible pods) and no account balance;
RunPod's GraphQL API serves both until it is retired (announced for early 2027), and RunPod has
said ``podRentInterruptable`` is being removed. Everything about pods themselves (get, list,
terminate) goes through REST v2.

The SDK's ``run_graphql_query`` sends only a query string (no variables), so values are inlined:
``gql_str`` writes a GraphQL string literal with JSON escaping, which GraphQL accepts exactly
(\\" \\\\ \\n \\uXXXX ...), so no value can break out of its literal; ``bid_literal`` writes the bid
so that rounding can never put it below RunPod's minimum. Field names are RunPod's; the mock
cloud validates against the same names (tplab/mock/runpod_mock/schema.graphql).
"""

from __future__ import annotations

import json
from decimal import ROUND_CEILING, Decimal
from typing import Mapping, Sequence

SPOT_MUTATION = "podRentInterruptable"
BALANCE_QUERY = "query myself { myself { id clientBalance currentSpendPerHr } }"
#: does RunPod's schema still have the spot mutation? (asked before any money is authorized)
MUTATIONS_QUERY = 'query mutations { __type(name: "Mutation") { fields { name } } }'
#: the same question where introspection is refused: the mutation without its required input,
#: which GraphQL refuses at validation (nothing is executed) with words that say whether the
#: field exists ("Cannot query field ..." when it does not)
SPOT_PROBE = "mutation probe { podRentInterruptable { id } }"


def gql_str(value: str) -> str:
    """A GraphQL string literal for ``value``."""
    return json.dumps(str(value), ensure_ascii=True)


def bid_literal(bid: float, minimum: float) -> str:
    """The bid as a decimal literal, at most 6 decimals, never below ``minimum``: rounded up."""
    want = Decimal(repr(float(max(bid, minimum))))
    out = want.quantize(Decimal("0.000001"), rounding=ROUND_CEILING)
    while float(out) < minimum:  # float(minimum) may need more digits than 6: step up
        out += Decimal("0.000001")
    return format(out.normalize(), "f")


def spot_quote_query(gpu_type: str, gpu_count: int) -> str:
    """The spot minimum bid on the secure cloud (where the pod will be created), per GPU-hour."""
    return f"""
query SpotQuote {{
  gpuTypes(input: {{id: {gql_str(gpu_type)}}}) {{
    id
    maxGpuCount
    lowestPrice(input: {{gpuCount: {int(gpu_count)}, secureCloud: true}}) {{
      minimumBidPrice
      uninterruptablePrice
      stockStatus
    }}
  }}
}}"""


def env_list(env: Mapping[str, str]) -> str:
    items = ", ".join(f"{{key: {gql_str(k)}, value: {gql_str(v)}}}" for k, v in env.items())
    return f"[{items}]"


def spot_create_mutation(*, name: str, image: str, gpu_type: str, gpu_count: int,
                         bid: str, env: Mapping[str, str], container_disk_gb: int,
                         args: str = "", ports: str = "22/tcp",
                         allowed_cuda: Sequence[str] = ()) -> str:
    """``podRentInterruptable`` on the secure cloud at ``bid`` (a ``bid_literal``) per GPU-hour.
    ``args`` (``dockerArgs``) only when given: it replaces the image's start script;
    ``allowedCudaVersions`` only when given: the host CUDA versions that run the image."""
    Decimal(bid)  # a number, nothing else, goes into the text
    fields = [
        f"bidPerGpu: {bid}",
        f"gpuCount: {int(gpu_count)}",
        "cloudType: SECURE",
        f"gpuTypeId: {gql_str(gpu_type)}",
        f"name: {gql_str(name)}",
        f"imageName: {gql_str(image)}",
        f"containerDiskInGb: {int(container_disk_gb)}",
        "volumeInGb: 0",
        f"ports: {gql_str(ports)}",
        "supportPublicIp: true",
        f"env: {env_list(env)}",
    ]
    if args:
        fields.append(f"dockerArgs: {gql_str(args)}")
    if allowed_cuda:
        fields.append("allowedCudaVersions: [" + ", ".join(gql_str(v) for v in allowed_cuda)
                      + "]")
    body = ",\n      ".join(fields)
    return f"""
mutation {{
  {SPOT_MUTATION}(input: {{
      {body}
  }}) {{ id name desiredStatus costPerHr }}
}}"""

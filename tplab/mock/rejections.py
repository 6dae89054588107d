"""THE list of requests the mock clouds refuse although the providers' OpenAPI schemas allow them.

Why one list: a request that passes a provider's published schema can still be refused, for a
rule the document states only in prose or drops (RunPod: ``lastN`` excludes ``startTime``; Vast:
the per-endpoint input limits of vast_mock/limits.py), for a value the schema types loosely (an SSH key that is any
string, ``select_filters`` that is a JSON text), or because the mock does less than the provider
(SSH instances only). Each such refusal is written here once, with the error it answers and why;
the contract tests (tests/mock/test_contract_*.py) accept a 4xx to data the document allows
only when a rule here explains it — anything else is a failure, not silenced wholesale. The
mocks' code refers here for the same rules. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rejection:
    provider: str            # "runpod" | "vast"
    method: str              # lower case, as the document
    route: str               # the document's path template
    status: int
    pattern: str             # regex searched in the answer's detail (RunPod) or error + msg (Vast)
    why: str

    def explains(self, provider: str, method: str, route: str, status: int, text: str) -> bool:
        return (provider, method, route, status) == (self.provider, self.method, self.route,
                                                      self.status) \
            and re.search(self.pattern, text, re.DOTALL) is not None


_BILLING, _GPUS = "/v2/billing/pods", "/v2/catalog/gpus"
_ASKS, _LIST, _CHARGES = "/api/v0/asks/{id}", "/api/v1/instances", "/api/v0/charges"

RULES: tuple[Rejection, ...] = (
    # ---- RunPod: prose of the document ---------------------------------------------------
    Rejection("runpod", "get", _BILLING, 400, r"lastN is mutually exclusive",
              "lastN cannot be combined with startTime/endTime (BillingLastN's description)"),
    Rejection("runpod", "get", _GPUS, 400, r"product is required with include=AVAILABILITY",
              "product is required with include=AVAILABILITY and valid only with it "
              "(the parameters' descriptions)"),
    Rejection("runpod", "get", _GPUS, 400, r"count and cloud are valid only with include",
              "count and cloud filter availability only (their descriptions)"),
    Rejection("runpod", "get", _GPUS, 400, r"cudaVersions and minCudaVersion are mutually",
              "cudaVersions and minCudaVersion exclude each other (400 if both are sent: "
              "their descriptions)"),
    Rejection("runpod", "get", _GPUS, 400,
              r"cudaVersions and minCudaVersion are valid only with include",
              "the CUDA filters are valid only with include=AVAILABILITY (400 otherwise: their "
              "descriptions)"),
    # ---- Vast: prose of the document, loose types, the mock's limits ---------------------
    Rejection("vast", "put", _ASKS, 400, r"invalid_args.*unknown field",
              "a create field the schema does not name (Vast refuses unknown fields; the "
              "document leaves additionalProperties open)"),
    Rejection("vast", "post", "/api/v0/bundles", 400, r"invalid_args.*unknown field",
              "a search field the schema does not name"),
    Rejection("vast", "put", "/api/v0/instances/{id}", 400, r"invalid_args.*unknown field",
              "a manage field the schema does not name"),
    Rejection("vast", "post", "/api/v0/instances/{id}/ssh", 400, r"invalid_args.*unknown field",
              "an attach field the schema does not name"),
    Rejection("vast", "put", "/api/v0/instances/bid_price/{id}", 400,
              r"invalid_args.*unknown field", "a change-bid field the schema does not name"),
    Rejection("vast", "put", "/api/v0/ssh/{id}", 400, r"invalid_args.*unknown field",
              "a key-update field the schema does not name"),
    Rejection("vast", "put", _ASKS, 400,
              r"invalid_args.*Invalid args: (env|args, args_str and onstart|label is|image is)",
              "create_instance's x-input-validation, which the combined document drops "
              "(vast_mock/limits.py): env 256 characters a variable and 32,768 in all, args + "
              "args_str + onstart 4,096, label 256, image 1,024"),
    Rejection("vast", "put", "/api/v0/instances/{id}", 400, r"invalid_args.*Invalid args: label",
              "label_instance's x-input-validation: a label of at most 1,024 characters"),
    Rejection("vast", "put", _ASKS, 400, r"invalid_args.*runtype .*SSH instances only",
              "the mock runs SSH instances only (ssh, ssh_direct, ssh_direc, ssh_proxy)"),
    Rejection("vast", "put", _ASKS, 400, r"invalid_args.*env is not valid Docker flags",
              "env as a string is Docker's flags (-e K=V ...): it must parse as such"),
    Rejection("vast", "post", "/api/v0/ssh", 400, r"no_ssh_key",
              "ssh_key must be an SSH public key (the document: a string)"),
    Rejection("vast", "post", "/api/v0/instances/{id}/ssh", 400,
              r"invalid_args.*(not an SSH public key|ssh_key is required)",
              "ssh_key must be an SSH public key (the document: a string, minLength 1)"),
    Rejection("vast", "put", "/api/v0/ssh/{id}", 400,
              r"(invalid_args.*not an SSH public key|no_such_ssh_key)",
              "ssh_key must be an SSH public key; the key id must exist"),
    Rejection("vast", "delete", "/api/v0/ssh/{id}", 400, r"no_such_ssh_key",
              "the key id must exist (the document answers 400 for it, not 404)"),
    Rejection("vast", "get", _LIST, 400, r"invalid_request.*select_filters",
              "select_filters is a JSON object in a string"),
    Rejection("vast", "get", _LIST, 400, r"invalid_request.*limit must be between 1 and 25",
              "limit is 1..25 (the schema gives only the maximum)"),
    Rejection("vast", "get", _LIST, 400, r"invalid_token",
              "after_token must be one the API gave out (next_token)"),
    Rejection("vast", "get", _CHARGES, 400, r"invalid_args.*(select_filters|after_token)",
              "select_filters is a JSON object in a string; after_token one the API gave out"),
    Rejection("vast", "put", "/api/v0/instances/bid_price/{id}", 400, r"invalid_args",
              "a bid below the offer's minimum, or on an on-demand instance"),
)


def explain(provider: str, method: str, route: str, status: int, text: str) -> Rejection | None:
    """The rule that explains this refusal, or None."""
    return next((r for r in RULES if r.explains(provider, method, route, status, text)), None)

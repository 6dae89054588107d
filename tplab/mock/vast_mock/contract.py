"""Vast.ai's own OpenAPI document as the Vast mock's contract, with its known disagreements in ONE place.

The part of the document the mock serves ships beside this file as ``openapi.json``: the
routes in ``ROUTES`` with every component they reference, cut unchanged from Vast's
``api-reference/openapi.yaml`` (public repository ``vast-ai/docs``, commit c624622, 2026-08-07;
kept in this repository as ``tests/mock/documents/vast-openapi.json``) by ``extract_subset``.
Every request the mock receives (body, query, path) and every answer it sends is checked
against it (formats enforced, see ../document.py).

``EXCEPTIONS`` (departures.py, beside ``BEHAVIOURS``) is the one place where the mock departs
from the document: each entry replaces one schema of the document, in memory, with what Vast's
service and its clients really do (Vast's CLI first), and says why and where that comes from.
The contract test (tests/mock/test_contract.py) gives schemathesis the published document with
these same replacements, and nothing else is loosened. What the mock refuses beyond the
document's schemas (rules the document states in prose, loosely typed values, the mock's limits)
is listed in ../rejections.py, with RunPod's.
"""

from __future__ import annotations

import copy
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from tplab.mock import document
from tplab.mock.document import SchemaViolation
from tplab.mock.vast_mock.departures import BEHAVIOURS, EXCEPTIONS  # noqa: F401 - the contract's

SUBSET_PATH = Path(__file__).with_name("openapi.json")
DOC_URI = "urn:vast:api:openapi"
SOURCE = ("Vast.ai's OpenAPI document, api-reference/openapi.yaml in the public repository "
          "vast-ai/docs (commit c624622, 2026-08-07), as JSON; only the routes tplab's Vast mock "
          "serves and the components they reference; x-codeSamples left out")
#: the routes the mock serves (the document's spelling; the service also takes a trailing /)
ROUTES: dict[str, tuple[str, ...]] = {
    "/api/v0/bundles": ("post",),
    "/api/v0/asks/{id}": ("put",),
    "/api/v0/instances/{id}": ("get", "put", "delete"),
    "/api/v0/instances/{id}/ssh": ("post", "get"),
    "/api/v0/instances/{id}/ssh/{ssh_key_id}": ("delete",),
    "/api/v0/instances/bid_price/{id}": ("put",),
    "/api/v0/ssh": ("post", "get"),
    "/api/v0/ssh/{id}": ("put", "delete"),
    "/api/v1/instances": ("get",),
    "/api/v0/users/current": ("get",),
    "/api/v0/charges": ("get",),
}


def extract_subset(doc: Mapping[str, Any],
                   routes: Mapping[str, Iterable[str]] = ROUTES) -> dict[str, Any]:
    return document.extract_subset(doc, routes, SOURCE)


def apply_exceptions(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` (the published document or the subset) with ``EXCEPTIONS`` applied."""
    out = copy.deepcopy(doc)
    for departure in EXCEPTIONS:
        where = departure.where
        assert where is not None
        node = out
        for part in where[:-1]:
            node = node[part]
        if where[-1] not in node:
            raise KeyError(f"the document has no {'/'.join(where)}: EXCEPTIONS is out of date")
        node[where[-1]] = departure.applied(node[where[-1]])
    return out


class VastContract(document.Contract):
    """The subset, with ``EXCEPTIONS`` applied, as the mock validates against it."""

    @cached_property
    def document(self) -> dict[str, Any]:
        return apply_exceptions(super().document)

    def error_code(self, route: str, method: str) -> str:
        """The ``error`` a 400 of this route may carry for a bad request (the document fixes
        an enum on some routes)."""
        found = self.response_pointer(route, method, 400)
        if found is None:
            return "invalid_args"
        node: Any = self.document
        for part in found[0].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        if "$ref" in node:
            node = self.document["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
        enum = node.get("properties", {}).get("error", {}).get("enum")
        if not enum or "invalid_args" in enum:
            return "invalid_args"
        return "invalid_request" if "invalid_request" in enum else enum[0]

    def body_fields(self, route: str, method: str) -> set[str] | None:
        """The top-level fields the body schema names (None: no body)."""
        op = self.operation(route, method)
        if "requestBody" not in op:
            return None
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        return set(schema.get("properties", {}))


CONTRACT = VastContract(SUBSET_PATH, DOC_URI)
#: error bodies for statuses the document does not list for a route (401 on a search, 429 on
#: a read...): Vast answers them in its usual shapes, checked against these instead
ERROR_SCHEMA = {"allOf": [{"$ref": f"{DOC_URI}#/components/schemas/Error"}],
                "required": ["success", "error", "msg"]}
RATE_LIMIT_SCHEMA = {"type": "object", "required": ["detail"],
                     "properties": {"detail": {"type": "string"}}}


def check_request_body(route: str, method: str, body: Any) -> None:
    """SchemaViolation when ``body`` is not what ``method route`` accepts; unknown top-level
    fields count (rejections.py), where the route may answer invalid_args for them."""
    errors: list[str] = []
    fields = CONTRACT.body_fields(route, method)
    if fields is not None and isinstance(body, dict) \
            and CONTRACT.error_code(route, method) in ("invalid_args", "invalid_request"):
        errors += [f"{name}: unknown field" for name in sorted(set(body) - fields)]
    try:
        CONTRACT.check(CONTRACT.body_pointer(route, method), body,
                       f"{method.upper()} {route} request body")
    except SchemaViolation as exc:
        errors += exc.errors
    if errors:
        raise SchemaViolation(f"{method.upper()} {route} request body", errors)


def check_response(route: str, method: str, status: int, body: Any) -> None:
    """SchemaViolation when this answer is not one the document allows (an error status the
    route does not list is held to Vast's error shapes: ERROR_SCHEMA, RATE_LIMIT_SCHEMA)."""
    what = f"{method.upper()} {route} {status} answer"
    found = CONTRACT.response_pointer(route, method, status) \
        if CONTRACT.documents_status(route, method, status) else None
    if found is not None:
        CONTRACT.check(found[0], body, what)
        return
    if status < 400:
        raise SchemaViolation(what, [f"status {status} is not documented for this route"])
    from jsonschema import Draft202012Validator

    schema = RATE_LIMIT_SCHEMA if status == 429 else ERROR_SCHEMA
    errors = [e.message for e in Draft202012Validator(schema, registry=CONTRACT._registry)
              .iter_errors(body)]
    if errors:
        raise SchemaViolation(what, errors)

"""RunPod's own OpenAPI document (REST v2) as the mock's contract: every request and response checked.

Why: a mock written from our own guess of RunPod's API can only confirm that guess. The mock's
v2 routes are held to the document RunPod publishes instead, so a request tplab builds that
RunPod would refuse (an unknown field: 422) is refused here too, and an answer of the mock's
that RunPod's document does not allow is a mock bug that fails the test that caused it.

The part of the document the mock serves ships beside this file as ``openapi.json``:
the four routes (``/v2/pods``, ``/v2/pods/{id}``, ``/v2/catalog/gpus``, ``/v2/billing/pods``)
with every component they reference, cut from RunPod's ``api-reference-v2/openapi.json``
(public repository ``runpod/docs``, commit a900806e, 2026-08-20, "Frontdoor v2.9.0"; kept in
this repository as ``tests/mock/documents/runpod-rest-v2-openapi.json``) by ``extract_subset`` below,
with only the runnable code samples (``x-codeSamples``) left out. ``x-tplab-source`` in the file
says the same.

Validation is JSON Schema 2020-12 (the dialect of OpenAPI 3.1) by ``jsonschema``, with the
document's ``$ref``s resolved by ``referencing`` against the document itself and formats
(``date-time``...) enforced: the machinery is shared with the Vast mock (document.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from tplab.mock import document as oas
from tplab.mock.document import Parameter, SchemaViolation

__all__ = ["Parameter", "SchemaViolation", "ROUTES", "extract_subset", "document",
           "check_request_body", "response_pointer", "check_response", "query_parameters",
           "check_query"]

SUBSET_PATH = Path(__file__).with_name("openapi.json")
DOC_URI = "urn:runpod:rest-v2:openapi"
#: the routes the mock serves, with their methods
ROUTES: dict[str, tuple[str, ...]] = {
    "/v2/pods": ("get", "post"),
    "/v2/pods/{id}": ("get", "delete"),
    "/v2/catalog/gpus": ("get",),
    "/v2/billing/pods": ("get",),
}
SOURCE = ("RunPod's REST API v2 OpenAPI document, api-reference-v2/openapi.json in the public "
          "repository runpod/docs (commit a900806e, 2026-08-20, 'Frontdoor v2.9.0'); only the "
          "routes tplab's mock serves and the components they reference; x-codeSamples left out")
CONTRACT = oas.Contract(SUBSET_PATH, DOC_URI)


def extract_subset(doc: Mapping[str, Any],
                   routes: Mapping[str, Iterable[str]] = ROUTES) -> dict[str, Any]:
    """The document cut down to ``routes`` and the components they reference (transitively)."""
    return oas.extract_subset(doc, routes, SOURCE)


def document() -> dict[str, Any]:
    return CONTRACT.document


def check_request_body(route: str, method: str, body: Any) -> None:
    """Raise SchemaViolation when ``body`` is not what ``method route`` accepts."""
    CONTRACT.check(CONTRACT.body_pointer(route, method), body,
                   f"{method.upper()} {route} request body")


def response_pointer(route: str, method: str, status: int) -> tuple[str, str] | None:
    """(pointer to the schema, media type) for this answer, or None when it has no body."""
    return CONTRACT.response_pointer(route, method, status)


def check_response(route: str, method: str, status: int, body: Any) -> str:
    """Raise SchemaViolation when this answer is not one the document allows; returns the
    media type it must be sent with (``application/json`` or ``application/problem+json``)."""
    if not CONTRACT.documents_status(route, method, status):
        raise SchemaViolation(f"{method.upper()} {route} answer", [f"status {status} is not "
                                                                   "documented"])
    found = response_pointer(route, method, status)
    if found is None:
        if body is not None:
            raise SchemaViolation(f"{method.upper()} {route} {status} answer",
                                  ["the document says this answer has no body"])
        return ""
    where, media = found
    CONTRACT.check(where, body, f"{method.upper()} {route} {status} answer")
    return media


def query_parameters(route: str, method: str) -> dict[str, Parameter]:
    """The query parameters ``method route`` declares (references resolved)."""
    return CONTRACT.parameters(route, method, "query")


def check_query(route: str, method: str, query: Mapping[str, str]) -> dict[str, Any]:
    """The query parameters, typed, or SchemaViolation (unknown or ill-typed parameters)."""
    return CONTRACT.check_values(route, method, "query", query)

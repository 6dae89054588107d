"""RunPod's own OpenAPI document (REST v2) as the mock's contract: every request and response checked.

Why: a mock written from our own guess of RunPod's API can only confirm that guess. The mock's
v2 routes are held to the document RunPod publishes instead, so a request tplab builds that
RunPod would refuse (an unknown field: 422) is refused here too, and an answer of the mock's
that RunPod's document does not allow is a mock bug that fails the test that caused it.

The part of the document the mock serves ships beside this file as ``runpod_v2_openapi.json``:
the four routes (``/v2/pods``, ``/v2/pods/{id}``, ``/v2/catalog/gpus``, ``/v2/billing/pods``)
with every component they reference, cut from RunPod's ``api-reference-v2/openapi.json``
(public repository ``runpod/docs``, commit a900806e, 2026-08-20, "Frontdoor v2.9.0"; kept in
this project as ``shared/reference/runpod-rest-v2-openapi.json``) by ``extract_subset`` below,
with only the runnable code samples (``x-codeSamples``) left out. ``x-tplab-source`` in the file
says the same.

Validation is JSON Schema 2020-12 (the dialect of OpenAPI 3.1) by ``jsonschema``, with the
document's ``$ref``s resolved by ``referencing`` against the document itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

SUBSET_PATH = Path(__file__).with_name("runpod_v2_openapi.json")
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


class SchemaViolation(ValueError):
    """A request or response does not match RunPod's document; ``errors`` lists each violation."""

    def __init__(self, what: str, errors: list[str]) -> None:
        super().__init__(f"{what}: " + "; ".join(errors))
        self.what = what
        self.errors = errors


# ---- cutting the subset ----------------------------------------------------------------------
def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _strip_samples(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_samples(v) for k, v in node.items() if k != "x-codeSamples"}
    if isinstance(node, list):
        return [_strip_samples(v) for v in node]
    return node


def extract_subset(doc: Mapping[str, Any],
                   routes: Mapping[str, Iterable[str]] = ROUTES) -> dict[str, Any]:
    """The document cut down to ``routes`` and the components they reference (transitively)."""
    paths: dict[str, Any] = {}
    for path, methods in routes.items():
        item = doc["paths"][path]
        keep = {m: item[m] for m in methods}
        if "parameters" in item:
            keep["parameters"] = item["parameters"]
        paths[path] = _strip_samples(keep)
    components: dict[str, dict[str, Any]] = {}
    todo = list(_refs(paths))
    seen: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in seen or not ref.startswith("#/components/"):
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = _strip_samples(doc["components"][kind][name])
        components.setdefault(kind, {})[name] = target
        todo.extend(_refs(target))
    components["securitySchemes"] = doc["components"]["securitySchemes"]
    return {
        "openapi": doc["openapi"], "info": doc["info"], "servers": doc.get("servers", []),
        "security": doc.get("security", []), "x-tplab-source": SOURCE,
        "paths": paths,
        "components": {k: dict(sorted(v.items())) for k, v in sorted(components.items())},
    }


# ---- validating ------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    return json.loads(SUBSET_PATH.read_text())


@lru_cache(maxsize=1)
def _registry() -> Any:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resource(DOC_URI, DRAFT202012.create_resource(document()))


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


@lru_cache(maxsize=64)
def _validator(pointer: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator({"$ref": f"{DOC_URI}#/{pointer}"}, registry=_registry())


def _check(pointer: str, value: Any, what: str) -> None:
    errors = sorted(_validator(pointer).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        raise SchemaViolation(what, [_describe(e) for e in errors])


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(body)"
    return f"{where}: {error.message}"


def check_request_body(route: str, method: str, body: Any) -> None:
    """Raise SchemaViolation when ``body`` is not what ``method route`` accepts."""
    _check(_pointer("paths", route, method, "requestBody", "content", "application/json",
                    "schema"), body, f"{method.upper()} {route} request body")


def response_pointer(route: str, method: str, status: int) -> tuple[str, str] | None:
    """(pointer to the schema, media type) for this answer, or None when it has no body."""
    op = document()["paths"][route][method]
    responses = op["responses"]
    key = str(status) if str(status) in responses else "default"
    resp = responses.get(key)
    if resp is None:
        return None
    parts = ["paths", route, method, "responses", key]
    if "$ref" in resp:
        name = resp["$ref"].rsplit("/", 1)[1]
        parts = ["components", "responses", name]
        resp = document()["components"]["responses"][name]
    content = resp.get("content")
    if not content:
        return None
    media = next(iter(content))
    return _pointer(*parts, "content", media, "schema"), media


def check_response(route: str, method: str, status: int, body: Any) -> str:
    """Raise SchemaViolation when this answer is not one the document allows; returns the
    media type it must be sent with (``application/json`` or ``application/problem+json``)."""
    documented = document()["paths"][route][method]["responses"]
    if str(status) not in documented and "default" not in documented:
        raise SchemaViolation(f"{method.upper()} {route} answer", [f"status {status} is not "
                                                                   "documented"])
    found = response_pointer(route, method, status)
    if found is None:
        if body is not None:
            raise SchemaViolation(f"{method.upper()} {route} {status} answer",
                                  ["the document says this answer has no body"])
        return ""
    pointer, media = found
    _check(pointer, body, f"{method.upper()} {route} {status} answer")
    return media


@dataclass(frozen=True)
class Parameter:
    name: str
    schema: dict[str, Any]
    required: bool
    pointer: str            # to its schema in the document


def query_parameters(route: str, method: str) -> dict[str, Parameter]:
    """The query parameters ``method route`` declares (references resolved)."""
    doc = document()
    out: dict[str, Parameter] = {}
    for i, p in enumerate(doc["paths"][route][method].get("parameters", [])):
        where = _pointer("paths", route, method, "parameters", str(i), "schema")
        if "$ref" in p:
            name = p["$ref"].rsplit("/", 1)[1]
            p = doc["components"]["parameters"][name]
            where = _pointer("components", "parameters", name, "schema")
        if p.get("in") == "query":
            out[p["name"]] = Parameter(p["name"], p.get("schema", {}), bool(p.get("required")),
                                       where)
    return out


def _coerce(text: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "array":
        return [_coerce(part, schema.get("items", {})) for part in text.split(",") if part]
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    return text


def check_query(route: str, method: str, query: Mapping[str, str]) -> dict[str, Any]:
    """The query parameters, typed, or SchemaViolation (unknown or ill-typed parameters)."""
    declared = query_parameters(route, method)
    errors = [f"unknown query parameter {name!r}" for name in query if name not in declared]
    values: dict[str, Any] = {}
    for name, param in declared.items():
        if name not in query:
            if param.required:
                errors.append(f"query parameter {name!r} is required")
            continue
        value = _coerce(query[name], param.schema)
        errors += [f"{name}: {e.message}" for e in _validator(param.pointer).iter_errors(value)]
        values[name] = value
    if errors:
        raise SchemaViolation(f"{method.upper()} {route} query", errors)
    return values

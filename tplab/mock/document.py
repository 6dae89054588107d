"""A provider's published OpenAPI document as a mock cloud's contract: cut, resolve, validate.

Why one module for both mock clouds: RunPod's mock (runpod_mock/contract.py) and Vast's (vast_mock/contract.py)
hold what they receive and what they answer to the provider's own document in the same way, so
the machinery lives here once: cutting the document down to the routes a mock serves (with every
component they reference), resolving ``$ref``s against the document itself (``referencing``),
and validating with JSON Schema 2020-12 (the dialect of OpenAPI 3.1) **with formats enforced**
(``date-time``, ``uri``, ``email``... through jsonschema's format checker; formats it does not
know, such as ``float`` or ``int64``, are annotations only), so an answer that breaks a declared
format fails at the source, not only under an outside contract tester.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping


class SchemaViolation(ValueError):
    """A request or response does not match the document; ``errors`` lists each violation."""

    def __init__(self, what: str, errors: list[str]) -> None:
        super().__init__(f"{what}: " + "; ".join(errors))
        self.what = what
        self.errors = errors


@dataclass(frozen=True)
class Parameter:
    name: str
    schema: dict[str, Any]
    required: bool
    pointer: str            # to its schema in the document


# ---- cutting a subset ------------------------------------------------------------------------
def refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def strip_samples(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_samples(v) for k, v in node.items() if k != "x-codeSamples"}
    if isinstance(node, list):
        return [strip_samples(v) for v in node]
    return node


def extract_subset(doc: Mapping[str, Any], routes: Mapping[str, Iterable[str]],
                   source: str) -> dict[str, Any]:
    """The document cut down to ``routes`` and the components they reference (transitively)."""
    paths: dict[str, Any] = {}
    for path, methods in routes.items():
        item = doc["paths"][path]
        keep = {m: item[m] for m in methods}
        if "parameters" in item:
            keep["parameters"] = item["parameters"]
        paths[path] = strip_samples(keep)
    components: dict[str, dict[str, Any]] = {}
    todo = list(refs(paths))
    seen: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in seen or not ref.startswith("#/components/"):
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = strip_samples(doc["components"][kind][name])
        components.setdefault(kind, {})[name] = target
        todo.extend(refs(target))
    components["securitySchemes"] = doc["components"]["securitySchemes"]
    return {
        "openapi": doc["openapi"], "info": doc["info"], "servers": doc.get("servers", []),
        "security": doc.get("security", []), "x-tplab-source": source,
        "paths": paths,
        "components": {k: dict(sorted(v.items())) for k, v in sorted(components.items())},
    }


def pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(body)"
    return f"{where}: {error.message}"


def coerce(text: str, schema: dict[str, Any]) -> Any:
    """A query string value typed as its schema says (left as text when it is not that type)."""
    kind = schema.get("type")
    if kind == "array":
        return [coerce(part, schema.get("items", {})) for part in text.split(",") if part]
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    return text


class Contract:
    """One provider's document (the subset a mock serves), loaded lazily from ``path``."""

    def __init__(self, path: Path, uri: str) -> None:
        self.path = path
        self.uri = uri

    @cached_property
    def document(self) -> dict[str, Any]:
        return json.loads(self.path.read_text())

    @cached_property
    def _registry(self) -> Any:
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        return Registry().with_resource(self.uri, DRAFT202012.create_resource(self.document))

    @lru_cache(maxsize=256)  # noqa: B019 - one Contract per document, alive for the process
    def validator(self, where: str) -> Any:
        from jsonschema import Draft202012Validator

        return Draft202012Validator({"$ref": f"{self.uri}#/{where}"}, registry=self._registry,
                                    format_checker=Draft202012Validator.FORMAT_CHECKER)

    def check(self, where: str, value: Any, what: str) -> None:
        errors = sorted(self.validator(where).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            raise SchemaViolation(what, [_describe(e) for e in errors])

    def operation(self, route: str, method: str) -> dict[str, Any]:
        return self.document["paths"][route][method]

    def body_pointer(self, route: str, method: str) -> str:
        return pointer("paths", route, method, "requestBody", "content", "application/json",
                       "schema")

    def response_pointer(self, route: str, method: str,
                         status: int) -> tuple[str, str] | None:
        """(pointer to the schema, media type) for this answer, or None when it has no body
        (or the document does not list the status)."""
        responses = self.operation(route, method)["responses"]
        key = str(status) if str(status) in responses else "default"
        resp = responses.get(key)
        if resp is None:
            return None
        parts = ["paths", route, method, "responses", key]
        if "$ref" in resp:
            name = resp["$ref"].rsplit("/", 1)[1]
            parts = ["components", "responses", name]
            resp = self.document["components"]["responses"][name]
        content = resp.get("content")
        if not content:
            return None
        media = next(iter(content))
        return pointer(*parts, "content", media, "schema"), media

    def documents_status(self, route: str, method: str, status: int) -> bool:
        responses = self.operation(route, method)["responses"]
        return str(status) in responses or "default" in responses

    def parameters(self, route: str, method: str, where: str) -> dict[str, Parameter]:
        """The parameters ``method route`` declares ``in`` ``where`` (query, path, header)."""
        doc = self.document
        declared = list(doc["paths"][route].get("parameters", []))
        declared += self.operation(route, method).get("parameters", [])
        out: dict[str, Parameter] = {}
        for i, p in enumerate(declared):
            own = i - len(doc["paths"][route].get("parameters", []))
            loc = (pointer("paths", route, method, "parameters", str(own), "schema") if own >= 0
                   else pointer("paths", route, "parameters", str(i), "schema"))
            if "$ref" in p:
                name = p["$ref"].rsplit("/", 1)[1]
                p = doc["components"]["parameters"][name]
                loc = pointer("components", "parameters", name, "schema")
            if p.get("in") == where:
                out[p["name"]] = Parameter(p["name"], p.get("schema", {}),
                                           bool(p.get("required")), loc)
        return out

    def check_values(self, route: str, method: str, where: str, given: Mapping[str, str],
                     *, unknown_allowed: bool = False) -> dict[str, Any]:
        """The parameters ``in`` ``where``, typed, or SchemaViolation (unknown, missing or
        ill-typed ones)."""
        declared = self.parameters(route, method, where)
        errors = [] if unknown_allowed else [
            f"unknown {where} parameter {name!r}" for name in given if name not in declared]
        values: dict[str, Any] = {}
        for name, param in declared.items():
            if name not in given:
                if param.required:
                    errors.append(f"{where} parameter {name!r} is required")
                continue
            value = coerce(given[name], param.schema)
            errors += [f"{name}: {e.message}" for e in self.validator(param.pointer)
                       .iter_errors(value)]
            values[name] = value
        if errors:
            raise SchemaViolation(f"{method.upper()} {route} {where}", errors)
        return values

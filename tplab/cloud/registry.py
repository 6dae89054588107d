"""Which clouds tplab knows, by name: the one place a provider is registered.

Why a registry: the lab, ``tplab check/status/terminate`` and the dashboard ask for a provider
by the name the user gave (``--provider runpod|vast|auto``) and never import a cloud's package
themselves. Each package under ``tplab/cloud/`` describes itself in its ``__init__`` (``NAME``,
``LABEL``, ``GONE_ROUTES``, ``find_key``, ``NO_KEY``, ``API_URL_VAR``, ``make``, ``MOCK``,
``start_mock``) without importing
anything heavy, so ``tplab --help`` stays fast. Adding a cloud: one folder, one line below, its
mock.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Mapping

from tplab.cloud.base import AuthError, Provider, ProviderError

#: name -> the package that holds everything that cloud needs on the client side
PROVIDERS: dict[str, str] = {
    "runpod": "tplab.cloud.runpod",
    "vast": "tplab.cloud.vast",
}
#: the cloud of a mock lab, and of any call that names none
DEFAULT = "runpod"
AUTO = "auto"
CHOICES = (*PROVIDERS, AUTO)
#: the clouds named to a user who has no key at all, in this order: Vast.ai first, where
#: interruptible GPUs are rented today (RunPod's spot pods were to end on 2026-09-11)
FIRST_KEY_ORDER = ("vast", "runpod")


def no_key_at_all() -> str:
    """The one sentence for a user with no cloud key at all: each cloud's key and what it
    rents, Vast.ai first (``FIRST_KEY_ORDER``)."""
    hints = "; ".join(str(package(n).KEY_HINT) for n in FIRST_KEY_ORDER)
    return (f"No cloud API key found: {hints} (`tplab check` then says what a lab would get; "
            "--mock runs against the local mock clouds).")


class UnknownProviderError(ProviderError):
    """A provider name tplab does not know."""


def package(name: str) -> ModuleType:
    """The package of cloud ``name``; an unknown name is one sentence."""
    module = PROVIDERS.get((name or "").strip().lower())
    if module is None:
        raise UnknownProviderError(
            f"There is no provider named {name!r}; use one of: {', '.join(CHOICES)}.")
    return importlib.import_module(module)


def label(name: str) -> str:
    """What artifacts and the dashboard call cloud ``name`` ("RunPod", "Vast.ai")."""
    try:
        return str(package(name).LABEL)
    except ProviderError:
        return name


def gone_routes(name: str | None) -> list[str]:
    """The API routes whose answers tell that cloud's pod is gone (``{pod_id}`` as written)."""
    try:
        return list(package(str(name or "")).GONE_ROUTES)
    except ProviderError:
        return [f"{name or 'the provider'}'s verify_gone"]


def provider_for(name: str, api_key: str | None = None, api_url: str | None = None,
                 **options: Any) -> Provider:
    """The provider of cloud ``name`` with this key (else the one its user keeps, its source
    named in every refusal: ``key_source``), pointed at ``api_url`` (the cloud itself when
    None)."""
    pkg = package(name)
    key = api_key
    if not key:
        found = pkg.find_key()
        if found is None:
            raise AuthError(pkg.NO_KEY)
        key = found.key
        options.setdefault("key_source", found.source)
    return pkg.make(key, api_url.rstrip("/") if api_url else None, **options)


def configured(environ: Mapping[str, str] | None = None) -> list[str]:
    """The clouds the user has a key for, in registry order."""
    out = []
    for name in PROVIDERS:
        try:
            if package(name).find_key(environ) is not None:
                out.append(name)
        except ProviderError:
            continue
    return out


def resolve(name: str | None, mock: bool = False,
            environ: Mapping[str, str] | None = None) -> str:
    """The name a lab runs with when none was given: in mock mode RunPod's mock;
    else the one cloud that has a key, or ``auto`` when several have one or none has (``auto``
    then says which keys are missing: ``no_key_at_all``). A given name is checked and kept."""
    if name:
        name = name.strip().lower()
        if name != AUTO:
            package(name)
        return name
    if mock:
        return DEFAULT
    keys = configured(environ)
    return keys[0] if len(keys) == 1 else AUTO

"""Where a Lab gets its Provider: a real cloud, a running mock, or a mock started for it.

Why apart from the orchestrator: the Lab talks only to the Provider protocol; choosing and building
the provider (by name, through ``tplab.cloud.registry``) and, in ``--mock`` mode, starting and
stopping that cloud's local mock around the lab is wiring, kept out of the state machine. No
cloud's package is imported until it is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any, AsyncIterator

from tplab.cloud import registry
from tplab.cloud.base import AuthError, Provider, ProviderError
from tplab.lab.lab_config import LabConfig
from tplab.lab.options import api_url_problem


#: what a refusal calls the key of a mock cloud started for the lab (or found running here)
MOCK_KEY = "the mock cloud's own key"


def provider_for(api_key: str, api_url: str | None, name: str | None = None,
                 key_source: str = "") -> Provider:
    """Cloud ``name``'s provider with this key (``key_source``: where it was found, named when
    the cloud refuses it), pointed at ``api_url`` (the cloud itself when None)."""
    return registry.provider_for(name or registry.DEFAULT, api_key, api_url,
                                 key_source=key_source)


def real_api_url(api_url: str | None, name: str | None = None) -> str | None:
    """The URL a real lab's key goes to (``--api-url``, else the cloud's URL variable, else the
    cloud's own); refused unless https (options.api_url_problem)."""
    url = api_url or os.environ.get(registry.package(name or registry.DEFAULT).API_URL_VAR) \
        or None
    problem = api_url_problem(False, url)
    if problem:
        raise ProviderError(problem)
    return url


def real_provider(api_url: str | None = None, name: str | None = None) -> Provider:
    """Cloud ``name``'s provider for a real lab (the key where its user keeps it; never
    logged)."""
    name = name or registry.DEFAULT
    pkg = registry.package(name)
    url = real_api_url(api_url, name)
    found = pkg.find_key()
    if found is None:
        raise AuthError(pkg.NO_KEY + " Or use --mock to run against the local mock cloud.")
    return registry.provider_for(name, found.key, url, key_source=found.source)


def _mock_key(name: str | None) -> str:
    from tplab.keys.redact import register_secret
    var = registry.package(name or registry.DEFAULT).KEY_VAR
    key = os.environ.get(var, "").strip()
    if not key:
        raise AuthError(f"--api-url needs that cloud's API key in {var}.")
    register_secret(key)
    return key


def mock_options(config: LabConfig, name: str) -> dict[str, Any]:
    """The mock options for cloud ``name``: ``mock_options[name]`` when the options are given per
    cloud (``{<name>: {...}, ...}``, as ``--provider auto`` tests do), else all."""
    opts = config.mock_options or {}
    chosen = dict(opts.get(name) or {}) if any(key in registry.PROVIDERS for key in opts) \
        else dict(opts)
    if config.pod_python:
        chosen.setdefault("pod_python", config.pod_python)
    return chosen


@contextlib.asynccontextmanager
async def mock_session(config: LabConfig) -> AsyncIterator[Provider]:
    """A provider on the mock of the lab's cloud: ``config.api_url`` if one runs already, else
    one started here (with ``config.mock_options``) and stopped — every pod with it — on the
    way out."""
    name = config.provider_name()
    if config.api_url:
        yield provider_for(_mock_key(name), config.api_url, name,
                           registry.package(name).KEY_VAR)
        return
    pkg = registry.package(name)
    cloud = await asyncio.to_thread(pkg.start_mock, **mock_options(config, name))
    from tplab.keys.redact import register_secret
    register_secret(cloud.api_key)
    try:
        yield provider_for(cloud.api_key, cloud.api_url, name, MOCK_KEY)
    finally:
        await asyncio.to_thread(cloud.stop)


def cli_provider(mock: bool, api_url: str | None, name: str | None = None) -> Provider | None:
    """The provider `tplab status` / `tplab terminate` talk to; None in mock mode with no mock
    running (mock pods live only as long as their mock cloud)."""
    if mock and not api_url:
        return None
    if name == registry.AUTO:  # the first cloud with a key (a mock: RunPod's)
        configured = registry.configured()
        name = None if mock or not configured else configured[0]
    if mock:
        return provider_for(_mock_key(name), api_url, name,
                            registry.package(name or registry.DEFAULT).KEY_VAR)
    return real_provider(api_url, name)

"""Where a Lab gets its Provider: the real RunPod API, a running mock, or a mock started for it.

Why apart from the orchestrator: the Lab talks only to the Provider protocol; choosing and building
the provider (and, in ``--mock`` mode, starting and stopping the local mock cloud around the
lab) is wiring, kept out of the state machine. The runpod SDK is imported only when used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
from typing import AsyncIterator

from tplab.cloud.base import AuthError, Provider, ProviderError
from tplab.lab.lab_config import LabConfig
from tplab.lab.options import api_url_problem


def provider_for(api_key: str, api_url: str | None) -> Provider:
    """The RunPod provider with this key, pointed at ``api_url`` (RunPod itself when None)."""
    from tplab.cloud.runpod_provider import RunPodProvider
    return RunPodProvider(api_key=api_key, api_base_url=api_url.rstrip("/") if api_url else None)


def real_api_url(api_url: str | None) -> str | None:
    """The URL a real lab's key goes to (``--api-url``, else ``RUNPOD_API_BASE_URL``, else
    RunPod's own); refused unless https (options.api_url_problem)."""
    url = api_url or os.environ.get("RUNPOD_API_BASE_URL") or None
    problem = api_url_problem(False, url)
    if problem:
        raise ProviderError(problem)
    return url


def real_provider(api_url: str | None = None) -> Provider:
    """The RunPod provider for a real lab (key from RUNPOD_API_KEY or ~/.runpod; never logged)."""
    from tplab.cloud.keys import NO_KEY, load_api_key
    url = real_api_url(api_url)
    key = load_api_key()
    if not key:
        raise AuthError(NO_KEY + " Or use --mock to run against the local mock cloud.")
    return provider_for(key, url)


def _mock_key() -> str:
    from tplab.home.redact import register_secret
    key = os.environ.get("RUNPOD_API_KEY", "").strip()
    if not key:
        raise AuthError("--api-url needs that cloud's API key in RUNPOD_API_KEY.")
    register_secret(key)
    return key


@contextlib.asynccontextmanager
async def mock_session(config: LabConfig) -> AsyncIterator[Provider]:
    """A provider on the mock cloud: ``config.api_url`` if one runs already, else one started
    here (with ``config.mock_options``) and stopped — every pod with it — on the way out."""
    if config.api_url:
        yield provider_for(_mock_key(), config.api_url)
        return
    from tplab.mock.handle import start_mock_cloud
    # the mock starts in a subprocess; import the runpod SDK (about 1.5 s) meanwhile
    sdk = asyncio.create_task(asyncio.to_thread(importlib.import_module, "runpod"))
    cloud = await asyncio.to_thread(start_mock_cloud, **config.mock_options)
    with contextlib.suppress(Exception):
        await sdk
    from tplab.home.redact import register_secret
    register_secret(cloud.api_key)
    try:
        yield provider_for(cloud.api_key, cloud.api_url)
    finally:
        await asyncio.to_thread(cloud.stop)


def cli_provider(mock: bool, api_url: str | None) -> Provider | None:
    """The provider `tplab status` / `tplab terminate` talk to; None in mock mode with no mock
    running (mock pods live only as long as their mock cloud)."""
    if mock and not api_url:
        return None
    if mock:
        return provider_for(_mock_key(), api_url)
    return real_provider(api_url)

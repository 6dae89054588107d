"""Vast.ai, everything tplab needs of it on the client side: its REST API called directly
(``http_api``), its shapes (``shapes``: offers, the create body, an instance as tplab's record),
the key (``api_key``), how its instances end themselves (``self_end``) and the provider
(``provider``): interruptible instances by bid. This module only describes the cloud to
``tplab.cloud.registry``; nothing heavy is imported until a provider is made.
"""

from __future__ import annotations

from typing import Any, Mapping

NAME = "vast"
LABEL = "Vast.ai"
#: the API routes whose answers ``verify_gone`` reads: the proof picture names them
GONE_ROUTES = ("GET /api/v0/instances/{pod_id}  (the instance's own record: none, or its state)",
               "GET /api/v1/instances  (tplab's instances: is it still listed?)")
#: the variable a user (or a mock) sets to send the provider to another API URL
#: the package of this cloud's local mock (``tplab.mock.clouds``)
MOCK = "tplab.mock.vast_mock"
API_URL_VAR = "VAST_API_BASE_URL"
#: the variable that holds the key (for the real cloud, and for an already running mock)
KEY_VAR = "VAST_API_KEY"
from tplab.cloud.vast.api_key import KEY_HINT, NO_KEY  # noqa: E402,F401 - said once, in keys


def find_key(environ: Mapping[str, str] | None = None) -> Any:
    from tplab.cloud.vast.api_key import find_api_key
    return find_api_key(environ)


def make(api_key: str, api_url: str | None = None, **options: Any) -> Any:
    from tplab.cloud.vast.provider import VastProvider
    return VastProvider(api_key=api_key, api_base_url=api_url, **options)


def start_mock(**options: Any) -> Any:
    """The local mock of Vast.ai (``tplab.mock``), started for one lab."""
    from tplab.mock.handle import start_mock_cloud
    return start_mock_cloud(provider="vast", **options)

"""RunPod, everything tplab needs of it on the client side: REST v2 for pods (``http_api``,
``shapes``), GraphQL for spot and the balance while RunPod serves them (``sdk``, ``spot``,
``graphql_ops``), the key (``api_key``), how its pods end themselves (``self_end``) and the
provider (``provider``). This module only describes the cloud to ``tplab.cloud.registry``;
nothing heavy is imported until a provider is made.
"""

from __future__ import annotations

from typing import Any, Mapping

NAME = "runpod"
LABEL = "RunPod"
#: the API routes whose answers ``verify_gone`` reads: the proof picture names them
GONE_ROUTES = ("GET /v2/pods/{pod_id}  (the pod's own record: 404 or TERMINATED)",
               "GET /v2/pods  (tplab's pods: is it still listed?)")
#: the variable a user (or a mock) sets to send the provider to another API URL
#: the package of this cloud's local mock (``tplab.mock.clouds``)
MOCK = "tplab.mock.runpod_mock"
API_URL_VAR = "RUNPOD_API_BASE_URL"
#: the variable that holds the key for an already running mock (``--api-url``)
KEY_VAR = "RUNPOD_API_KEY"
from tplab.cloud.runpod.api_key import KEY_HINT, NO_KEY  # noqa: E402,F401 - said once


def find_key(environ: Mapping[str, str] | None = None) -> Any:
    from tplab.cloud.runpod.api_key import find_api_key
    return find_api_key(environ)


def make(api_key: str, api_url: str | None = None, **options: Any) -> Any:
    from tplab.cloud.runpod.provider import RunPodProvider
    return RunPodProvider(api_key=api_key, api_base_url=api_url, **options)


def start_mock(**options: Any) -> Any:
    """The local mock of RunPod (``tplab.mock``), started for one lab."""
    from tplab.mock.handle import start_mock_cloud
    return start_mock_cloud(**options)

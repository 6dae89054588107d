"""RunPod's REST v1 pod creation (``POST /pods`` with ``"interruptible": true``).

Why: RunPod has said the GraphQL ``podRentInterruptable`` mutation is going away; REST v1 is its
successor. The provider can create through either (``creation_api="graphql"|"rest"``); everything
else (status with ``runtime.ports``, terminate, balance) stays on GraphQL, which REST does not
replace for those fields. Base URL: ``rest_base_url``, else ``$RUNPOD_REST_BASE_URL``, else
``<api_base_url>/v1`` when a non-default API URL is set (the mock), else ``https://rest.runpod.io/v1``.
``requests`` (a runpod dependency) is imported lazily. REST v1 takes no bid: a spot pod created
this way runs at RunPod's current spot price (the provider still refuses when the quote shows no
spot offer).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from tplab.cloud.base import AuthError, ProviderError, TransientError
from tplab.cloud.sdk import AUTH_FAILED, DEFAULT_API_BASE_URL, ApiError
from tplab.redact import redact, register_secret

DEFAULT_REST_BASE_URL = "https://rest.runpod.io/v1"


def rest_base_for(api_base_url: str | None, rest_base_url: str | None = None) -> str:
    if rest_base_url:
        return rest_base_url.rstrip("/")
    if os.environ.get("RUNPOD_REST_BASE_URL"):
        return os.environ["RUNPOD_REST_BASE_URL"].rstrip("/")
    if api_base_url and api_base_url.rstrip("/") != DEFAULT_API_BASE_URL:
        return api_base_url.rstrip("/") + "/v1"
    return DEFAULT_REST_BASE_URL


class RunPodRest:
    def __init__(self, api_key: str, base_url: str, timeout_s: float = 30.0) -> None:
        self._key = api_key
        register_secret(api_key)
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"RunPodRest({self.base_url!r})"

    def _request(self, what: str, method: str, path: str, body: Any = None) -> Any:
        import requests

        try:
            resp = requests.request(method, self.base_url + path, json=body,
                                    timeout=self.timeout_s,
                                    headers={"Authorization": f"Bearer {self._key}"})
        except requests.exceptions.Timeout:
            raise TransientError(f"RunPod's REST API did not answer in time while {what}; "
                                 "try again.") from None
        except requests.exceptions.RequestException as exc:
            raise TransientError(f"Could not reach RunPod's REST API at {self.base_url} while "
                                 f"{what} ({type(exc).__name__}); check the network.") from None
        if resp.status_code == 401:
            raise AuthError(AUTH_FAILED)
        if resp.status_code >= 500:
            raise TransientError(f"RunPod's REST API failed while {what} (HTTP "
                                 f"{resp.status_code}); try again in a minute.")
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            data = resp.json()
        except ValueError:
            raise TransientError(f"RunPod's REST API answered {what} with something that is not "
                                 f"JSON (HTTP {resp.status_code}); try again.") from None
        if resp.status_code >= 400:
            msg = data.get("error") if isinstance(data, dict) else None
            msg = redact(" ".join(str(msg or data).split()), [self._key])
            raise ApiError(f"RunPod returned an error while {what} (HTTP {resp.status_code}): {msg}",
                           msg)
        return data

    def create_pod(self, *, name: str, image: str, gpu_type: str, gpu_count: int,
                   interruptible: bool, env: Mapping[str, str], container_disk_gb: int,
                   cloud_type: str = "SECURE",
                   ports: tuple[str, ...] = ("22/tcp",)) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": name, "imageName": image, "gpuTypeIds": [gpu_type], "gpuCount": gpu_count,
            "interruptible": interruptible, "cloudType": cloud_type, "ports": list(ports),
            "env": dict(env), "containerDiskInGb": container_disk_gb, "volumeInGb": 0,
            "supportPublicIp": True,
        }
        data = self._request("creating the pod", "POST", "/pods", body)
        if not isinstance(data, dict) or not data.get("id"):
            raise ProviderError("RunPod's REST API created no pod id; check the RunPod console "
                                "for a pod named " + name + ".")
        return data

    def delete_pod(self, pod_id: str) -> bool:
        """True if deleted, False if it was not found (already gone)."""
        try:
            self._request("terminating the pod", "DELETE", f"/pods/{pod_id}")
        except ApiError as exc:
            if "HTTP 404" in str(exc):
                return False
            raise
        return True


"""How a RunPod pod ends itself, as data the pod's guard and watchdog receive (``SelfEnd``).

Why here: everything RunPod lives in ``tplab/cloud/runpod/``; the pod-side code
(``tplab/job/self_terminate.py``) follows whatever description it is handed. RunPod's official
images export ``RUNPOD_POD_ID`` and a pod-scoped ``RUNPOD_API_KEY`` to ``/etc/rp_environment``
(the mock names another file in ``$TPLAB_RP_ENV_FILE`` and its URL in ``$RUNPOD_API_BASE_URL``).
Which calls that key may make is known only live, so three ways, in order: REST v2 ``DELETE``,
GraphQL ``podTerminate``, ``runpodctl remove pod`` when the image has it.
"""

from __future__ import annotations

from typing import Any

DEFAULT_API_BASE = "https://api.runpod.io"


def self_end(api_base: str | None = None) -> dict[str, Any]:
    """The description the pod's guard and watchdog follow (no secret in it)."""
    return {
        "provider": "RunPod", "api_base": (api_base or DEFAULT_API_BASE).rstrip("/"),
        "id_var": "RUNPOD_POD_ID", "key_var": "RUNPOD_API_KEY",
        "base_var": "RUNPOD_API_BASE_URL",
        "env_file": "/etc/rp_environment", "env_file_var": "TPLAB_RP_ENV_FILE",
        "ways": [
            {"label": "v2 DELETE /v2/pods/{id}", "method": "DELETE", "url": "{base}/v2/pods/{id}"},
            {"label": "GraphQL podTerminate", "method": "POST", "url": "{base}/graphql",
             "body": '{"query": "mutation { podTerminate(input: {podId: \\"{id}\\"}) }"}',
             "answer_key": "podTerminate"},
            {"label": "runpodctl remove pod", "kind": "command",
             "argv": ["runpodctl", "remove", "pod", "{id}"], "key_env": "RUNPOD_API_KEY"},
        ],
    }

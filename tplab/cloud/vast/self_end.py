"""How a Vast.ai instance ends itself, as data the pod's guard and watchdog receive (``SelfEnd``).

Why here: everything Vast lives in ``tplab/cloud/vast/``; the pod-side code follows whatever
description it is handed. Inside every instance Vast sets ``CONTAINER_ID`` and
``CONTAINER_API_KEY``, a key that can only start, stop or destroy *this* instance, so the
instance destroys itself with ``DELETE /api/v0/instances/$CONTAINER_ID`` and
``Authorization: Bearer $CONTAINER_API_KEY``, as Vast documents its instances' environment. Those variables live in the container's
environment, which an SSH session does not inherit: the instance's ``onstart`` (``shapes``)
writes them, mode 600, to ``ENV_FILE`` on the instance, where the watchdog reads them. The key
never leaves the instance. The Vast CLI, when the image has it, is the fallback (the key in its
environment, never on its command line; its answer read from its output, see ``CLI_ACCEPTED``).
"""

from __future__ import annotations

from typing import Any

DEFAULT_API_BASE = "https://console.vast.ai"
#: where onstart keeps the instance's id and key for processes started over SSH
ENV_FILE = "$HOME/.tplab-guard/instance.env"
ID_VAR, KEY_VAR = "CONTAINER_ID", "CONTAINER_API_KEY"
#: what ``vastai ... destroy instance ID -y`` prints when Vast destroyed the instance (only a
#: success counts: from inside, "Failed with error 404" is a key that cannot see it). vastai
#: 1.9.1 exits 0 whatever happened (an HTTP error is "Failed with error N: ..." on stderr; with
#: --raw a success prints nothing at all), and without ``-y`` it asks for confirmation, reads
#: EOF and prints "Aborted.".
CLI_ACCEPTED = r"destroying instance \d+\."


def self_end(api_base: str | None = None) -> dict[str, Any]:
    """The description the instance's guard and watchdog follow (no secret in it)."""
    return {
        "provider": "Vast.ai", "api_base": (api_base or DEFAULT_API_BASE).rstrip("/"),
        "id_var": ID_VAR, "key_var": KEY_VAR, "env_file": ENV_FILE,
        "ways": [{"label": "DELETE /api/v0/instances/{id}", "method": "DELETE",
                  "url": "{base}/api/v0/instances/{id}/", "ok": [200, 202, 204],
                  "ok_field": "success"},
                 {"label": "vastai destroy instance {id}", "kind": "command",
                  "argv": ["vastai", "--url", "{base}", "destroy", "instance", "{id}", "-y"],
                  "key_env": "VAST_API_KEY", "ok_output": CLI_ACCEPTED}],
    }

"""Is a pod's SSH really up? A real handshake with a bound, and the host key it showed.

Why: RunPod says RUNNING and lists the port mapping before sshd inside the container accepts
connections, so readiness is proven only by an SSH key exchange. Without a client key the probe
stops after the key exchange (``asyncssh.get_server_host_key``), which proves sshd answers; with one
it also logs in, which proves PUBLIC_KEY was installed. The host key is returned so the orchestrator
can pin it for every later connection.

The provider is synchronous; ``probe_host_key`` runs the coroutine in a private event loop (in a
helper thread when the calling thread already runs a loop).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


async def _probe(host: str, port: int, timeout_s: float, client_key: Any = None,
                 username: str = "root") -> str:
    import asyncssh

    async def go() -> str:
        if client_key is None:
            key = await asyncssh.get_server_host_key(host, port, config=None)
            if key is None:
                raise OSError("no host key offered")
        else:
            async with asyncssh.connect(host, port, username=username, known_hosts=None,
                                        client_keys=[client_key], agent_path=None,
                                        password=None, kbdint_auth=False, config=None) as conn:
                key = conn.get_server_host_key()
                if key is None:
                    raise OSError("no host key offered")
        return key.export_public_key().decode().strip()

    return await asyncio.wait_for(go(), timeout_s)


def probe_host_key(host: str, port: int, timeout_s: float, client_key: Any = None,
                   username: str = "root") -> str:
    """The server's host key (OpenSSH line) after a real handshake; raises on failure/timeout."""
    coro_args = (host, port, timeout_s, client_key, username)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_probe(*coro_args))
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(_probe(*coro_args))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=run, name="ssh-probe", daemon=True)
    t.start()
    t.join(timeout_s + 5)
    if "error" in box:
        raise box["error"]
    if "value" not in box:
        raise TimeoutError("SSH probe did not finish")
    return box["value"]

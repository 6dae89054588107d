"""Shared by tests/mock and tests/cloud: a lab SSH key, pod specs, and running a command in a pod."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import asyncssh

from tplab.cloud.base import PodSpec

GPU = "NVIDIA GeForce RTX 4090"


def new_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


def spec(key: asyncssh.SSHKey, name: str = "tplab-test", **kw: Any) -> PodSpec:
    return PodSpec(name=name, gpu_type=kw.pop("gpu_type", GPU), gpu_count=kw.pop("gpu_count", 2),
                   public_key=key.export_public_key().decode(), **kw)


async def ssh_run_async(host: str, port: int, key: Any, command: str,
                        host_key: str | None = None) -> asyncssh.SSHCompletedProcess:
    known = asyncssh.import_known_hosts(f"[{host}]:{port} {host_key}\n") if host_key else None
    async with asyncssh.connect(host, port, username="root", client_keys=[key],
                                known_hosts=known, agent_path=None, config=None) as conn:
        return await conn.run(command, check=False)


def ssh_run(host: str, port: int, key: Any, command: str,
            host_key: str | None = None) -> asyncssh.SSHCompletedProcess:
    return asyncio.run(ssh_run_async(host, port, key, command, host_key))


def http(method: str, url: str, key: str | None, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")

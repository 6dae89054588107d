"""Shared by the Vast mock's tests: calling its API, creating an instance, waiting for a status."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.mock.helpers import http
from tplab.mock.vast_mock.offers import MACHINES

#: Vast's own CLI, as scripts/setup installs it (pyproject's `vast-cli` pin, an environment of
#: its own)
VASTAI = Path(__file__).resolve().parents[2] / ".venv-vastai" / "bin" / "vastai"
#: a 2 x RTX 4090 machine of the mock's catalogue
MACHINE = next(m for m in MACHINES if m.gpu_name == "RTX 4090" and m.num_gpus == 2)


def api(cloud: Any, method: str, path: str, body: Any = None,
        key: str | None = "account") -> tuple[int, Any]:
    """``method path`` on the mock, with the account key unless ``key`` says another."""
    return http(method, cloud.api_url + path, cloud.api_key if key == "account" else key, body)


def create(cloud: Any, label: str, *, bid: bool = True, **extra: Any) -> tuple[int, Any]:
    body: dict[str, Any] = {"image": "pytorch/pytorch:latest", "disk": 20, "label": label,
                            "runtype": "ssh_direct", "cancel_unavail": True,
                            "target_state": "running", **extra}
    if bid:
        body.setdefault("price", round(MACHINE.min_bid * 1.2, 4))
    return api(cloud, "PUT", f"/api/v0/asks/{MACHINE.ask_id}/", body)


def show(cloud: Any, inst_id: int, key: str | None = "account") -> Any:
    status, body = api(cloud, "GET", f"/api/v0/instances/{inst_id}/", key=key)
    assert status == 200, body
    return body["instances"]


def wait_for(cloud: Any, inst_id: int, want: str, timeout_s: float = 20.0) -> dict[str, Any]:
    """Poll show until ``actual_status`` is ``want`` (and, for running, the SSH port shows)."""
    deadline = time.monotonic() + timeout_s
    seen: list[Any] = []
    while time.monotonic() < deadline:
        inst = show(cloud, inst_id)
        status = inst["actual_status"] if inst else None
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == want and (want != "running" or inst["ports"]):
            return inst
        time.sleep(0.05)
    raise AssertionError(f"instance {inst_id} never reached {want}: went {seen}")


def ssh_port(inst: dict[str, Any]) -> int:
    return int(inst["ports"]["22/tcp"][0]["HostPort"])


def destroy(cloud: Any, inst_id: int) -> None:
    api(cloud, "DELETE", f"/api/v0/instances/{inst_id}/")

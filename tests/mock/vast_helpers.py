"""Shared by the Vast mock's tests: calling its API, creating an instance, waiting for a status,
and Vast's own CLI pointed at it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from tests.mock.helpers import http
from tplab.mock.vast_mock.catalog import MACHINES

#: Vast's own CLI, as scripts/setup installs it (pyproject's `vast-cli` pin, an environment of
#: its own)
VASTAI = Path(__file__).resolve().parents[2] / ".venv-vastai" / "bin" / "vastai"
#: runs Vast's CLI once per call without paying its imports each time (see the module)
FORKS = Path(__file__).resolve().parent / "vastai_forks.py"
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


class VastCLI:
    """``cli(*args) -> (exit status, stdout, stderr)``: one ``vastai --url <mock> --api-key <key>
    args...`` call, in the environment ``env`` (HOME and the rest: the calls see nothing else).

    Each call is a process of its own, forked by tests/mock/vastai_forks.py from a Python that has
    imported the CLI once (a fresh ``vastai`` spends ~0.5 s on its imports before its request);
    ``close()`` ends that server. Every call is bounded: a call that outlives ``timeout_s`` is
    killed and fails the test."""

    def __init__(self, api_url: str, api_key: str, env: dict[str, str], log: Path) -> None:
        self.api_url, self.api_key = api_url, api_key
        self._log: IO[bytes] = log.open("wb")
        self._proc = subprocess.Popen([str(VASTAI.parent / "python"), str(FORKS), str(VASTAI)],
                                      env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, cwd=env["HOME"])
        self._log_path = log

    def __call__(self, *args: str, timeout_s: float = 60.0) -> tuple[int, str, str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        call = {"argv": ["--url", self.api_url, "--api-key", self.api_key, *args],
                "timeout_s": timeout_s}
        self._proc.stdin.write((json.dumps(call) + "\n").encode())
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s + 30)
        line = self._proc.stdout.readline() if ready else b""
        if not line:
            self.close()
            raise AssertionError(f"Vast's CLI gave no answer to {args[:3]}: "
                                 f"{self._log_path.read_text(errors='replace')[-2000:]}")
        reply = json.loads(line)
        assert not reply["timed_out"], f"vastai {' '.join(args[:3])} ran past {timeout_s} s"
        return reply["code"], reply["out"], reply["err"]

    def close(self) -> None:
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        self._log.close()


def vastai_env(home: Path) -> dict[str, str]:
    """What a ``vastai`` call runs with: a HOME of its own (its key file and caches go there),
    its update check off, a wide terminal for its tables."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
            "VASTAI_NO_UPDATE_CHECK": "1", "LANG": "C.UTF-8", "COLUMNS": "200"}

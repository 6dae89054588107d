"""The mock clouds running on this machine, so `tplab status --mock` and `tplab terminate --mock`
can reach a mock lab's pods.

Why: a mock lab starts its own mock cloud (a subprocess on a random loopback port, with its own
random API key), and its pods live exactly as long as it does. Without a way to find that
process, another terminal could only say "no mock cloud running" while one was. So
``start_mock_cloud`` writes a small record here and ``MockCloud.stop()`` removes it:

    TPLAB_HOME/mock/clouds/<pid>.json   (mode 0600)
    {"api_url": "http://127.0.0.1:41234", "api_key": "...", "pid": 4242,
     "started_at": 1764450000.0, "provider": "runpod"}      # or "vast"

The key is the mock's own account key (never a real one), but it is still a key: it is
registered with ``tplab.keys.redact`` when read and never printed. A record whose process has gone
(a mock killed hard) is stale: ``running()`` skips it and removes it. Standard library only.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tplab.util.jsonfile import write_json
from tplab.util.pids import pid_alive

DIR_NAME = "clouds"


@dataclass(frozen=True)
class MockCloudRecord:
    api_url: str
    pid: int
    started_at: float
    path: Path
    api_key: str = field(repr=False, default="")
    provider: str = "runpod"


def clouds_dir() -> Path:
    from tplab.home.paths import tplab_home
    return tplab_home(mock=True) / DIR_NAME


def register(api_url: str, api_key: str, pid: int, provider: str = "runpod") -> Path | None:
    """Write the record for a mock cloud just started (atomically, 0600); None when it could
    not be written (the mock still works; only other terminals will not find it)."""
    try:
        folder = clouds_dir()
        name = f"{pid}.json" if provider == "runpod" else f"{pid}-{provider}.json"
        return write_json(folder / name, {"api_url": api_url, "api_key": api_key, "pid": pid,
                                          "started_at": time.time(), "provider": provider},
                          indent=None)
    except OSError:
        return None


def unregister(path: Path | None) -> None:
    if path is None:
        return
    try:
        Path(path).unlink()
    except OSError:
        pass


def _alive(pid: int) -> bool:
    if not pid_alive(pid):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:  # a reused pid is not our mock: `python -m tplab.mock` (a lab's), `tplab mock-cloud`
        line = cmdline.read_bytes()
        return b"tplab.mock" in line or (b"tplab" in line and b"\0mock-cloud" in line)
    except OSError:
        return True  # no /proc here: trust the pid


def running(provider: str | None = None) -> list[MockCloudRecord]:
    """The mock clouds whose process is alive (of ``provider``, or all), oldest first; stale
    records are removed."""
    try:
        paths = sorted(clouds_dir().glob("*.json"))
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rec = MockCloudRecord(api_url=str(data["api_url"]),
                                  pid=int(data["pid"]), started_at=float(data["started_at"]),
                                  path=path, api_key=str(data["api_key"]),
                                  provider=str(data.get("provider", "runpod")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(rec.pid):
            unregister(path)
            continue
        if rec.api_key:
            from tplab.keys.redact import register_secret
            register_secret(rec.api_key)
        if provider is None or rec.provider == provider:
            found.append(rec)
    found.sort(key=lambda r: r.started_at)
    return found

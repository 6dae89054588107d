"""Find and kill every process of a mock pod, including ones detached with setsid or nohup.

A real pod is a container: terminating it ends everything inside. A mock pod's processes are
ordinary processes of this user, so each is marked: every command a pod runs gets the environment
variable ``TPLAB_MOCK_POD=<pod id>``, which children inherit across fork, exec, setsid and nohup.
Termination scans ``/proc/*/environ`` for the marker (and, for processes that cleared their
environment, walks parent links from the pids the pod started) and SIGKILLs what it finds, in
rounds, until a round finds nothing. Linux only (``/proc``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKER_VAR = "TPLAB_MOCK_POD"
#: a second marker naming the mock cloud run (its state directory's name), so that a mock that
#: was SIGKILLed can still have its pods' processes swept by whoever started it (handle.py)
CLOUD_MARKER_VAR = "TPLAB_MOCK_CLOUD"


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return needle in data.split(b"\0")


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def kill_marked(var: str, value: str, rounds: int = 20) -> int:
    """SIGKILL every process whose environment has ``var=value`` (and their descendants)."""
    needle = f"{var}={value}".encode()
    killed = 0
    for _ in range(rounds):
        pids = [int(e.name) for e in os.scandir("/proc")
                if e.name.isdigit() and int(e.name) != os.getpid()
                and _environ_has(int(e.name), needle) and not _is_zombie(int(e.name))]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def pod_pids(pod_id: str, roots: set[int] | frozenset[int] = frozenset()) -> set[int]:
    """Live (non-zombie) pids of the pod: marked ones, and descendants of ``roots`` or of marked."""
    needle = f"{MARKER_VAR}={pod_id}".encode()
    me = os.getpid()
    parents: dict[int, int | None] = {}
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me:
            continue
        parents[pid] = _ppid(pid)
        if _environ_has(pid, needle):
            found.add(pid)
    anchors = found | {r for r in roots if r in parents}
    found |= anchors
    for pid, parent in parents.items():
        depth = 0
        while parent and depth < 64:
            if parent in anchors:
                found.add(pid)
                break
            parent = parents.get(parent)
            depth += 1
    return {pid for pid in found if pid != me and not _is_zombie(pid)}


def kill_pod_processes(pod_id: str, roots: set[int] | frozenset[int] = frozenset(),
                       rounds: int = 20) -> int:
    """SIGKILL every process of the pod; returns how many were killed. Sync, brief."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = pod_pids(pod_id, roots) - {os.getpid()}
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
            except PermissionError:
                pass
        time.sleep(0.02)
    return len(killed)

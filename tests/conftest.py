"""Shared test fixtures: every test gets its own TPLAB_HOME so no state leaks between tests, and
every process a test started (ranks, torchrun, mock clouds, SSH servers, CLI runs) is gone after it.

The reaper marks each test's processes by an environment variable they inherit (it survives a
parent killed mid-test, which reparents its children away from pytest), and also takes this
process's own descendants; whatever is still alive when the test's other fixtures are torn down is
killed (SIGKILL), and the test is told which processes were left behind.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
import signal
import sys
import time
import warnings
from pathlib import Path

import pytest

REAP_ENV = "TPLAB_TEST_REAP"


def pytest_configure(config):
    """Python's cyclic garbage collector runs a full collection every ~70k allocations (the
    thresholds 700, 10, 10), each one walking every object torch, Textual and the tests hold:
    ~4 s of CPU per worker over the fast set. Full collections ~60x rarer (young ones as often as
    before, in larger batches) keep a test process's memory bounded and cost ~1 s."""
    gc.set_threshold(10_000, 20, 20)


def _start_rank(item) -> int:
    """0: `slow` (whole labs, gloo ranks, torch.compile: 10-40 s each); 1: the `waits` group
    (tests that mostly sleep to a deadline, ~40 s in all on one worker); 2: the rest."""
    if item.get_closest_marker("slow") is not None:
        return 0
    group = item.get_closest_marker("xdist_group")
    return 1 if group is not None and group.args[:1] == ("waits",) else 2


def _shares_a_module_fixture(item) -> bool:
    """Whether the test uses a module-scoped fixture (a module's mock cloud, its rank spawn)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(d.scope == "module" for fixturedefs in defs.values() for d in fixturedefs)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """The order the workers take the tests in (a stable sort, the same on every worker).

    The long tests start first: on pytest-xdist's workers a long test that starts last keeps one
    worker busy while the others are done. The waiting tests come next, started early on one
    worker, and sleep while the other workers use the cores. The rest is mixed: each folder's
    tests spread evenly over the run, so the workers are rarely all in the dashboard's tests
    (CPU and timers), or all waiting on mock clouds, at once. A module whose tests share a
    module-scoped fixture becomes one group, run by one worker (one mock cloud, not three)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(f"module:{item.module.__name__}"))
    folders: dict[str, list] = {}
    for item in items:
        folders.setdefault(item.nodeid.split("::")[0].rsplit("/", 1)[0], []).append(item)
    spread = {id(item): i / len(tests) for tests in folders.values()
              for i, item in enumerate(tests)}

    def order(item) -> tuple[int, float]:
        rank = _start_rank(item)
        return rank, spread[id(item)] if rank == 2 else 0.0

    items.sort(key=order)


def _end_own_fork_server() -> None:
    """SIGKILL and reap this process's multiprocessing fork server, if it started one (the
    ranks it forked are gone: each test's reaper ended them)."""
    for pid, (ppid, _) in _processes().items():
        if _is_own_fork_server(ppid, _cmdline(pid) or ""):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """An xdist worker ends here, once every other plugin has unconfigured: it has sent the
    controller its last report ("workerfinished", at session finish), so what remains is pytest's
    five full garbage collections (their warnings could no longer reach the controller) and the
    interpreter's teardown of torch's and Textual's ~500k objects: ~3 s of CPU per worker, at the
    end of the run, while the controller waits. Every process a test started is gone already
    (the reaper, and the session fixtures' teardown); the worker's own fork server
    (tests/distributed.py), which would only notice the worker gone and then spend a second
    unloading torch, is ended and reaped here, so nothing outlives the run."""
    if not hasattr(config, "workerinput"):
        return
    _end_own_fork_server()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(int(config.workeroutput.get("exitstatus", 0)))


@pytest.fixture(autouse=True)
def _tplab_home(tmp_path, monkeypatch):
    home = tmp_path / "tplab-home"
    home.mkdir()
    monkeypatch.setenv("TPLAB_HOME", str(home))
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    return home


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) for every live, non-zombie process."""
    procs: dict[int, tuple[int, str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            procs[int(d.name)] = (int(fields[1]), fields[19])
    return procs


def _carries(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _left_behind(before: dict[int, tuple[int, str]], marker: bytes) -> dict[int, str]:
    now = _processes()
    mine = {os.getpid()}
    changed = True
    while changed:  # this process's descendants
        changed = False
        for pid, (ppid, _) in now.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    mine.discard(os.getpid())
    out = {}
    for pid, (_, start) in now.items():
        if before.get(pid, (0, ""))[1] == start:
            continue  # alive before this test began (a module's shared mock cloud)
        if pid in mine or _carries(pid, marker):
            cmd = _cmdline(pid)
            if cmd is None:
                continue
            if "multiprocessing.resource_tracker" in cmd:  # pytest's own, for the session
                continue
            if _is_own_fork_server(now[pid][0], cmd):
                continue  # for the session; the ranks it forks are its children, not spared
            out[pid] = cmd[:160]
    return out


def _cmdline(pid: int) -> str | None:
    """The process's command line, its arguments joined by spaces (None once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None


def _is_own_fork_server(ppid: int, cmd: str) -> bool:
    """Whether a process is this worker's multiprocessing fork server (tests/distributed.py)."""
    return ppid == os.getpid() and "multiprocessing.forkserver" in cmd


@pytest.fixture(autouse=True)
def _reap_processes(monkeypatch):
    """Kill every process the test left running (see the module docstring)."""
    if not Path("/proc/self/stat").exists():
        yield
        return
    token = secrets.token_hex(8)
    monkeypatch.setenv(REAP_ENV, token)
    marker = f"{REAP_ENV}={token}".encode()
    before = _processes()
    yield
    left = _left_behind(before, marker)
    deadline = time.monotonic() + 3.0  # a process on its way out (a mock cloud just stopped) may finish
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _left_behind(before, marker)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        warnings.warn(f"the test left {len(left)} process(es) running, now killed: "
                      + "; ".join(f"{pid} {cmd}" for pid, cmd in left.items()), stacklevel=1)

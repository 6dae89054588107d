"""What the fault suite's rows share (benchmarks/fault_suite.py's RunPod rows and
benchmarks/fault_suite_vast.py's Vast rows): the row, a worker (one mock cloud and one
TPLAB_HOME), the client signalled in a phase and how long its pod lived after, one lab under a
fault, and what a user runs afterwards (`tplab terminate --all`). A module of its own, so that
the two tables import it and never each other.

The account key of every mock cloud here is ``CANARY``: the suite searches every file it
produced and everything the clients printed (``PRINTED``) for it at the end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CANARY = "rpa_CANARYfaultsuite" + "0123456789abcdef0123456789"
PHASES = ("authorize", "create", "boot", "connect", "upload", "run", "fetch", "terminate")
HEARTBEAT_S = 5.0   # the watchdog's stale-heartbeat bound in these labs
GUARD_S = 12.0      # the boot guard's first-heartbeat bound in these labs
BOOT_S = 1.0        # the mock's boot delay
LAB_ARGS = ["--prompts", "2", "--new-tokens", "16", "--no-sweep", "--warmup", "1",
            "--heartbeat-timeout", f"{HEARTBEAT_S:g}", "--boot-guard", f"{GUARD_S:g}"]


@dataclass
class Row:
    area: str
    case: str
    figure: str
    bound: str
    ok: bool
    note: str = ""


#: everything the clients printed (searched for the canary at the end)
PRINTED: list[str] = []


@dataclass
class Worker:
    """One mock cloud (of ``provider``) and one TPLAB_HOME, used by one trial at a time."""
    root: Path
    cloud: object = None
    ready_at: float = 0.0   # monotonic time before which the next trial waits (see signal_trial)
    provider: str = "runpod"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def start(self, faults: dict | None = None) -> None:
        from tplab.mock.handle import start_mock_cloud
        self.home.mkdir(parents=True, exist_ok=True)
        self.cloud = start_mock_cloud(faults, provider=self.provider, boot_delay_s=BOOT_S,
                                      api_key=CANARY, state_dir=self.root / "mock-state",
                                      keep_sandboxes=True)

    def stop(self) -> None:
        if self.cloud is not None:
            self.cloud.stop()
            self.cloud = None

    def live(self) -> list[dict]:
        """The cloud's pods still alive (Vast: not destroyed, or processes left)."""
        if self.provider == "vast":
            return [p for p in self.cloud.pods() if not p["destroyed"] or p["alivePids"]]
        return [p for p in self.cloud.pods() if p["desiredStatus"] != "TERMINATED"]

    def env(self) -> dict[str, str]:
        from tplab.cloud import registry
        return {**os.environ, "TPLAB_HOME": str(self.home), "PYTHONPATH": str(REPO),
                registry.package(self.provider).KEY_VAR: CANARY}

    def client(self, out: Path, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tplab", "run", "--mock", "--api-url", self.cloud.api_url,
             "--provider", self.provider, "--json", *LAB_ARGS, "--out", str(out), *extra],
            cwd=REPO, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)


def _bound(phase: str, sig: int) -> float:
    """How long after the signal the pod may live, by who ends it."""
    if sig == signal.SIGHUP:
        return 15.0                                   # the client's own teardown
    if phase == "authorize":
        return 1.0                                    # nothing was created
    if phase in ("create", "boot", "connect", "upload"):
        return BOOT_S + GUARD_S + 2.0 + 5.0           # the boot guard (+ its poll + the API)
    return HEARTBEAT_S + 1.0 + 7.0                    # the watchdog (+ its poll + the API)


def signal_trial(w: Worker, phase: str, sig: int, n: int) -> Row:
    """One client, signalled once it reaches ``phase``: how long its pod lived after."""
    from tplab.lab.leftovers import DEAD_CLIENT_INTENT_GRACE_S
    name = "SIGKILL" if sig == signal.SIGKILL else "SIGHUP"
    out = w.root / f"out-{phase}-{name}-{n}"
    # a client killed mid-create leaves a create nobody knows the answer to: the next start on
    # this TPLAB_HOME is refused until the provider's list has had time to show its pod
    time.sleep(max(0.0, w.ready_at - time.monotonic()))
    proc = w.client(out)
    seen = None
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["type"] == "phase" and ev["src"] == "lab" and ev["name"] in (phase, "done"):
                seen = ev["name"]
                break
            if time.monotonic() > deadline:
                break
        t_sig = time.monotonic()
        os.kill(proc.pid, sig)
        if sig == signal.SIGKILL and phase == "create":
            w.ready_at = t_sig + DEAD_CLIENT_INTENT_GRACE_S + 1.0
        bound = _bound(phase, sig)
        took = quiet_for(w, t_sig, bound + 20)
        left = w.live()
        rest, err = proc.communicate(timeout=120)
        PRINTED.extend([rest, err])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    ok = seen == phase and not left and took <= bound
    note = "" if seen == phase else f"the lab never reached {phase} ({seen})"
    where = "" if w.provider == "runpod" else f" [{w.provider}]"
    return Row(f"client {name}", f"in {phase} #{n}{where}", f"{took:.1f} s", f"<= {bound:.0f} s", ok,
               note or (f"{len(left)} pod(s) alive" if left else ""))


def quiet_for(w: Worker, t_sig: float, limit_s: float, settle_s: float = 1.0) -> float:
    """Seconds from ``t_sig`` until the cloud showed no live pod and kept showing none for
    ``settle_s`` (a create still in flight when the signal came may make its pod a moment after
    a first empty look); ``limit_s`` when it never did."""
    quiet_since = None
    while time.monotonic() - t_sig < limit_s:
        if w.live():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settle_s:
            return quiet_since - t_sig
        time.sleep(0.2)
    return time.monotonic() - t_sig


def run_signal_trials(root: Path, reps: int, phases: tuple[str, ...], workers: int,
                      provider: str = "runpod") -> list[Row]:
    cases = [(p, s, n) for n in range(1, reps + 1) for p in phases
             for s in (signal.SIGKILL, signal.SIGHUP)]
    pool = [Worker(root / f"w{i}-{provider}", provider=provider) for i in range(workers)]
    rows: list[Row] = []
    try:
        with cf.ThreadPoolExecutor(workers) as ex:   # the mock clouds start side by side
            list(ex.map(Worker.start, pool))
        with cf.ThreadPoolExecutor(workers) as ex:
            queue = list(cases)
            free = list(pool)
            running: dict[cf.Future, Worker] = {}
            while queue or running:
                while queue and free:
                    w = free.pop()
                    phase, sig, n = queue.pop(0)
                    running[ex.submit(signal_trial, w, phase, sig, n)] = w
                done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    rows.append(fut.result())
                    free.append(running.pop(fut))
    finally:
        with cf.ThreadPoolExecutor(workers) as ex:   # and end side by side
            list(ex.map(_end_worker, pool))
    where = "" if provider == "runpod" else f" [{provider}]"
    order = {(f"in {p} #{n}{where}", s): i for i, (p, s, n) in enumerate(
        (p, "SIGKILL" if s == signal.SIGKILL else "SIGHUP", n) for p, s, n in cases)}
    return sorted(rows, key=lambda r: order.get((r.case, r.area.split()[-1]), 0))


def _end_worker(w: Worker) -> None:
    """What a user runs afterwards (`tplab terminate --all`), then the worker's cloud stopped."""
    try:
        if w.cloud is not None:
            terminate_all(w)
    finally:
        w.stop()


def terminate_all(w: Worker) -> None:
    """What a user runs afterwards: ends any live pod and settles what dead clients held."""
    out = subprocess.run([sys.executable, "-m", "tplab", "terminate", "--all", "--mock",
                          "--api-url", w.cloud.api_url, "--provider", w.provider],
                         cwd=REPO, env=w.env(),
                         capture_output=True, text=True, timeout=300)
    PRINTED.extend([out.stdout, out.stderr])


# ------------------------------------------------------------------ in-process labs

def lab_config(w: Worker, name: str, **kw):
    from tplab.lab.lab_config import LabConfig
    base = dict(mock=True, provider=w.provider, api_url=w.cloud.api_url, num_prompts=2,
                new_tokens=16, warmup=1,
                sweep=False, out_dir=w.root / name, heartbeat_interval_s=1.0,
                heartbeat_timeout_s=HEARTBEAT_S, guard_first_heartbeat_s=GUARD_S,
                create_lookup_s=5.0, end_bound_s=20.0)
    base.update(kw)
    return LabConfig(**base)


async def run_lab(w: Worker, cfg, timeout_s: float = 5.0, saboteur=None):
    from tplab.cloud.registry import provider_for
    from tplab.lab.orchestrator import Lab
    prov = provider_for(w.provider, CANARY, w.cloud.api_url, timeout_s=timeout_s,
                        retry_delays=(0.5, 1.0, 2.0), terminate_delays=(0.5, 1.0, 2.0))
    lab = Lab(cfg, provider=prov)
    task = asyncio.create_task(saboteur(lab)) if saboteur else None
    outcome = await lab.run()
    if task is not None:
        await task
    return lab, outcome


def fault_lab(root: Path, area: str, case: str, faults: dict, expect: str,
              provider: str = "runpod", before=None, check=None, **cfg_kw) -> Row:
    """One lab under ``faults``: its status must be ``expect`` with no pod and no hold left.
    ``before(worker)`` runs once the cloud is up; ``check(worker, outcome) -> (ok, figure)``
    after the lab, before the cloud is searched for pods (the row's own bound and figure)."""
    w = Worker(root / f"fault-{len(list(root.glob('fault-*')))}", provider=provider)
    w.start(faults)
    try:
        os.environ["TPLAB_HOME"] = str(w.home)
        if before is not None:
            before(w)
        t0 = time.monotonic()
        timeout_s = cfg_kw.pop("client_timeout_s", 5.0)
        lab, outcome = asyncio.run(run_lab(w, lab_config(w, "out", **cfg_kw), timeout_s))
        took = time.monotonic() - t0
        checked, extra = check(w, outcome) if check is not None else (True, "")
        left = w.live()
        from tplab.money.budget import BudgetGuard, default_ledger_path
        held = BudgetGuard(default_ledger_path(mock=True), 100.0).held
        ok = outcome.status == expect and not left and held == 0.0 and checked
        note = outcome.reason[:90] if outcome.status != "COMPLETE" else ""
        return Row(area, case, f"{outcome.status} in {took:.0f} s" + (f", {extra}" if extra
                                                                       else ""),
                   f"{expect}, no pod, no hold", ok,
                   note + (f"; {len(left)} pod(s) alive" if left else "")
                   + (f"; ${held} held" if held else ""))
    finally:
        terminate_all(w)
        w.stop()

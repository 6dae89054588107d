"""What the fault suite's rows share (benchmarks/fault_suite.py's RunPod rows and
benchmarks/fault_suite_vast.py's Vast rows): the row, a worker (one mock cloud and one
TPLAB_HOME), the client signalled in a stage and how long its pod lived after, one lab under a
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
STAGES = ("authorize", "create", "boot", "connect", "upload", "run", "fetch", "terminate")
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


def _bound(stage: str, sig: int) -> float:
    """How long after the signal the pod may live, by who ends it."""
    if sig == signal.SIGHUP:
        return 15.0                                   # the client's own teardown
    if stage == "authorize":
        return 1.0                                    # nothing was created
    if stage in ("create", "boot", "connect", "upload"):
        return BOOT_S + GUARD_S + 2.0 + 5.0           # the boot guard (+ its poll + the API)
    return HEARTBEAT_S + 1.0 + 7.0                    # the watchdog (+ its poll + the API)


def signal_trial(w: Worker, stage: str, sig: int, n: int) -> Row:
    """One client, signalled once it reaches ``stage``: how long its pod lived after."""
    from tplab.lab.leftovers import DEAD_CLIENT_INTENT_GRACE_S
    name = "SIGKILL" if sig == signal.SIGKILL else "SIGHUP"
    out = w.root / f"out-{stage}-{name}-{n}"
    # a client killed mid-create leaves a create nobody knows the answer to: the next start on
    # this TPLAB_HOME is refused until the provider's list has had time to show its pod
    time.sleep(max(0.0, w.ready_at - time.monotonic()))
    proc = w.client(out)
    seen = None
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["type"] == "phase" and ev["src"] == "lab" and ev["name"] in (stage, "done"):
                seen = ev["name"]
                break
            if time.monotonic() > deadline:
                break
        t_sig = time.monotonic()
        os.kill(proc.pid, sig)
        if sig == signal.SIGKILL and stage == "create":
            w.ready_at = t_sig + DEAD_CLIENT_INTENT_GRACE_S + 1.0
        bound = _bound(stage, sig)
        took = quiet_for(w, t_sig, bound + 20)
        left = w.live()
        rest, err = proc.communicate(timeout=120)
        PRINTED.extend([rest, err])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    ok = seen == stage and not left and took <= bound
    note = "" if seen == stage else f"the lab never reached {stage} ({seen})"
    where = "" if w.provider == "runpod" else f" [{w.provider}]"
    return Row(f"client {name}", f"in {stage} #{n}{where}", f"{took:.1f} s", f"<= {bound:.0f} s", ok,
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


def run_signal_trials(root: Path, reps: int, stages: tuple[str, ...], workers: int,
                      provider: str = "runpod") -> list[Row]:
    cases = [(p, s, n) for n in range(1, reps + 1) for p in stages
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
                    stage, sig, n = queue.pop(0)
                    running[ex.submit(signal_trial, w, stage, sig, n)] = w
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


# ------------------------------------------------------------------ checks a lab row shares

def said(*needles: str, absent: tuple[str, ...] = ()):
    """A row's check: each needle is in the lab's stream or its last sentence, no ``absent``."""
    def check(w: Worker, outcome) -> tuple[bool, str]:
        text = (outcome.out_dir / "stream.jsonl").read_text() + outcome.reason
        missing = [n for n in needles if n not in text]
        found = [a for a in absent if a in text]
        ok = not missing and not found
        return ok, "said" if ok else f"missing {missing}, found {found}"
    return check


def both(*checks):
    """A row's check that passes when every one of ``checks`` does (their figures joined)."""
    def check(w: Worker, outcome) -> tuple[bool, str]:
        results = [c(w, outcome) for c in checks]
        return all(ok for ok, _ in results), "; ".join(fig for _, fig in results)
    return check


def no_html(w: Worker, outcome) -> tuple[bool, str]:
    """The provider's 500 pages reached the user as words, never as HTML."""
    text = (outcome.out_dir / "stream.jsonl").read_text() + outcome.reason
    tags = [t for t in ("<html", "<script", "<!DOCTYPE", "</") if t in text]
    return not tags, "no HTML" if not tags else f"HTML in the stream: {tags}"


def held_then_retried(clear: dict):
    """A row's check for a pod its lab could not prove gone: the lab's authorization still
    held for it, nothing spent, the last sentence naming it and the command to retry; then,
    with the fault cleared (``clear``), that command run as a user would: gone, and the hold
    settled at what the pod billed."""
    def check(w: Worker, outcome) -> tuple[bool, str]:
        from tplab.money.budget import BudgetGuard, default_ledger_path
        guard = BudgetGuard(default_ledger_path(mock=True), 100.0)
        held, spent = guard.held, guard.total_spent
        pod = outcome.pod_id
        named = pod is not None and f"{pod} is NOT proven gone" in outcome.reason \
            and f"tplab terminate {pod}" in outcome.reason
        w.cloud.set_faults(**clear)
        out = subprocess.run([sys.executable, "-m", "tplab", "terminate", str(pod), "--mock",
                              "--api-url", w.cloud.api_url, "--provider", w.provider],
                             cwd=REPO, env=w.env(), capture_output=True, text=True, timeout=300)
        PRINTED.extend([out.stdout, out.stderr])
        after = BudgetGuard(default_ledger_path(mock=True), 100.0)
        ok = (held > 0 and spent == 0 and named and out.returncode == 0
              and after.held == 0 and after.total_spent > 0)
        return ok, (f"${held:.2f} held, then ${after.total_spent:.4f} billed by the retry"
                    if ok else f"held ${held:.2f}, spent ${spent:.4f}, named {named}, retry "
                    f"rc {out.returncode}: {out.stderr.strip()[-120:]}")
    return check


# ------------------------------------------------------------------ the end, as a user runs it

def _make_pod(w: Worker) -> str:
    """A pod on the worker's cloud, made outside any lab (the end is what is measured)."""
    if w.provider == "vast":
        from tests.mock.vast_helpers import create
        status, body = create(w.cloud, "tplab-end-row")
        assert status == 200 and body.get("success"), body
        return str(body["new_contract"])
    from tests.mock.helpers import new_key, spec
    from tplab.cloud.registry import provider_for
    return provider_for("runpod", CANARY, w.cloud.api_url).create(spec(new_key(), spot=False)).id


def _defaults(provider: str, names) -> dict:
    """The fault switches ``names`` as they are when off."""
    if provider == "vast":
        from tplab.mock.vast_mock.faults import VastFaults
        off = VastFaults().to_dict()
    else:
        from tplab.mock.runpod_mock.faults import Faults
        off = Faults().to_dict()
    return {k: off[k] for k in names}


def end_row(root: Path, provider: str, area: str, case: str, faults: dict, gone: bool,
            limit_s: float, bound_s: float | None = None) -> Row:
    """`tplab terminate ID` (its default bound, or ``--timeout bound_s``) on a pod under
    ``faults``, timed from the command to its exit: gone within ``limit_s`` (``gone``), or
    one sentence saying what is known within it; in both, a line at least every few seconds
    once the end began (``SAY_EVERY_S`` + 2 s), and no HTML in what it said."""
    from tplab.lab.ending import SAY_EVERY_S
    w = Worker(root / f"end-{len(list(root.glob('end-*')))}", provider=provider)
    w.start()
    try:
        pod = _make_pod(w)
        w.cloud.set_faults(**faults)
        argv = [sys.executable, "-m", "tplab", "terminate", pod, "--mock", "--api-url",
                w.cloud.api_url, "--provider", provider]
        if bound_s is not None:
            argv += ["--timeout", f"{bound_s:g}"]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO, env=w.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        stamps: list[float] = []
        lines: list[str] = []
        assert proc.stderr is not None
        for line in proc.stderr:   # the command's lines as they come, stamped
            stamps.append(time.monotonic() - t0)
            lines.append(line)
        out = proc.stdout.read() if proc.stdout else ""
        proc.wait(60)
        took = time.monotonic() - t0
        err = "".join(lines)
        PRINTED.extend([out, err])
        # once the end began (its first line, said at once), the longest silence until the
        # command's last word (the interpreter's start before it is not the end's)
        marks = [*stamps, took] if gone else stamps
        gap = max((b - a for a, b in zip(marks, marks[1:])), default=0.0)
        quiet = bool(stamps) and gap <= SAY_EVERY_S + 2
        html = any(t in out + err for t in ("<html", "<script", "</"))
        if gone:
            ok = proc.returncode == 0 and f"{pod}: gone" in out and took <= limit_s
            figure = f"gone in {took:.0f} s"
        else:
            ok = (proc.returncode == 1 and "NOT proven gone" in err and pod in err
                  and f"tplab terminate {pod}" in err and took <= limit_s)
            figure = f"the sentence at {took:.0f} s"
        ok = ok and quiet and not html
        note = "" if ok else (f"rc {proc.returncode}; longest silence {gap:.1f} s; "
                              f"{'HTML said; ' if html else ''}{(err or out).strip()[-150:]}")
        return Row(area, case, f"{figure}, {len(lines)} lines, silent <= {gap:.1f} s",
                   f"{'gone' if gone else 'a sentence'} <= {limit_s:.0f} s", ok, note)
    finally:
        w.cloud.set_faults(**_defaults(provider, faults))
        terminate_all(w)
        w.stop()


def end_cases(provider: str) -> list[tuple[str, str, dict, bool, float, float | None]]:
    """The end's rows of one cloud: (area, case, faults, gone, limit_s, --timeout or None)."""
    if provider == "vast":
        destroy, reads = "DELETE /api/v0/instances/{id}", ("GET /api/v0/instances/{id}",
                                                            "GET /api/v1/instances")
        return [
            ("vast end", "8 x 429 on destroy, at Vast's own limits", {"http_429": {destroy: 8}},
             True, 150.0, None),
            ("vast end", "destroy and every look answer 500 pages, 5 each",
             {"http_500": {destroy: 5, **{r: 5 for r in reads}}, "error_page": True}, True,
             150.0, None),
            ("vast end", "destroy answered success: false, 3 times", {"destroy_refused_n": 3},
             True, 150.0, None),
            ("vast end", "destroyed-but-running: intended destroyed, actual running, never done",
             {"destroy_lingers": -1, "destroy_intent_shown": True}, False, 60.0, 30.0),
            ("vast end", "a hung API: destroy and every look held 330 s",
             {"http_delay": {destroy: 999, **{r: 999 for r in reads}}, "delay_s": 330.0},
             False, 300.0, None),
        ]
    delete, reads = "DELETE /v2/pods/{id}", ("GET /v2/pods/{id}", "GET /v2/pods")
    return [
        ("end", "8 x 429 on terminate (Retry-After 1 s)", {"http_429": {delete: 8}}, True,
         150.0, None),
        ("end", "terminate and every look answer 500 pages, 5 each",
         {"http_500": {delete: 5, **{r: 5 for r in reads}}, "error_page": True}, True, 150.0,
         None),
        ("end", "terminate accepted, never done", {"terminate_lingers": -1}, False, 60.0, 30.0),
        ("end", "a hung API: terminate and every look held 330 s",
         {"http_delay": {delete: 999, **{r: 999 for r in reads}}, "delay_s": 330.0}, False,
         300.0, None),
    ]


def end_rows(root: Path, provider: str, only: str | None = None) -> list[Row]:
    return [end_row(root, provider, *case) for case in end_cases(provider)
            if only is None or case[0].startswith(only)]


def print_table(rows: list[Row], t0: float, root: Path) -> int:
    """The table every fault script prints; 1 when a row failed."""
    width = max(len(f"{r.area}: {r.case}") for r in rows)
    print(f"\n{'fault':<{width}}  {'figure':<34} {'bound':<22} result")
    for r in rows:
        print(f"{r.area + ': ' + r.case:<{width}}  {r.figure:<34} {r.bound:<22} "
              f"{'pass' if r.ok else 'FAIL'}" + (f"  ({r.note})" if r.note else ""))
    failed = sum(not r.ok for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} rows pass, in {time.monotonic() - t0:.0f} s "
          f"(work dir {root})")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """The end's rows alone: `tplab terminate` against each fault of the end, timed."""
    import argparse
    import tempfile
    p = argparse.ArgumentParser(description="The fault suite's end rows alone: `tplab "
                                "terminate` on a pod of a mock cloud under each fault of the "
                                "end (429 bursts, 500 pages, refused and unfinished destroys, "
                                "a hung API), timed against the bars (gone <= 150 s, a "
                                "sentence <= 300 s). The whole suite: benchmarks/fault_suite.py.")
    p.add_argument("--provider", choices=("runpod", "vast", "both"), default="both")
    p.add_argument("--rows", metavar="AREA", help="only the rows whose area starts with AREA")
    p.add_argument("--keep", metavar="DIR", help="work here and keep everything")
    args = p.parse_args(argv)
    root = Path(args.keep or tempfile.mkdtemp(prefix="tplab-end-"))
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rows: list[Row] = []
    for provider in (("runpod", "vast") if args.provider == "both" else (args.provider,)):
        rows += end_rows(root, provider, args.rows)
    return print_table(rows, t0, root) if rows else 0


if __name__ == "__main__":
    sys.exit(main())

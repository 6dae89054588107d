"""Processes writing the ledger at once never take the total past the cap, and never settle one
authorization twice.

Each race is forced, not hoped for: every process is parked between reading the ledger and
appending to it (``BudgetGuard.after_read``) until all of them have read. Without the lock, all
of them read the same ledger and then all append, so a missing lock fails these tests every
time. With it, only one process is ever inside and the others never arrive: the one inside sees
another blocked on the ledger's lock (the kernel lists it in /proc/locks) and goes on, and from
then on nobody parks; the writes go one after the other. (A park that sees neither ends after
``PARK_S``, then nobody parks either.)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from tplab.money.budget import BudgetError, BudgetGuard, BudgetGuardExceeded
from tplab.money.ledger import Ledger

N_PROCS = 8
PARK_S = 10.0


def _blocked_on(lock: Path) -> bool:
    """Whether a process waits for the flock on ``lock`` (a ``->`` line of /proc/locks)."""
    st = lock.stat()
    ident = f" {os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} "
    return any("->" in line and ident in line
               for line in Path("/proc/locks").read_text().splitlines())


class _Park:
    """The park: ``n`` processes, each parked in its own ``k``-th read until ``n * k`` reads
    have arrived (all of them read the same ledger), unless the lock is seen at work."""

    def __init__(self, ctx, n: int) -> None:
        self.n, self.arrived, self.alone = n, ctx.Value("i", 0), ctx.Value("b", False)

    def __call__(self, lock: Path, reads: list[int]) -> None:
        reads[0] += 1
        with self.arrived.get_lock():
            self.arrived.value += 1
        deadline = time.monotonic() + PARK_S
        while not self.alone.value and self.arrived.value < self.n * reads[0]:
            if _blocked_on(lock) or time.monotonic() > deadline:
                self.alone.value = True  # the lock keeps the others out: nobody parks again
                return
            time.sleep(0.002)


def _guard(path: str, cap: float, park: _Park) -> BudgetGuard:
    guard = BudgetGuard(path, cap_usd=cap)
    reads = [0]
    guard.after_read = lambda: park(guard.ledger.lock_path, reads)
    return guard


def _authorize_worker(path: str, cap: float, amount: float, attempts: int, start, park,
                      results) -> None:
    guard = _guard(path, cap, park)
    start.wait(timeout=20)
    ok = 0
    for _ in range(attempts):
        try:
            guard.authorize(f"lab-{mp.current_process().name}", amount)
            ok += 1
        except BudgetGuardExceeded:
            pass
    results.put(ok)


def _settle_worker(path: str, label: str, auth_id: str, how: str, start, park, results) -> None:
    guard = _guard(path, 5.0, park)
    start.wait(timeout=20)
    try:
        if how == "actual":
            guard.record_actual(label, 0.42, auth_id)
        else:
            guard.release(label, auth_id)
        results.put(how)
    except BudgetError:
        results.put("refused")


def _race(target, n: int, *args) -> list:
    ctx = mp.get_context("fork")
    start, park, results = ctx.Barrier(n), _Park(ctx, n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args[i], start, park, results)) for i in range(n)]
    for p in procs:
        p.start()
    out = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return out


@pytest.mark.parametrize("cap, amount, attempts, fit", [
    (5.00, 0.70, 1, 7),     # one try each: 7 of the 8 fit
    (3.00, 0.10, 6, 30),    # 48 tries at $0.10 against $3.00: exactly 30 fit (no float drift)
])
def test_concurrent_authorizations_never_pass_the_cap(tmp_path, cap, amount, attempts, fit):
    path = tmp_path / "spend.jsonl"
    counts = _race(_authorize_worker, N_PROCS,
                   *[(str(path), cap, amount, attempts)] * N_PROCS)
    assert sum(counts) == fit
    guard = BudgetGuard(path, cap_usd=cap)
    assert guard.held <= cap
    assert guard.held == pytest.approx(fit * amount) and guard.remaining >= 0
    good, damaged = Ledger(path).read()
    assert damaged == [] and len(good) == fit        # no interleaved or torn lines
    assert len({line.data["auth_id"] for line in good}) == fit


@pytest.mark.parametrize("hows", [("actual", "actual"), ("actual", "release"),
                                  ("release", "release")])
def test_one_authorization_is_settled_once(tmp_path, hows):
    """Two clients settle the same hold at once (a lab's own teardown and `tplab terminate`):
    exactly one wins, the other is told there is nothing open."""
    path = tmp_path / "spend.jsonl"
    auth = BudgetGuard(path, cap_usd=5.0).authorize("lab02", 3.0)
    out = _race(_settle_worker, 2, *[(str(path), "lab02", auth, how) for how in hows])
    assert sorted(out).count("refused") == 1, out
    guard = BudgetGuard(path, cap_usd=5.0)
    assert guard.held == 0.0
    assert guard.total_spent == (0.42 if "actual" in out else 0.0)
    kinds = [line.data["kind"] for line in Ledger(path).read()[0]]
    assert len(kinds) == 2  # the authorization and one settlement


def test_threads_of_one_process_are_serialised_too(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    guard = BudgetGuard(tmp_path / "spend.jsonl", cap_usd=1.00)

    def attempt(_: int) -> bool:
        try:
            guard.authorize("thread", 0.15)
            return True
        except BudgetGuardExceeded:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(attempt, range(16))) == 6
    assert guard.held == 0.9

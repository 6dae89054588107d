"""8 processes authorizing at once never take the total past the cap."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from tplab.budget import BudgetGuard, BudgetGuardExceeded
from tplab.ledger import Ledger

N_PROCS = 8


def _worker(path: str, cap: float, amount: float, attempts: int, barrier, results) -> None:
    guard = BudgetGuard(path, cap_usd=cap)
    barrier.wait(timeout=20)
    ok = 0
    for _ in range(attempts):
        try:
            guard.authorize(f"lab-{mp.current_process().name}", amount)
            ok += 1
        except BudgetGuardExceeded:
            pass
    results.put(ok)


def _race(path, cap: float, amount: float, attempts: int) -> list[int]:
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(N_PROCS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(path), cap, amount, attempts, barrier, results))
             for _ in range(N_PROCS)]
    for p in procs:
        p.start()
    counts = [results.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return counts


@pytest.mark.parametrize("cap, amount, attempts, fit", [
    (5.00, 0.70, 1, 7),     # one try each: 7 of the 8 fit
    (3.00, 0.10, 6, 30),    # 48 tries at $0.10 against $3.00: exactly 30 fit (no float drift)
])
def test_concurrent_authorizations_never_pass_the_cap(tmp_path, cap, amount, attempts, fit):
    path = tmp_path / "spend.jsonl"
    counts = _race(path, cap, amount, attempts)
    assert sum(counts) == fit
    guard = BudgetGuard(path, cap_usd=cap)
    assert guard.held <= cap
    assert guard.held == pytest.approx(fit * amount) and guard.remaining >= 0
    good, damaged = Ledger(path).read()
    assert damaged == [] and len(good) == fit        # no interleaved or torn lines
    assert len({line.data["auth_id"] for line in good}) == fit


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

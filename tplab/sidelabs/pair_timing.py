"""Side-by-side timing on the hot path, repeated until its figures are stable or said not to be.

Lab 03's pitfalls: the first call compiles, shapes that change recompile, and a busy machine makes
two separate measurements incomparable. So every side is warmed up first, then timed in rounds
that visit every side, in an order that changes every round (``harness.round_order``), so drift
and a slow moment hit all sides alike. Each side is then a figure like the TP lab's
(``tplab.stats.harness.figure``: median, quartiles, spread, 95 % interval, n, the unstable flag),
and rounds go on until every side's spread is within ``harness.SPREAD_LIMIT`` (after at least
``min_rounds``), or until ``max_rounds`` / ``max_s``, when the figures say they are not stable.

A ratio of two sides is made from the rounds themselves (round ``i``'s a / round ``i``'s b: the
two were measured moments apart), as a figure with its own interval, and is quoted only when both
sides and the ratio are stable (``Ratio.quoted``); otherwise it says why not. Two runs' ratios
agree when their intervals overlap (``agreement``). No torch: the caller hands in callables.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tplab.stats.harness import SPREAD_LIMIT, figure, relative_iqr, round_order

#: fewer rounds than this cannot show a spread: such a figure is never called stable
MIN_JUDGED = 3


#: a round of a fast call lasts at least this long: a shorter one is at the mercy of one
#: scheduler tick (4 ms on this kernel), the way pyperf calibrates its loops
MIN_ROUND_S = 0.05


def per_call_us(fn: Callable[[], object], calls: int) -> Callable[[], float]:
    """A measure: ``calls`` calls of ``fn``, each timed; the round's median µs per call (a call
    descheduled by another process is one slow call, not a slow round)."""
    def measure() -> float:
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e6
    return measure


def calls_for(fn: Callable[[], object], at_least: int, min_round_s: float = MIN_ROUND_S) -> int:
    """How many calls make a round of ``fn`` last ``min_round_s`` (never fewer than
    ``at_least``), from a short trial."""
    t0 = time.perf_counter()
    fn()
    fn()
    each = max((time.perf_counter() - t0) / 2, 1e-7)
    return max(at_least, int(min_round_s / each) + 1)


def _stable(fig: dict[str, Any]) -> bool:
    return fig["n"] >= MIN_JUDGED and not fig["unstable"]


@dataclass
class Ratio:
    """a / b from their paired rounds: the median of the per-round ratios with its 95 % interval,
    quoted only when a, b and the ratio are all stable."""

    a: str
    b: str
    figure: dict[str, Any]
    quoted: bool
    why_not: str = ""

    @property
    def value(self) -> float:
        return float(self.figure["median"])

    @property
    def ci95(self) -> tuple[float, float]:
        lo, hi = self.figure["ci95"]
        return float(lo), float(hi)

    def text(self) -> str:
        """'1.84× [1.79–1.90]' or 'not quoted: eager unstable (spread 37%)'."""
        if not self.quoted:
            return f"not quoted: {self.why_not}"
        lo, hi = self.ci95
        return f"{self.value:.2f}× [{lo:.2f}–{hi:.2f}]"

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "figure": self.figure, "quoted": self.quoted,
                "why_not": self.why_not, "text": self.text()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ratio:
        return cls(str(d["a"]), str(d["b"]), dict(d["figure"]), bool(d["quoted"]),
                   str(d.get("why_not", "")))


@dataclass
class SideBySide:
    """Every side's per-round samples (``unit`` each), how many rounds and why they stopped."""

    name: str
    unit: str
    samples: dict[str, list[float]]
    rounds: int
    seconds: float
    stopped: str
    calls_per_round: int = 0
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.figures = {k: figure(v).to_dict() for k, v in self.samples.items() if v}

    @property
    def stable(self) -> bool:
        return all(_stable(f) for f in self.figures.values())

    def median(self, side: str) -> float:
        return float(self.figures[side]["median"])

    def ratio(self, a: str, b: str) -> Ratio:
        """a / b, round by round."""
        rs = [x / y for x, y in zip(self.samples[a], self.samples[b]) if y > 0]
        fig = figure(rs).to_dict() if rs else {"median": float("nan"), "ci95": [0, 0], "n": 0,
                                                "spread": 0.0, "unstable": True, "note": ""}
        why = [f"{s} {self.figures[s]['note'] or 'too few rounds to judge'}"
               for s in (a, b) if not _stable(self.figures[s])]
        if not why and not _stable(fig):
            why.append(f"the ratio itself {fig['note'] or 'has too few rounds to judge'}")
        return Ratio(a, b, fig, not why, "; ".join(why))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "samples": self.samples,
                "figures": self.figures, "rounds": self.rounds, "seconds": self.seconds,
                "stopped": self.stopped, "stable": self.stable,
                "calls_per_round": self.calls_per_round}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SideBySide:
        return cls(d["name"], d["unit"], {k: list(v) for k, v in d["samples"].items()},
                   int(d["rounds"]), float(d["seconds"]), str(d["stopped"]),
                   int(d.get("calls_per_round") or 0))


def time_side_by_side(name: str, measures: dict[str, Callable[[], float]], *, unit: str = "µs",
                      min_rounds: int = 5, max_rounds: int = 40, max_s: float = 30.0,
                      warmup: int = 2, calls_per_round: int = 0,
                      limit: float = SPREAD_LIMIT) -> SideBySide:
    """Warm every side up (``warmup`` measures each), then measure them in rounds (each round
    every side once, the order rotated) until every side's spread is within ``limit`` after at
    least ``min_rounds`` rounds, or ``max_rounds`` rounds, or ``max_s`` seconds of timing."""
    for _ in range(warmup):
        for m in measures.values():
            m()
    names = list(measures)
    samples: dict[str, list[float]] = {k: [] for k in names}
    t0 = time.perf_counter()
    rounds, stopped = 0, ""
    while True:
        for side in round_order(names, rounds):
            samples[side].append(measures[side]())
        rounds += 1
        elapsed = time.perf_counter() - t0
        if rounds >= max(min_rounds, MIN_JUDGED) and all(
                relative_iqr(v) <= limit for v in samples.values()):
            stopped = f"stable within {limit:.0%} after {rounds} rounds"
            break
        if rounds >= max_rounds or elapsed >= max_s:
            stopped = (f"not stable within {limit:.0%} after {rounds} rounds ({elapsed:.0f} s; "
                       "the machine was busy?)")
            break
    return SideBySide(name, unit, samples, rounds, time.perf_counter() - t0, stopped,
                      calls_per_round)


@dataclass
class _Pending:
    name: str
    unit: str
    calls: int
    measures: dict[str, Callable[[], float]]
    target: dict[str, Any]


@dataclass
class Budget:
    """How the lab's side-by-side timings run: at least ``rounds`` rounds, then until every side
    is stable, at most ``max_rounds`` rounds or ``max_s`` seconds.

    ``deferred``: each timing asked for is only registered (its result dict is filled later) and
    ``run_pending`` times all of them together, every round visiting every side of every timing
    in a rotating order. Each ratio's rounds then span the whole timing, not one second of
    it, so its interval holds the machine's slower moves too (two runs minutes apart differ by
    those, and a one-second interval would call them a disagreement)."""

    calls: int = 200
    rounds: int = 5
    max_rounds: int = 40
    max_s: float = 30.0
    deferred: bool = False
    pending: list[_Pending] = field(default_factory=list)

    def timed(self, name: str, measures: dict[str, Callable[[], float]], unit: str = "µs",
              calls: int | None = None) -> dict[str, Any]:
        n = calls if calls is not None else self.calls
        if self.deferred:
            target: dict[str, Any] = {}
            self.pending.append(_Pending(name, unit, n, measures, target))
            return target
        t = time_side_by_side(name, measures, unit=unit, min_rounds=self.rounds,
                              max_rounds=max(self.rounds, self.max_rounds), max_s=self.max_s,
                              calls_per_round=n)
        return t.to_dict()

    def forwards(self, name: str, sides: dict[str, Callable[[], object]],
                 calls: int | None = None) -> dict[str, Any]:
        """Each side called at least ``calls`` times a round (default ``self.calls``), more when
        that would make a round shorter than ``MIN_ROUND_S``; the round's median per call."""
        n = calls if calls is not None else self.calls
        n = max(calls_for(fn, n) for fn in sides.values())
        return self.timed(name, {k: per_call_us(fn, n) for k, fn in sides.items()}, calls=n)

    def run_pending(self) -> None:
        """Time every registered timing together (each side of each, every round) and fill their
        result dicts."""
        jobs, self.pending = self.pending, []
        if not jobs:
            return
        measures = {f"{i}\t{side}": m for i, job in enumerate(jobs)
                    for side, m in job.measures.items()}
        together = time_side_by_side("all", measures, min_rounds=self.rounds,
                                     max_rounds=max(self.rounds, self.max_rounds),
                                     max_s=self.max_s)
        for i, job in enumerate(jobs):
            samples = {side: together.samples[f"{i}\t{side}"] for side in job.measures}
            t = SideBySide(job.name, job.unit, samples, together.rounds, together.seconds,
                           together.stopped + f", {len(jobs)} timings together",
                           job.calls)
            job.target.update(t.to_dict())


def machine_moved(this_us: float | None, other_us: float | None,
                  limit: float = SPREAD_LIMIT) -> float | None:
    """How far the machine's own speed moved between two runs (their reference loops' medians),
    when it moved past ``limit``; None when it did not, or either run has no reference."""
    if not this_us or not other_us:
        return None
    shift = abs(this_us / other_us - 1)
    return shift if shift > limit else None


#: how far one ratio moved between two `tplab compile` runs on this 2-core VM with both runs'
#: figures stable (docs/measurement.md: 1-8 % over four runs, TinyHead to SDPA): a run's interval
#: holds its own rounds, not the process, allocation and neighbour it happened to get, so a
#: difference within this is not a finding
RUN_TO_RUN = 0.10


def agreement(this: Ratio, other: Ratio, moved: float | None = None) -> str:
    """How two runs' ratio of the same pair compare: 'agree' (their intervals overlap);
    'flagged: ...' when either was not quoted (unstable), when the machine itself moved
    ``moved`` between the runs, or when they are apart by no more than ``RUN_TO_RUN``, this
    machine's run-to-run variation, which no interval within one run can hold; else
    'DISAGREE'."""
    if not this.quoted or not other.quoted:
        return "flagged: unstable"
    (a, b), (c, d) = this.ci95, other.ci95
    if a <= d and c <= b:
        return "agree"
    if moved:
        return f"flagged: the machine moved {moved:.0%} between the runs"
    apart = abs(this.value / other.value - 1)
    if apart <= RUN_TO_RUN:
        return (f"flagged: {apart:.0%} apart, within this machine's run-to-run variation "
                f"(±{RUN_TO_RUN:.0%})")
    return "DISAGREE"

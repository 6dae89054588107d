"""The one fold of the per-token stream: every ``token`` and ``prompt_done`` event, in fixed memory.

Why one: the dashboard's live plot and percentiles, ``tplab run``'s progress line, a replay and
the ``partial`` figures of a lab stopped before its results.json all read the same token stream;
folding it once here means a per-token figure is added in one place and every face agrees.
A lab emits a token event per decoded token per mode (thousands a second on a GPU), and the
p50 / p99 must cover the whole run without keeping the samples: ``LogHistogram`` keeps counts
in log-spaced bins (~1 % relative error); ``ModeTimings`` adds a bounded deque of recent values
for the live plot; ``TokenFold`` holds both modes. Standard library only.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tplab.records.events import Event, PromptDoneEvent, TokenEvent

MODES: tuple[str, ...] = ("single", "tp")


class LogHistogram:
    """Streaming quantiles in fixed memory: counts in log-spaced bins.

    Bin edges grow by ``ratio`` from ``lo``; a quantile is reported as the geometric centre of
    its bin, so its relative error is below ``(ratio - 1) / 2``. Values at or below ``lo`` fall
    in the first bin, values above the last edge in the last one.
    """

    __slots__ = ("lo", "ratio", "_log_lo", "_log_ratio", "counts", "n", "min", "max")

    def __init__(self, lo: float = 1e-3, hi: float = 1e6, ratio: float = 1.02) -> None:
        self.lo = lo
        self.ratio = ratio
        self._log_lo = math.log(lo)
        self._log_ratio = math.log(ratio)
        nbins = int(math.ceil((math.log(hi) - self._log_lo) / self._log_ratio)) + 1
        self.counts = [0] * nbins
        self.n = 0
        self.min = math.inf
        self.max = -math.inf

    def add(self, x: float) -> None:
        if x <= self.lo:
            i = 0
        else:
            i = int((math.log(x) - self._log_lo) / self._log_ratio)
            if i >= len(self.counts):
                i = len(self.counts) - 1
        self.counts[i] += 1
        self.n += 1
        if x < self.min:
            self.min = x
        if x > self.max:
            self.max = x

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 <= q <= 1), or None before the first sample."""
        if self.n == 0:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                centre = math.exp(self._log_lo + (i + 0.5) * self._log_ratio)
                return min(max(centre, self.min), self.max)
        return self.max  # pragma: no cover - counts always sum to n


@dataclass
class ModeTimings:
    """Per-token timings of one decode mode (``single`` or ``tp``)."""

    recent_len: int = 600
    recent: deque[float] = field(init=False)
    hist: LogHistogram = field(default_factory=LogHistogram)
    count: int = 0
    sum_ms: float = 0.0
    prompt: int | None = None
    pos: int | None = None
    prompts_done: int = 0
    # decode steps as results.json counts them (each prompt's prefill step, pos 0, left out)
    decode_count: int = 0
    decode_sum_ms: float = 0.0
    # of which the instrumented TP steps whose all-reduce time was measured
    ar_measured_count: int = 0
    ar_measured_sum_ms: float = 0.0
    ar_measured_token_ms: float = 0.0   # those instrumented steps' own wall time

    def __post_init__(self) -> None:
        self.recent = deque(maxlen=self.recent_len)

    def add(self, ms: float, ar_ms: float, *, pos: int | None = None,
            ar_measured: bool = False, ms_instrumented: float | None = None) -> None:
        self.recent.append(ms)
        self.hist.add(ms)
        self.count += 1
        self.sum_ms += ms
        self.pos = pos
        if pos:  # a decode step, not a prefill
            self.decode_count += 1
            self.decode_sum_ms += ms
            if ar_measured:
                self.ar_measured_count += 1
                self.ar_measured_sum_ms += ar_ms
                # the share is of the instrumented step that timed the all-reduce (its own ms)
                self.ar_measured_token_ms += ms_instrumented if ms_instrumented is not None else ms

    @property
    def last_ms(self) -> float | None:
        return self.recent[-1] if self.recent else None

    @property
    def decode_mean_ms(self) -> float | None:
        return self.decode_sum_ms / self.decode_count if self.decode_count else None

    @property
    def ar_share(self) -> float | None:
        """The all-reduce share of a TP token (ar_ms / token ms) over the measured steps."""
        return (self.ar_measured_sum_ms / self.ar_measured_token_ms
                if self.ar_measured_token_ms > 0 else None)

    @property
    def ar_measured_mean_ms(self) -> float | None:
        return (self.ar_measured_sum_ms / self.ar_measured_count if self.ar_measured_count
                else None)

    @property
    def first_recent_index(self) -> int:
        """The run-wide index of ``recent[0]`` (x axis of a live plot)."""
        return self.count - len(self.recent)

    @property
    def mean_ms(self) -> float | None:
        return self.sum_ms / self.count if self.count else None

    @property
    def ar_ms_per_token(self) -> float | None:
        """All-reduce ms per decode step, as results.json has it: over the instrumented
        pass's steps only (the uninstrumented steps time no collective)."""
        return self.ar_measured_mean_ms

    @property
    def comm_compute_ratio(self) -> float | None:
        """All-reduce ms / the rest of the step's ms, both from the instrumented pass (as
        results.json has it: the uninstrumented pass's ms time a different run)."""
        compute = self.ar_measured_token_ms - self.ar_measured_sum_ms
        return self.ar_measured_sum_ms / compute if self.ar_measured_count and compute > 0 else None

    def p(self, q: float) -> float | None:
        return self.hist.quantile(q)


class TokenFold:
    """Both decode modes' timings, folded from ``token`` and ``prompt_done`` events; what
    ``apply`` does not recognise it leaves alone and says so (returns False)."""

    def __init__(self, recent_len: int = 600) -> None:
        self.modes: dict[str, ModeTimings] = {m: ModeTimings(recent_len=recent_len)
                                              for m in MODES}
        self.tp_matched = 0      # TP prompts whose text matched the single-device one
        self.tp_mismatched = 0

    def apply(self, ev: Event) -> bool:
        """Fold one event; True when it was a token or prompt_done event of a known mode."""
        if isinstance(ev, TokenEvent):
            t = self.modes[ev.mode]
            t.add(ev.ms, ev.ar_ms, pos=ev.pos, ar_measured=ev.ar_measured,
                  ms_instrumented=ev.ms_instrumented)
            t.prompt = ev.prompt
            return True
        if isinstance(ev, PromptDoneEvent) and ev.mode in self.modes:
            self.modes[ev.mode].prompts_done += 1
            if ev.mode == "tp":
                if ev.match is True:
                    self.tp_matched += 1
                elif ev.match is False:
                    self.tp_mismatched += 1
            return True
        return False

    def add(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.apply(ev)

    @property
    def tokens(self) -> int:
        """Token events folded, both modes."""
        return sum(t.count for t in self.modes.values())

    @property
    def measured(self) -> bool:
        """Some decode step was timed (a stopped lab has figures to report)."""
        return any(t.decode_count for t in self.modes.values())

    def partial_figures(self) -> dict[str, Any]:
        """The figures so far, for the manifest's ``partial`` section of a lab that ended
        without results.json."""
        single, tp = self.modes["single"], self.modes["tp"]
        s, t = single.decode_mean_ms, tp.decode_mean_ms
        return {
            "single_tokens": single.decode_count, "tp_tokens": tp.decode_count,
            "single_prompts_done": single.prompts_done, "tp_prompts_done": tp.prompts_done,
            "tp_prompts_matching": self.tp_matched, "tp_prompts_differing": self.tp_mismatched,
            "single_per_token_ms": s, "tp_per_token_ms": t,
            "speedup": (s / t) if (s and t) else None,
            "allreduce_ms_per_token": tp.ar_measured_mean_ms,
            "allreduce_tokens": tp.ar_measured_count,
            "allreduce_share": tp.ar_share,
            "note": "from the live event stream before the lab ended, without results.json; "
                    "per-token means leave out each prompt's prefill step, as results.json does",
        }

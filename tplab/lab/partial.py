"""What a lab measured before it was stopped: the live stream's per-token figures so far.

Why: a lab stopped mid-run (TERMINATE, Ctrl-C, a lost pod) has no results.json, but the stream
already carried hundreds of timed tokens. Throwing them away would make the manifest say "no
figures" about a run that measured plenty. This fold keeps, per decode mode, the count and sum
of the per-token times the way results.json counts them (each prompt's prefill step, ``pos``
0, left out), the in-loop all-reduce time of instrumented TP tokens, and how many prompts
finished and matched. The manifest records these as ``partial`` figures, with their counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from tplab.records.events import Event


@dataclass
class ModeSoFar:
    tokens: int = 0          # decode steps timed (prefill steps not counted)
    sum_ms: float = 0.0
    ar_tokens: int = 0       # of which with the all-reduce time measured (instrumented TP)
    ar_sum_ms: float = 0.0
    prompts_done: int = 0

    @property
    def mean_ms(self) -> float | None:
        return self.sum_ms / self.tokens if self.tokens else None

    @property
    def ar_mean_ms(self) -> float | None:
        return self.ar_sum_ms / self.ar_tokens if self.ar_tokens else None


@dataclass
class PartialFigures:
    modes: dict[str, ModeSoFar] = field(
        default_factory=lambda: {"single": ModeSoFar(), "tp": ModeSoFar()})
    tp_matched: int = 0
    tp_mismatched: int = 0

    def add(self, events: Iterable[Event]) -> None:
        for ev in events:
            if ev.type == "token":
                mode = self.modes.get(ev.fields.get("mode"))
                if mode is None or not ev.fields.get("pos"):
                    continue
                ms = ev.fields.get("ms")
                if isinstance(ms, (int, float)):
                    mode.tokens += 1
                    mode.sum_ms += ms
                ar = ev.fields.get("ar_ms")
                if ev.fields.get("ar_measured") and isinstance(ar, (int, float)):
                    mode.ar_tokens += 1
                    mode.ar_sum_ms += ar
            elif ev.type == "prompt_done":
                mode = self.modes.get(ev.fields.get("mode"))
                if mode is not None:
                    mode.prompts_done += 1
                if ev.fields.get("mode") == "tp":
                    if ev.fields.get("match") is True:
                        self.tp_matched += 1
                    elif ev.fields.get("match") is False:
                        self.tp_mismatched += 1

    @property
    def measured(self) -> bool:
        return any(m.tokens for m in self.modes.values())

    def to_dict(self) -> dict[str, Any]:
        """The figures so far, for the manifest's ``partial`` section."""
        single, tp = self.modes["single"], self.modes["tp"]
        s, t = single.mean_ms, tp.mean_ms
        return {
            "single_tokens": single.tokens, "tp_tokens": tp.tokens,
            "single_prompts_done": single.prompts_done, "tp_prompts_done": tp.prompts_done,
            "tp_prompts_matching": self.tp_matched, "tp_prompts_differing": self.tp_mismatched,
            "single_per_token_ms": s, "tp_per_token_ms": t,
            "speedup": (s / t) if (s and t) else None,
            "allreduce_ms_per_token": tp.ar_mean_ms, "allreduce_tokens": tp.ar_tokens,
            "note": "from the live event stream before the lab ended, without results.json; "
                    "per-token means leave out each prompt's prefill step, as results.json does",
        }

"""One figure of a lab: its value, its unit, its rounding as shown, and how it was taken.

Why a record and not a float: the faces of one lab printed the same measurement at three
roundings ("0.83", "0.908 ms", "0.9"), and where two passes give two figures (TP's latency from
the timed pass, the all-reduce time from the instrumented pass, the split of a token from the
profiled pass) printed them one under the other without a word. A ``Figure`` is shown one way,
``text()`` (three significant digits, a share in whole percent), so the same figure prints the
same characters on every face, and it says which pass measured it (``taken``, one of
``PASSES``; ``tag()`` the short word a narrow face prints), over how many samples (``n``), with
the spread of its passes where there is one, and whether the lab is still running (``so_far``).

Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tplab.records.untrusted import finite

#: the passes a lab's figures come from
TIMED = "timed pass"
INSTRUMENTED = "instrumented pass"
PROFILED = "profiled pass"
PASSES: dict[str, str] = {
    TIMED: "the plain decode, single and TP interleaved prompt by prompt, no timer inside the "
           "collectives: the latencies and the speedup",
    INSTRUMENTED: "a second TP decode with a sync and a timer around every collective: the "
                  "all-reduce time, its share of that pass's token and comm/compute",
    PROFILED: "a few tokens per mode under torch's profiler on every rank, which slows each "
              "token: where a token's time goes (compute, on the wire, waiting, the rest)",
}
#: the short word a narrow face prints for each pass
TAGS: dict[str, str] = {TIMED: "timed", INSTRUMENTED: "instr.", PROFILED: "profiled"}

#: units, as ``text()`` writes them after the number (a ratio has none)
MS, TIMES, SHARE, US, RATIO = "ms", "×", "%", "µs", ""
#: significant digits shown
SIG = 3
#: a figure not measured (yet)
NONE = "—"


def decimals(value: float, sig: int = SIG) -> int:
    """How many decimals show ``value`` to ``sig`` significant digits (none for a value of
    10**sig or more); 9.996 at three is "10.0", not "10.00"."""
    if value == 0 or not math.isfinite(value):
        return max(0, sig - 1)
    exp = math.floor(math.log10(abs(value)))
    d = max(0, sig - 1 - exp)
    if d and abs(round(value, d)) >= 10 ** (exp + 1):  # rounding carried into a new digit
        d -= 1
    return min(d, 6)


def shown(value: float | None, unit: str, sig: int = SIG) -> str:
    """``value`` as a figure of ``unit`` is shown, without the unit: "22.3", "0.0406", "87"."""
    if value is None:
        return NONE
    if unit == SHARE:
        return f"{value * 100:.0f}"
    return f"{value:.{decimals(value, sig)}f}"


@dataclass(frozen=True)
class Figure:
    """One figure of a lab, shown one way everywhere (see the module docstring)."""

    value: float | None
    unit: str
    taken: str
    n: int | None = None            # the samples it summarises (decode steps, tokens)
    spread: float | None = None     # (q3 - q1) / median over the passes, where there is one
    so_far: bool = False            # from the live stream, the lab still running
    sig: int = SIG

    def number(self) -> str:
        """The value at its rounding, without the unit (``NONE`` when there is none)."""
        return shown(self.value, self.unit, self.sig)

    def text(self) -> str:
        """The value at its rounding with its unit: "22.3 ms", "0.0406×", "87%"."""
        if self.value is None:
            return NONE
        return self.number() + (f" {self.unit}" if self.unit in (MS, US) else self.unit)

    def at_rounding(self, value: Any) -> str:
        """Another value (a manifest's field, results.json's) shown as this figure is."""
        v = finite(value)
        return Figure(v, self.unit, self.taken, sig=self.sig).text()

    def rounded(self) -> float | None:
        """The value as shown, as a number (a share as a fraction)."""
        if self.value is None:
            return None
        return float(self.number()) / (100 if self.unit == SHARE else 1)

    def tag(self) -> str:
        """The pass in a word ("timed", "instr.", "profiled"), "so far" added while live."""
        word = TAGS.get(self.taken, self.taken)
        return f"{word}, so far" if self.so_far else word

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "unit": self.unit, "shown": self.text(),
                               "taken": self.taken}
        if self.n is not None:
            out["n"] = self.n
        if self.spread is not None:
            out["spread"] = self.spread
        if self.so_far:
            out["so_far"] = True
        return out

    @classmethod
    def from_dict(cls, obj: Any, unit: str, taken: str) -> Figure:
        """A stored figure (a manifest's ``lab_figures``, the ``figures`` event); what is not
        one gives an empty figure of ``unit``, taken ``taken``."""
        if not isinstance(obj, dict):
            return cls(None, unit, taken)
        n = obj.get("n")
        return cls(finite(obj.get("value")), unit,
                   obj["taken"] if obj.get("taken") in PASSES else taken,
                   n=n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None,
                   spread=finite(obj.get("spread")), so_far=obj.get("so_far") is True)

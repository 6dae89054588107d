"""The parts a lab's snapshot is made of: the log line, the budget, the pod, the running cost.

Why apart from the fold: the snapshot (``snapshot.py``) and the fold (``fold.py``) both use
them, and a view may import them without either. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tplab.cloud.base import GONE_STATES

if TYPE_CHECKING:
    from tplab.money.lab_money import CostFigure

#: where a log line came from, as the log's filter groups them
LOG_SOURCES: dict[str, tuple[str, ...]] = {
    "all": (),                  # every line
    "lab": ("lab", "ui"),      # the orchestrator and the dashboard itself
    "job": ("job",),           # the job's own events on the pod
    "stderr": ("stderr",),     # the pod's job.log (torchrun's stdout and stderr), once fetched
    "problems": (),             # warnings and errors from any source
}


def log_line_matches(line: LogLine, group: str) -> bool:
    """Whether ``line`` belongs to the log filter ``group`` (a key of ``LOG_SOURCES``)."""
    if group == "all":
        return True
    if group == "problems":
        return line.level in ("warning", "error")
    return line.src in LOG_SOURCES.get(group, ())


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int      # running number of this line in the whole lab (not the event seq)
    ts: float
    src: str      # lab | job | ui | stderr
    level: str    # debug | info | warning | error
    text: str


@dataclass
class Budget:
    """The ledger's figures: from the lab's ``budget`` events, or read from the ledger itself
    before any lab ran (``source`` says which)."""

    cap_usd: float | None = None
    spent_usd: float | None = None
    held_usd: float | None = None
    remaining_usd: float | None = None
    authorized_usd: float | None = None
    lab_cap_usd: float | None = None       # what one lab may authorize (the budget config)
    needed_usd: float | None = None        # pre-flight: remaining must be at least this
    source: str | None = None              # "ledger" (read directly) | "lab" (the lab's events)
    problem: str | None = None             # the ledger could not be read: one sentence
    holds: str | None = None               # who holds what of it (open authorizations), in words
    #: the pods not yet proven gone whose labs' money stays held ("pod 4711"), in words
    held_for: str | None = None
    damaged_lines: int = 0                 # ledger lines that are not entries (left out)

    @property
    def damaged_note(self) -> str:
        """One short line on the ledger's damaged lines ("" when there are none)."""
        n = self.damaged_lines
        if not n:
            return ""
        return f"⚠ {n} damaged ledger line{'s' if n > 1 else ''} left out: tplab budget"

    @property
    def preflight_ok(self) -> bool | None:
        if self.remaining_usd is None or self.needed_usd is None:
            return None
        return self.remaining_usd + 1e-9 >= self.needed_usd


@dataclass
class Instance:
    pod_id: str | None = None
    provider: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    spot: bool | None = None
    state: str | None = None
    state_since: float | None = None
    usd_per_hr: float | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    uptime_s: float | None = None
    uptime_ts: float | None = None

    @property
    def gone(self) -> bool:
        return self.state is not None and self.state.upper() in GONE_STATES


@dataclass
class Cost:
    """The lab's cost figure as its money owner said it last (``LabMoney.cost``): an
    estimate while the pod may bill, the billed amount once the provider billed it."""

    accrued_usd: float | None = None
    usd_per_hr: float | None = None
    seconds_left: float | None = None
    ts: float | None = None
    what: str = "estimate"                 # "estimate" | "billed"
    ran_s: float | None = None             # the pod's life the figure counts
    ended_at: float | None = None          # epoch s the provider showed the pod gone

    @property
    def billed(self) -> bool:
        return self.what == "billed"

    def figure(self) -> CostFigure | None:
        """The figure as its owner made it (``CostFigure``, which every face prints through
        its ``text()``); None before the lab said any."""
        from tplab.money.lab_money import BILLED, ESTIMATE, CostFigure
        if self.accrued_usd is None:
            return None
        return CostFigure(self.accrued_usd, BILLED if self.billed else ESTIMATE,
                          self.usd_per_hr, self.ran_s, self.ended_at)

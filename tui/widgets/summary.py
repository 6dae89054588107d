"""The summary strip of the narrow layout: what must stay on screen at 80×24.

Three lines, no border: the pod (MOCK when it is one) and its state; the budget left in dollars
with a bar that reads without colour; the lab's figures (its record, ``state.figures``: the
timed pass's ms/token single and TP and speedup, the instrumented pass's all-reduce share, each
pass named, "so far" while the lab runs) and the stage. The plots, the log and the full figures
are one key away (the view switch).
"""

from __future__ import annotations

from rich.text import Text

from tplab.viewmodel.fold import LabState
from tui.widgets.budget_panel import budget_bar
from tui.format import DASH, duration, ended_text, per_hour, usd
from tplab.cloud.registry import label as cloud_label
from tui.widgets.instance import STATE_STYLE, mock_tag
from tui.widgets.panel import StatePanel


def _pod_line(state: LabState, plan: str) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if state.mock:
        t.append_text(mock_tag())
        t.append(" ")
    i = state.instance
    if i.pod_id is None:
        t.append("no pod yet", style="dim")
        if plan:
            t.append(f" · Start rents {plan}", style="dim")
        return t
    cloud = f"{cloud_label(i.provider)} " if i.provider else ""  # the cloud that ran the lab
    t.append(f"{cloud}pod {i.pod_id} ")
    t.append(i.state or DASH, style=STATE_STYLE.get((i.state or "").upper(), "bold"))
    c = state.cost
    rate = c.usd_per_hr if c.usd_per_hr is not None else i.usd_per_hr
    if i.gone:  # from GONE on: when it ended and what it cost, not a clock still counting
        cost = state.figures.cost
        t.append(f" {ended_text(c.ended_at or i.state_since, 'at')} · "
                 f"{cost.text() if cost is not None else DASH}")
        return t
    if i.state:
        t.append(f" {duration(state.time_in_state())}")
    t.append(f" · {per_hour(rate)} · so far {usd(c.accrued_usd)}")
    if state.done:  # the lab ended and the provider has not shown the pod gone
        t.append(" · NOT proven gone: money held", style="bold red")
    return t


def _budget_line(state: LabState, width: int) -> Text:
    b = state.budget
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("budget ", style="bold")
    t.append(f"{usd(b.remaining_usd)} left", style="bold green")
    t.append(f" of {usd(b.cap_usd)} ")
    if b.problem:
        t.append(f"⚠ {b.problem}", style="bold yellow")
        return t
    n = b.damaged_lines  # said on the same line: the strip's three lines stay three
    damaged = f" ⚠ {n} damaged ledger line{'s' if n > 1 else ''}" if n else ""
    bar_w = max(12, min(36, width - t.cell_len - len(damaged) - 1))
    t.append_text(budget_bar(b.cap_usd, b.spent_usd, b.held_usd, bar_w))
    t.append(damaged, style="bold yellow")
    return t


def _timing_line(state: LabState, width: int = 78) -> Text:
    """The lab's figures (its record, ``state.figures``): the timed pass's latencies and
    speedup, the instrumented pass's all-reduce share, each pass named; then where the lab is.
    Where the width is short, the status is said shorter (the action bar below says the stage
    in full), then the speedup (the ratio of the two latencies shown) is left to the Timings
    view."""
    words = _status_words(state)
    tries = [(True, w) for w in words] + [(False, w) for w in words]
    for speedup, status in tries:
        line = _figures_line(state, speedup, status)
        if line.cell_len <= width:
            return line
    return line


def _figures_line(state: LabState, speedup: bool, status: str) -> Text:
    f = state.figures
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("timed so far " if f.so_far and f.measured else "timed ", style="bold")
    t.append("single ", style="dim")
    t.append(f.single_ms.number(), style="bold cyan")
    t.append(" tp ", style="dim")
    t.append(f.tp_ms.number(), style="bold magenta")
    t.append(" ms")
    if speedup and f.speedup.value is not None:
        t.append(f" · speedup {f.speedup.text()}")
    if f.allreduce_share.value is not None:
        t.append(" · ")
        t.append("instr. ", style="dim")
        t.append(f"AR {f.allreduce_share.text()}")
    t.append(" · ", style="dim")
    t.append(status, style="bold")
    return t


def _status_words(state: LabState) -> list[str]:
    """Where the lab is, from the longest way of saying it to the shortest."""
    if state.done:
        return [state.done_status or "ENDED"]
    if state.starting:
        return ["starting"]
    stage = state.stage or "idle"
    if state.job_stage and not state.idle:
        return [f"stage {stage} › {state.job_stage}", f"{stage} › {state.job_stage}", stage]
    return [f"stage {stage}", stage]


class SummaryStrip(StatePanel):
    DEFAULT_CSS = """
    SummaryStrip { border: none; padding: 0 1; height: 3; background: $panel; }
    """
    #: set by the app: what Start would rent
    plan_text: str = ""

    def render_state(self, state: LabState) -> Text:
        width = self.content_size.width or 78
        out = _pod_line(state, self.plan_text)
        out.append("\n")
        out.append_text(_budget_line(state, width))
        out.append("\n")
        out.append_text(_timing_line(state, width))
        return out

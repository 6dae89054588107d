"""The summary strip of the narrow layout: what must stay on screen at 80×24.

Three lines, no border: the pod (MOCK when it is one) and its state; the budget left in dollars
with a bar that reads without colour; the current ms/token single and TP, the speedup and the
stage. The plots, the log and the full figures are one key away (the view switch).
"""

from __future__ import annotations

from rich.text import Text

from tplab.viewmodel.fold import LabState
from tplab.viewmodel.tokens import share_text
from tui.widgets.budget_panel import budget_bar
from tui.format import DASH, cost_text, duration, ended_text, ms, usd
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
    if state.done and i.gone:  # when it ended and what it cost, not a clock still counting
        t.append(f" {ended_text(c.ended_at or i.state_since, 'at')} · {cost_text(c)}")
        return t
    if i.state:
        t.append(f" {duration(state.time_in_state())}")
    t.append(f" · {usd(rate, 3)}/h · so far {usd(c.accrued_usd, 4)}")
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


def _timing_line(state: LabState) -> Text:
    s, tp = state.timings["single"], state.timings["tp"]
    t = Text(no_wrap=True, overflow="ellipsis")
    r = state.results or {}
    single, multi = r.get("single_per_token_ms"), r.get("tp_per_token_ms")
    if isinstance(single, (int, float)) and isinstance(multi, (int, float)):
        t.append("mean ms/token ", style="bold")  # the job's own figures, from every sample
    else:
        single = s.recent[-1] if s.recent else None
        multi = tp.recent[-1] if tp.recent else None
        t.append("ms/token ", style="bold")
    t.append("single ", style="dim")
    t.append(ms(single), style="bold cyan")
    t.append(" tp ", style="dim")
    t.append(ms(multi), style="bold magenta")
    sp = state.results.get("speedup") if state.results else None
    if sp is None and s.mean_ms and tp.mean_ms:
        sp = s.mean_ms / tp.mean_ms
    if isinstance(sp, (int, float)):
        t.append(f" · speedup {sp:.2f}×")
    share = share_text(tp.ar_share)
    if share:
        t.append(f" · {share}")
    t.append(" · ", style="dim")
    if state.done:
        t.append(state.done_status or "ENDED", style="bold")
    elif state.starting:
        t.append("starting", style="bold")
    else:
        t.append(f"stage {state.stage or 'idle'}", style="bold")
        if state.job_stage and not state.idle:
            t.append(f" › {state.job_stage}")
    return t


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
        out.append_text(_timing_line(state))
        return out

"""Budget: the dollar cap and where it stands, as figures and one bar — from the first paint.

Before any lab runs, the figures are read from the ledger itself (``tplab.viewmodel.ledger_view``,
standard library only), so the one number a user must know before Start is on screen at once;
once a lab runs they are BudgetGuard's own (``budget`` events), and after it ends the ledger is
read again. Spent is recorded spending, held is open authorizations (money promised to labs in
flight), remaining is what a new lab may still authorize.

The bar reads without colour: spent is ``█``, held ``▓``, remaining ``░``, and the share left is
written beside it. Damaged ledger lines (left out of the figures, listed by ``tplab budget``)
get one line of their own under the bar, before a lab, during it and after it.
"""

from __future__ import annotations

from rich.text import Text

from tplab.viewmodel.fold import LabState
from tui.format import DASH, usd
from tui.widgets.panel import StatePanel, rows

SPENT, HELD, FREE = "█", "▓", "░"


def budget_bar(cap: float | None, spent: float | None, held: float | None, width: int) -> Text:
    """``width`` cells: the bar (spent █ red, held ▓ yellow, remaining ░ green) and "NN% left"."""
    width = max(8, width)
    if not cap or spent is None:
        return Text(FREE * width, style="dim")
    left = max(0.0, cap - max(0.0, spent) - max(0.0, held or 0.0))
    suffix = f" {int(100 * left / cap)}% left"  # rounded down: never more than there is
    cells = max(4, width - len(suffix))
    spent_c = min(cells, round(cells * max(0.0, spent) / cap))
    held_c = min(cells - spent_c, round(cells * max(0.0, held or 0.0) / cap))
    bar = Text(no_wrap=True)
    bar.append(SPENT * spent_c, style="bold red")
    bar.append(HELD * held_c, style="bold yellow")
    bar.append(FREE * (cells - spent_c - held_c), style="green")
    bar.append(suffix, style="bold")
    return bar


def held_text(held: float | None, held_for: str | None) -> Text:
    """The held figure, and for whom when a pod's end is not proven (money not free yet)."""
    t = Text(usd(held))
    if held_for:
        t.append(f" · {held_for}", style="bold yellow")
    return t


def this_lab(state: LabState) -> Text:
    """What this lab may spend: its authorization once made, else the lab cap and whether the
    pre-flight rule (remaining ≥ lab cap + buffer) would pass."""
    b = state.budget
    if b.authorized_usd is not None and not state.idle:
        return Text(f"{usd(b.authorized_usd)} authorized")
    if b.lab_cap_usd is None:
        return Text("not authorized yet" if state.stage in (None, "preflight") else DASH)
    t = Text(f"cap {usd(b.lab_cap_usd)} · needs {usd(b.needed_usd)} left ")
    ok = b.preflight_ok
    if ok is True:
        t.append("✓", style="bold green")
    elif ok is False:
        t.append("✗ would be refused", style="bold red")
    return t


class BudgetPanel(StatePanel):
    TITLE = "Budget"

    def render_state(self, state: LabState) -> Text:
        b = state.budget
        text = rows([
            ("cap", usd(b.cap_usd)),
            (Text("spent", style="bold red"), usd(b.spent_usd)),
            (Text("held", style="bold yellow"), held_text(b.held_usd, b.held_for)),
            (Text("remaining", style="bold green"), Text(usd(b.remaining_usd), style="bold")),
            ("this lab", this_lab(state)),
        ])
        text.append("\n")
        if b.problem:
            text.append(f"⚠ {b.problem}", style="bold yellow")
        else:
            text.append_text(budget_bar(b.cap_usd, b.spent_usd, b.held_usd,
                                        self.content_size.width or 30))
        self.set_class(bool(b.damaged_note), "-damaged")  # one more line: the panel grows
        if b.damaged_note:
            text.append(f"\n{b.damaged_note}", style="bold yellow")
        return text

    def title_for(self, state: LabState) -> str:
        src = state.budget.source
        where = "mock ledger" if state.mock else "ledger"
        if src == "ledger":
            return f"Budget · {where} now"
        return f"Budget · {where}" if state.mock else "Budget"

    def on_mount(self) -> None:
        super().on_mount()
        self.border_subtitle = "█ spent ▓ held ░ left"

"""Budget: the dollar cap and where it stands, as figures and one bar.

The figures are BudgetGuard's (``budget`` events): spent is recorded spending, held is open
authorizations (money reserved for labs in flight), remaining is what a new lab may still
authorize. The bar shows the three side by side so "held" is visible as money already promised.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from rich.console import Group

from tplab.labstate import LabState
from tui.format import DASH, usd
from tui.panel import StatePanel


def budget_bar(cap: float | None, spent: float | None, held: float | None, width: int) -> Text:
    """A bar of ``width`` cells: spent (red), held (yellow), remaining (green)."""
    width = max(4, width)
    if not cap or spent is None:
        return Text("░" * width, style="dim")
    spent_c = min(width, round(width * max(0.0, spent) / cap))
    held_c = min(width - spent_c, round(width * max(0.0, held or 0.0) / cap))
    free_c = width - spent_c - held_c
    bar = Text()
    bar.append("█" * spent_c, style="bold red")
    bar.append("█" * held_c, style="bold yellow")
    bar.append("█" * free_c, style="green")
    return bar


class BudgetPanel(StatePanel):
    TITLE = "Budget"

    def render_state(self, state: LabState):
        b = state.budget
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold")
        t.add_column(justify="right")
        t.add_row("cap", usd(b.cap_usd))
        t.add_row(Text("spent", style="red"), usd(b.spent_usd, 4))
        t.add_row(Text("held", style="yellow"), usd(b.held_usd, 4))
        t.add_row(Text("remaining", style="green"), usd(b.remaining_usd, 4))
        auth = usd(b.authorized_usd) if b.authorized_usd is not None else (
            "not yet" if state.phase in (None, "preflight") else DASH)
        t.add_row("this lab", f"authorized {auth}")
        width = max(4, self.content_size.width or 30)
        return Group(t, budget_bar(b.cap_usd, b.spent_usd, b.held_usd, width))

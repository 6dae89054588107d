"""Budget: the dollar cap and where it stands, as figures and one bar.

The figures are BudgetGuard's (``budget`` events): spent is recorded spending, held is open
authorizations (money reserved for labs in flight), remaining is what a new lab may still
authorize. The bar shows the three side by side so "held" is visible as money already promised.
"""

from __future__ import annotations

from rich.text import Text

from tplab.lab.faces.state import LabState
from tui.format import DASH, usd
from tui.panel import StatePanel, rows


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

    def render_state(self, state: LabState) -> Text:
        b = state.budget
        if b.authorized_usd is not None:
            auth = f"{usd(b.authorized_usd)} authorized"
        else:
            auth = "not authorized yet" if state.phase in (None, "preflight") else DASH
        text = rows([
            ("cap", usd(b.cap_usd)),
            (Text("spent", style="bold red"), usd(b.spent_usd, 4)),
            (Text("held", style="bold yellow"), usd(b.held_usd, 4)),
            (Text("remaining", style="bold green"), usd(b.remaining_usd, 4)),
            ("this lab", auth),
        ])
        text.append("\n")
        text.append_text(budget_bar(b.cap_usd, b.spent_usd, b.held_usd,
                                    self.content_size.width or 30))
        return text

"""The Log panel: the lab's stages, warnings, the job's lines and the pod's stderr, filtered.

A one-line filter bar (click a name, or press ``f`` to step through them) chooses what the
scrolling view below shows: everything, the lab's own lines (orchestrator and dashboard), the
job's events, the pod's stderr (its job.log, fetched when the lab ends), or only warnings and
errors. Counts per filter are on the bar, so a warning hidden by the filter is still seen.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tplab.viewmodel.parts import LOG_SOURCES, log_line_matches
from tplab.viewmodel.fold import LabState
from tui.widgets.log_view import LogView

GROUPS: tuple[str, ...] = tuple(LOG_SOURCES)
TITLE = "Log · UTC · whole lines, scroll back"


class LogPanel(Vertical):
    DEFAULT_CSS = """
    LogPanel { border: round $primary 60%; height: 1fr; width: 1fr; padding: 0 0 0 1; }
    LogPanel > #log-filter { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.view = LogView(id="log-view")
        self.bar = Static(id="log-filter")
        self._counted_seq = -1
        self._counts: dict[str, int] = {}
        self._bar_shown = ""

    def compose(self) -> ComposeResult:
        yield self.bar
        yield self.view

    def on_mount(self) -> None:
        self.border_title = TITLE

    @property
    def group(self) -> str:
        return self.view.group

    def set_group(self, group: str) -> None:
        self.view.set_group(group)
        self._draw_bar()

    def next_group(self) -> str:
        group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        self.set_group(group)
        return group

    def show(self, state: LabState) -> None:
        if state.log_seq != self._counted_seq or not self._counts:
            self._counted_seq = state.log_seq
            lines = list(state.log)
            self._counts = {g: sum(1 for ln in lines if log_line_matches(ln, g)) for g in GROUPS}
            self._draw_bar()
        self.view.show(state)

    def _draw_bar(self) -> None:
        parts = []
        for g in GROUPS:
            n = self._counts.get(g, 0)
            label = f"{g} {n}"
            if g == self.group:
                parts.append(f"[b]▸[reverse]{label}[/reverse][/b]")
            elif g == "problems" and n:
                parts.append(f"[@click=app.log_filter('{g}')][b yellow u]{label}[/][/]")
            else:
                parts.append(f"[@click=app.log_filter('{g}')][u]{label}[/u][/]")
        markup = " ".join(parts) + "  [dim]f: next[/dim]"
        if markup != self._bar_shown:
            self._bar_shown = markup
            self.bar.update(markup)

    def reset(self) -> None:
        self._counted_seq = -1

"""The one thing every dashboard panel does: redraw itself from a LabState snapshot.

Panels never read the event stream. The app folds events into ``LabState`` as they arrive and
calls ``show(state)`` on every panel from a timer (4–30 Hz), so a burst of thousands of events
costs one redraw, not thousands. Panels build plain ``rich.text.Text`` (rows of label and
value), not Tables: under a stream of token events the stats panel changes on every tick, and
Text is several times cheaper for Textual to lay out. An update whose text did not change is
skipped.
"""

from __future__ import annotations

import time
from typing import Iterable

from rich.text import Text
from textual.widgets import Static

from tplab.viewmodel.fold import LabState

Cell = str | Text


def rows(items: Iterable[tuple[Cell, Cell]], label_width: int = 12) -> Text:
    """Label/value rows: labels bold and padded to ``label_width`` cells."""
    out = Text()
    first = True
    for label, value in items:
        if not first:
            out.append("\n")
        first = False
        lab = label if isinstance(label, Text) else Text(label, style="bold")
        lab = lab.copy()
        lab.pad_right(max(0, label_width - lab.cell_len))
        out.append_text(lab)
        out.append(" ")
        out.append_text(value if isinstance(value, Text) else Text(value))
    return out


class StatePanel(Static):
    """A bordered panel whose content is rebuilt from the state by ``render_state``."""

    DEFAULT_CSS = """
    StatePanel { border: round $primary 60%; padding: 0 1; height: auto; }
    """
    # Give each panel a fixed height in CSS: then an update never needs a relayout of the
    # screen (``layout=False`` below), which would re-render every widget.
    #: the panel's border title
    TITLE = ""
    #: at most this many redraws a second (None: every time the state changed). Figures that
    #: change with every token are unreadable above a few Hz, and each redraw of a dense panel
    #: is work the frame that answers a key press may have to wait for.
    MAX_HZ: float | None = None
    _last_update = 0.0

    _state: LabState | None = None
    _shown: Text | None = None

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def show(self, state: LabState, force: bool = False) -> None:
        self._state = state
        if self.MAX_HZ and not force:
            now = time.monotonic()
            if now - self._last_update < 1.0 / self.MAX_HZ:
                return
            self._last_update = now
        title = self.title_for(state)
        if title != self.border_title:
            self.border_title = title
        text = self.render_state(state)
        if text == self._shown:
            return
        self._shown = text
        self.update(text, layout=False)

    def on_resize(self) -> None:
        # content that depends on the width (bars) is rebuilt once the size is known
        if self._state is not None:
            self._shown = None
            self.show(self._state, force=True)

    def render_state(self, state: LabState) -> Text:
        raise NotImplementedError

    def title_for(self, state: LabState) -> str:
        """The border title for this state (``TITLE`` unless a panel says more)."""
        return self.TITLE

    def redo(self) -> None:
        """Draw again on the next ``show`` even if the state did not change (something the
        panel shows besides the state changed)."""
        self._shown = None
        if self._state is not None:
            self.show(self._state, force=True)

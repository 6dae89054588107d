"""The one thing every dashboard panel does: redraw itself from a LabState snapshot.

Panels never read the event stream. The app folds events into ``LabState`` as they arrive and
calls ``show(state)`` on every panel from a timer (4–30 Hz), so a burst of thousands of events
costs one redraw, not thousands.
"""

from __future__ import annotations

from textual.widgets import Static

from tplab.labstate import LabState


class StatePanel(Static):
    """A bordered panel whose content is rebuilt from the state by ``render_state``."""

    DEFAULT_CSS = """
    StatePanel { border: round $primary 60%; padding: 0 1; height: auto; }
    """
    #: the panel's border title
    TITLE = ""

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    _state: LabState | None = None

    def show(self, state: LabState) -> None:
        self._state = state
        self.update(self.render_state(state))

    def on_resize(self) -> None:
        # content that depends on the width (bars) is rebuilt once the size is known
        if self._state is not None:
            self.update(self.render_state(self._state))

    def render_state(self, state: LabState):  # -> rich renderable
        raise NotImplementedError

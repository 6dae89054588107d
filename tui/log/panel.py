"""Log of lab phases, warnings and the pod's stderr.

LabState keeps a bounded deque of lines, each with a running number; this widget appends only
the lines it has not written yet (RichLog itself is bounded by ``max_lines``), so a redraw costs
the new lines only. If it fell behind by more than the deque holds, it says how many it skipped.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import RichLog

from tplab.labstate import LabState, LogLine

_LEVEL_STYLE = {"debug": "dim", "info": "", "warning": "yellow", "error": "bold red"}


def format_line(line: LogLine) -> Text:
    t = Text(time.strftime("%H:%M:%S ", time.gmtime(line.ts)), style="dim")
    t.append(f"{line.src:<3} ", style="dim cyan")
    t.append(line.text, style=_LEVEL_STYLE.get(line.level, ""))
    return t


class LogPanel(RichLog):
    DEFAULT_CSS = """
    LogPanel { border: round $primary 60%; height: 1fr; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(max_lines=2000, wrap=False, markup=False, auto_scroll=True, **kw)
        self._last = 0

    def on_mount(self) -> None:
        self.border_title = "Log · phases and remote stderr (UTC)"

    def reset(self) -> None:
        self.clear()
        self._last = 0

    def show(self, state: LabState) -> None:
        if state.log_seq == self._last:
            return
        lines = state.log
        if lines and lines[0].seq > self._last + 1:
            self.write(Text(f"… {lines[0].seq - self._last - 1} lines skipped", style="dim"))
        fresh = []
        for line in reversed(lines):  # only the tail is new: stop at the first written line
            if line.seq <= self._last:
                break
            fresh.append(line)
        for line in reversed(fresh):
            self.write(format_line(line))
        self._last = state.log_seq

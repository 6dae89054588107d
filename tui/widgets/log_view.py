"""The log's scrolling text: whole lines, wrapped under their time and source, newest at the
bottom, with scrollback as deep as ``LabState.log`` keeps (bounded, 2,000 lines).

Why a ScrollView of our own (not RichLog): the log follows a stream, and a widget that re-lays
out the screen for every line written makes key presses wait. Here the lines are wrapped once,
when they arrive (or when the width or the filter changes), into Strips; ``render_line`` only
picks the visible ones, and the virtual size changes at most once per redraw tick. It follows
the tail unless the user has scrolled up; scrolling back to the bottom follows again.

Warnings and errors stand out without colour: ``!`` marks a warning line, ``✗`` an error line
(and they are yellow / bold red where colour shows).
"""

from __future__ import annotations

import time

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tplab.viewmodel.parts import LogLine, log_line_matches
from tplab.viewmodel.fold import LabState

LEVEL_MARK = {"debug": ("·", "dim"), "info": (" ", ""), "warning": ("!", "bold yellow"),
              "error": ("✗", "bold red")}
_TEXT_STYLE = {"debug": "dim", "info": "", "warning": "yellow", "error": "bold red"}
PREFIX = 16  # "HH:MM:SS src ! "


def line_rows(line: LogLine, width: int, console) -> list[Strip]:
    """One log line as rows of ``width`` cells: time, source and mark, then the text wrapped
    with a hanging indent."""
    mark, mark_style = LEVEL_MARK.get(line.level, (" ", ""))
    head = Text(time.strftime("%H:%M:%S ", time.gmtime(line.ts)), style="dim")
    head.append(f"{line.src[:6]:<6}", style="dim cyan")
    head.append(f"{mark} ", style=mark_style)
    body_w = max(10, width - head.cell_len)
    body = Text(line.text, style=_TEXT_STYLE.get(line.level, ""))
    wrapped = body.wrap(console, body_w, overflow="fold") or [Text("")]
    rows = []
    pad = Text(" " * head.cell_len)
    for i, part in enumerate(wrapped):
        row = (head if i == 0 else pad).copy()
        row.append_text(part)
        segs = list(row.render(console))
        rows.append(Strip(segs).adjust_cell_length(width))
    return rows


class LogView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LogView { height: 1fr; overflow-y: scroll; overflow-x: hidden; scrollbar-size-vertical: 1; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.group = "all"
        self._rows: list[tuple[int, Strip]] = []  # (line seq, row)
        self._last_seq = 0
        self._width = 0
        self._state: LabState | None = None
        self.lines_shown = 0

    @property
    def following(self) -> bool:
        return self.scroll_offset.y >= self.max_scroll_y - 1

    def set_group(self, group: str) -> None:
        if group != self.group:
            self.group = group
            self._rebuild()

    def show(self, state: LabState) -> None:
        if state is not self._state:
            self._state = state
            self._rebuild()
            return
        width = self._content_width()
        if width != self._width:
            self._rebuild()
        elif state.log_seq != self._last_seq:
            self._append(state)

    def on_resize(self) -> None:
        if self._state is not None and self._content_width() != self._width:
            self._rebuild()

    def _content_width(self) -> int:
        return max(20, self.scrollable_content_region.width or self.size.width or 80)

    def _rebuild(self) -> None:
        self._rows.clear()
        self._last_seq = 0
        self.lines_shown = 0
        self._width = self._content_width()
        if self._state is not None:
            self._append(self._state, force_follow=True)
        else:
            self._resize(True)

    def _append(self, state: LabState, force_follow: bool = False) -> None:
        follow = force_follow or self.following
        console = self.app.console
        first_kept = state.log[0].seq if state.log else 0
        if self._rows and self._rows[0][0] < first_kept:  # the state dropped its oldest lines
            self._rows = [r for r in self._rows if r[0] >= first_kept]
        new: list[LogLine] = []
        for line in reversed(state.log):
            if line.seq <= self._last_seq:
                break
            new.append(line)
        for line in reversed(new):
            if log_line_matches(line, self.group):
                self.lines_shown += 1
                for row in line_rows(line, self._width, console):
                    self._rows.append((line.seq, row))
        self._last_seq = state.log_seq
        self._resize(follow)

    def _resize(self, follow: bool) -> None:
        self.virtual_size = Size(self._width, len(self._rows))
        if follow:
            self.scroll_to(y=max(0, len(self._rows) - self.scrollable_content_region.height),
                           animate=False, immediate=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if 0 <= index < len(self._rows):
            return self._rows[index][1].crop_extend(0, width, None)
        return Strip([Segment(" " * width, Style())], width)

"""Log of lab phases, warnings and the pod's stderr: the most recent lines that fit.

Why not Textual's RichLog: every ``write`` changes a scrolling widget's virtual size, which
makes Textual lay out and re-render the whole screen; with the pod's stderr streaming, that
was the most expensive thing the dashboard did (and it made TERMINATE's first frame wait).
LabState already keeps a bounded deque of lines, so this panel simply shows its tail, cropped
to the panel's width, with a fixed size (no relayout). The complete stream is in the lab's
``stream.jsonl``.
"""

from __future__ import annotations

import time

from rich.text import Text

from tplab.lab.faces.state import LabState, LogLine
from tui.panel import StatePanel

_LEVEL_STYLE = {"debug": "dim", "info": "", "warning": "yellow", "error": "bold red"}


def format_line(line: LogLine) -> Text:
    t = Text(time.strftime("%H:%M:%S ", time.gmtime(line.ts)), style="dim")
    t.append(f"{line.src:<3} ", style="dim cyan")
    t.append(line.text, style=_LEVEL_STYLE.get(line.level, ""))
    return t


class LogPanel(StatePanel):
    TITLE = "Log · phases and remote stderr (UTC)"
    DEFAULT_CSS = """
    LogPanel { height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def render_state(self, state: LabState) -> Text:
        height = max(1, self.content_size.height or 20)
        lines = list(state.log)[-height:]
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(lines):
            if i:
                out.append("\n")
            out.append_text(format_line(line))
        return out

    def reset(self) -> None:
        self._shown = None

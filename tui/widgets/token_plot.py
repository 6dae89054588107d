"""The live per-token plot: single-device and TP ms per token over the most recent tokens.

Drawn with plotext through textual-plotext (plotext pinned below 6: plotext 6 removed the
internals textual-plotext imports), built off the UI loop (``tui.widgets.plot.ThreadedPlot``). It
plots the last ``2 × width`` tokens of each mode (a braille cell is two dots wide, so more
would not show) and asks for a new build at most ``max_hz`` times a second. The latest figure
of each mode is in the border's subtitle; too small to draw, it shows them as numbers.
"""

from __future__ import annotations

import statistics
import time

from rich.text import Text
from textual_plotext.plot import Plot

from tplab.figures.figure import MS, shown
from tplab.viewmodel.fold import LabState
from tui.widgets.plot import ThreadedPlot

_COLORS = {"single": "cyan", "tp": "magenta"}
TITLE = "Live timings · ms per token (recent)"
#: once the lab ended: the same figures, no longer live
ENDED_TITLE = "Timings · ms per token (the last ones)"


def latest_text(state: LabState) -> str:
    """'latest single 0.800 · tp 19.9 ms': each mode's latest token, at the figures' rounding."""
    parts = []
    for mode in ("single", "tp"):
        recent = state.timings[mode].recent
        if recent:
            parts.append(f"{mode} {shown(recent[-1], MS)}")
    return ("latest " + " · ".join(parts) + " ms") if parts else ""


def tp_legend(state: LabState) -> str:
    """The TP series' name: "tp (instr. AR 85%)", the share the strip shows (the record's,
    over the instrumented pass's tokens; never one token's)."""
    share = state.figures.allreduce_share
    return f"tp (instr. AR {share.text()})" if share.value is not None else "tp"


class TokenPlot(ThreadedPlot):
    DEFAULT_CSS = """
    TokenPlot { border: round $primary 60%; height: 1fr; min-height: 5; }
    """

    def __init__(self, max_hz: float = 4.0, **kw) -> None:
        super().__init__(**kw)
        self.max_hz = max_hz
        self.drawn_counts: tuple[int, int] | None = None
        self._last_request = 0.0

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = TITLE
        self.set_spec(())

    def show(self, state: LabState, force: bool = False) -> None:
        title = ENDED_TITLE if state.done else TITLE
        if self.border_title != title:
            self.border_title = title
        counts = (state.timings["single"].count, state.timings["tp"].count)
        now = time.monotonic()
        if counts == self.drawn_counts or (not force and now - self._last_request
                                           < 1.0 / self.max_hz):
            return
        self._last_request = now
        self.drawn_counts = counts
        self.border_subtitle = latest_text(state)
        series = tuple((tp_legend(state) if mode == "tp" else mode, t.count, tuple(t.recent))
                       for mode, t in state.timings.items() if t.recent)
        self.set_spec(series)

    def draw(self, plt: Plot, spec, width: int, height: int) -> None:
        plt.xlabel("token #")
        plt.ylabel("ms")
        keep = max(20, 2 * max(1, width - 8))  # braille: two dots per column
        for mode, count, recent in spec:
            ys = list(recent[-keep:])
            x0 = count - len(ys)
            plt.plot(list(range(x0, x0 + len(ys))), ys, label=mode,
                     color=_COLORS[mode.split(" ")[0]],
                     marker="braille")

    def empty(self, spec) -> bool:
        return not spec

    def numbers(self, spec, width: int, height: int) -> Text:
        if not spec:
            return Text("no tokens yet: the job decodes once the pod is up and the bundle "
                        "uploaded", style="dim")
        out = Text(f"{'ms/token':<8}{'last':>8}{'median':>8}{'max':>8}", style="bold")
        for mode, _count, recent in spec:
            out.append("\n")
            base = mode.split(" ")[0]  # the legend's "tp (instr. AR 38%)" is the strip's
            out.append(f"{base:<8}", style=f"bold {_COLORS[base]}")
            out.append(f"{shown(recent[-1], MS):>8}{shown(statistics.median(recent), MS):>8}"
                       f"{shown(max(recent), MS):>8}")
        out.append(f"\nover the last {max(len(r) for _, _, r in spec)} tokens "
                   f"(too small to plot)", style="dim")
        return out

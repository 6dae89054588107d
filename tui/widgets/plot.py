"""A plotext chart that is built in a thread and rendered from a cache.

Why: plotext rebuilds the whole chart (a character matrix, then ANSI text) on every render, and
textual-plotext's ``PlotextPlot`` does that inside ``render()`` on the UI loop, for every
refresh, including the relayouts other widgets cause. A 100×17 braille chart of a few hundred
points costs tens of milliseconds (far more on a loaded machine), so under a stream of token
events the plots alone would make key presses wait. Here ``render()`` returns the last built
text; a build runs in a worker thread when the data, the size or the theme changed, at most one
at a time per plot, and the newest request wins (requests made during a build are coalesced).

The chart is also turned into Strips (the lines Textual composites) in that thread and served
by ``render_line``, so a refresh of the plot costs nothing on the UI loop either: converting a
braille chart's per-character styles is as slow as building it.

Subclasses implement ``draw(plt, spec, width, height)``: ``spec`` is an immutable snapshot of what to plot,
taken on the UI thread by ``set_spec``. Below ``MIN_PLOT`` (columns, rows) a chart is an unreadable
sliver of braille, so ``numbers(spec, width, height)`` is shown instead: the same facts as text.
"""

from __future__ import annotations

import io
import threading
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual.strip import Strip
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from tui.from_thread import post_from_thread

#: plotext keeps some module-level state while building: one build at a time, app-wide
_BUILD_LOCK = threading.Lock()


class ThreadedPlot(PlotextPlot):
    #: below this many (columns, rows) of content the plot shows ``numbers`` instead
    MIN_PLOT: tuple[int, int] = (40, 8)

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._strips: list[Strip] = []
        self._spec: Any = None
        self._spec_id = 0
        self._built_key: tuple | None = None
        self._building = False
        self.builds = 0

    # -- what subclasses provide
    def draw(self, plt: Plot, spec: Any, width: int, height: int) -> None:
        """Put ``spec`` on ``plt`` (runs in a worker thread: touch no widget state)."""
        raise NotImplementedError

    def numbers(self, spec: Any, width: int, height: int) -> Text:
        """The plot's facts as text, for a size too small to draw it (runs in the worker)."""
        return Text("too small to plot", style="dim")

    def too_small(self, width: int, height: int) -> bool:
        return width < self.MIN_PLOT[0] or height < self.MIN_PLOT[1]

    def empty(self, spec: Any) -> bool:
        """Nothing to plot yet: ``numbers`` says so instead of drawing bare axes."""
        return False

    # -- API
    @property
    def busy(self) -> bool:
        """A build is running or due (tests wait for this to clear before a screenshot)."""
        return self._building or (self.size.area > 0 and self._key() != self._built_key)

    def set_spec(self, spec: Any) -> None:
        self._spec = spec
        self._spec_id += 1
        self._kick()

    # -- Textual hooks
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y < len(self._strips):
            strip = self._strips[y]
            return strip if strip.cell_length == width else strip.adjust_cell_length(width)
        return Strip.blank(width, self.rich_style)  # a style, as Textual's filters need

    def on_resize(self) -> None:
        self._kick()

    def _register_theme(self, app_theme_name: str) -> None:
        super()._register_theme(app_theme_name)
        self._kick()

    # -- building
    def _key(self) -> tuple:
        return (self._spec_id, self.size.width, self.size.height, self.app.theme)

    def _kick(self) -> None:
        if self._building or not self.is_mounted or self.size.area == 0:
            return
        key = self._key()
        if key == self._built_key:
            return
        self._building = True
        self._build(self._spec, key, self._get_plotext_theme_name(key[3]))

    @work(thread=True, group="plots", exit_on_error=False)
    def _build(self, spec: Any, key: tuple, theme: str) -> None:
        try:
            if self.too_small(key[1], key[2]) or self.empty(spec):
                text = self.numbers(spec, key[1], key[2])
            else:
                text = self._plotext_text(spec, key, theme)
        except Exception as exc:  # noqa: BLE001 - shown in place of the chart
            text = Text(f"plot failed: {exc}", style="red")
        strips = _to_strips(text, key[1], key[2])
        post_from_thread(self, self._built, strips, key)  # never waits on the UI loop

    def _plotext_text(self, spec: Any, key: tuple, theme: str) -> Text:
        with _BUILD_LOCK:
            plt = self.plt
            plt.clear_data()
            plt.clear_figure()
            plt.plotsize(key[1], key[2])
            plt._set_size(key[1], key[2])  # as PlotextPlot.render does (plotext quirk)
            plt.theme(theme)
            self.draw(plt, spec, key[1], key[2])
            return Text.from_ansi(plt.build())

    def _built(self, strips: list[Strip], key: tuple) -> None:
        quiet = getattr(self.app, "input_quiet", None)
        wait = quiet() if callable(quiet) else 0.0
        if wait > 0:  # a key was just pressed: its answer goes first, this chart after it
            self.set_timer(wait, lambda: self._built(strips, key))
            return
        self._strips = strips
        self._built_key = key
        self._building = False
        self.builds += 1
        self.refresh()
        self._kick()  # newer data or a new size arrived during the build


def _to_strips(text: Text, width: int, height: int) -> list[Strip]:
    """Lay ``text`` out as ``height`` lines of ``width`` cells (thread-safe: own Console)."""
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    lines = console.render_lines(text, console.options.update(width=width, height=height),
                                 pad=True)
    # the padding comes without a style; Textual's filters (NO_COLOR's monochrome) need one
    plain = Style.null()
    return [Strip([seg if seg.style is not None else Segment(seg.text, plain, seg.control)
                   for seg in line], width) for line in lines[:height]]

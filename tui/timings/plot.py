"""The live per-token plot: single-device and TP ms per token over the last few hundred tokens.

Drawn with plotext through textual-plotext (plotext is pinned below 6: plotext 6 removed the
internals textual-plotext imports). Plotext rebuilds the whole chart on each render, so the plot
is only refreshed when new tokens arrived since the last redraw.
"""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tplab.labstate import LabState

_COLORS = {"single": "cyan", "tp": "magenta"}


class TokenPlot(PlotextPlot):
    DEFAULT_CSS = """
    TokenPlot { border: round $primary 60%; height: 1fr; min-height: 8; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._drawn: tuple[int, int] | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = "Live timings · ms per token"
        self._draw(None)

    def show(self, state: LabState) -> None:
        key = (state.timings["single"].count, state.timings["tp"].count)
        if key != self._drawn:
            self._draw(state)
            self._drawn = key

    def _draw(self, state: LabState | None) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.xlabel("token #")
        plt.ylabel("ms")
        if state is not None:
            for mode, t in state.timings.items():
                if not t.recent:
                    continue
                x0 = t.first_recent_index
                plt.plot(list(range(x0, x0 + len(t.recent))), list(t.recent),
                         label=mode, color=_COLORS[mode], marker="braille")
        self.refresh()

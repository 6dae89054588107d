"""Scaling curve: the latency model's single-device vs TP per-token time over d_model.

The model lives in ``tplab/scaling/latency.py`` (torch-free); this panel only asks it for a curve and
its crossover and plots them, with this run's measured point once the job's result exists
(and the curve recalibrated on that result, when the model can). The predicted crossover is the
lab's one ``CrossoverBand`` (``tplab.scaling.crossover``, made by ``tplab.lab.prediction``): its
range, or "none below N", in the border title with whether it is the profile's (before the run)
or calibrated from this run, and its ends as vertical lines; once the lab has made its figures
(``tplab.figures.lab_figures``), the title is that record's crossover, and the run's point its
timed pass's figures. The d_model sweep's measured points
are added as each ``sweep_point`` event arrives (single ``o``, TP ``x``), and the measured
crossover (``*``, interpolated between them) beside the predicted one. The computation runs in
a thread worker so a slow model never stalls the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import work
from textual_plotext.plot import Plot

from tplab.records.dmodel import measured_crossover
from tplab.viewmodel.fold import LabState
from tui.from_thread import post_from_thread
from tui.widgets.plot import ThreadedPlot

D_LO, D_HI, N_POINTS = 32.0, 16384.0, 60
#: d_model values the numbers view lists when the panel is too small to plot
TABLE_D = (64, 256, 1024, 2048, 4096, 16384)


@dataclass(frozen=True)
class ScalingCurve:
    d_models: list[float]
    single_ms: list[float]
    tp_ms: list[float]
    crossover: float | None
    label: str
    band: Any = None  # tplab.scaling.crossover.CrossoverBand

    def band_lines(self) -> list[float]:
        """Where the predicted crossover is drawn: its band's ends (or its one end, "none below
        N"), else the point."""
        b = self.band
        if b is not None and b.kind != "point":
            ends = (b.lo, b.hi) if b.kind == "range" else (b.below,)
        else:
            ends = (self.crossover,)
        return [e for e in ends if e and D_LO <= e <= D_HI]


class ScalingSource:
    """Where the curve comes from: ``tplab.scaling.latency`` with the hardware profile the lab's own
    artifacts use for this GPU type (the CPU profile for ``--mock``, whose pods decode on the
    CPU), at the lab's TP degree."""

    def __init__(self, gpu_type: str = "", world_size: int = 2, mock: bool = False) -> None:
        self.gpu_type = gpu_type
        self.world_size = world_size
        self.mock = mock

    @classmethod
    def for_config(cls, config: Any) -> ScalingSource:
        return cls(str(getattr(config, "gpu_type", "") or ""),
                   int(getattr(config, "gpus", 2) or 2), bool(getattr(config, "mock", False)))

    def compute(self, results: dict[str, Any] | None = None) -> ScalingCurve:
        """The lab's own prediction (``tplab.lab.prediction``, the one its PNG and manifest are
        written from): calibrated on the run's ``results`` when they allow it."""
        from tplab.lab.prediction import curve_points, predict_lab  # torch-free by contract

        pred = predict_lab(results, gpu_type=self.gpu_type, gpus=self.world_size, mock=self.mock)
        if pred is None:
            raise RuntimeError("no hardware profile for this lab's GPU type")
        ds, single, tp = curve_points(pred, D_LO, D_HI, N_POINTS)
        label = pred.profile.name + (" calibrated" if pred.calibrated else " profile")
        return ScalingCurve(ds, single, tp, pred.crossover_d_model, label, pred.band)


Sweep = tuple[tuple[float, float, float], ...]


def sweep_points(state: LabState) -> Sweep:
    """(d_model, single ms, tp ms) of each d_model sweep point received so far, in order."""
    return tuple((float(p.d_model), float(p.single_ms), float(p.tp_ms))
                 for p in state.sweep_points if p.outputs_match)


def sweep_crossover(sweep: Sweep) -> float | None:
    """The measured crossover of the points so far (None while TP has not caught up)."""
    return measured_crossover([{"d_model": d, "single_ms": s, "tp_ms": t, "outputs_match": True}
                               for d, s, t in sweep])[0]


def measured_point(state: LabState) -> tuple[float, float, float] | None:
    """(d_model, single ms, tp ms) of this run: the lab's figures (the timed pass's), once the
    job's result gave them."""
    f = state.figures
    if not state.results or f.so_far or state.d_model is None:
        return None
    if f.single_ms.value is None or f.tp_ms.value is None:
        return None
    return float(state.d_model), f.single_ms.value, f.tp_ms.value


class ScalingPanel(ThreadedPlot):
    DEFAULT_CSS = """
    ScalingPanel { border: round $primary 60%; width: 1fr; height: 1fr; }
    """

    def __init__(self, source: ScalingSource | None = None, **kw) -> None:
        super().__init__(**kw)
        self.source = source
        self.curve: ScalingCurve | None = None
        self.problem: str | None = None
        self._calibrated = False
        self._gen = 0
        self.pending = 0  # computations not back yet (tests wait for 0)
        self._point: tuple[float, float, float] | None = None
        self._sweep: Sweep = ()
        self._lab_crossover: Any = None  # tplab.figures.lab_figures.Crossover

    @property
    def busy(self) -> bool:
        return self.pending > 0 or super().busy

    def on_mount(self) -> None:
        super().on_mount()
        self._titles()
        self._draw()
        if self.source is not None:
            self._compute(None)

    def set_source(self, source: ScalingSource | None) -> None:
        """Another lab's hardware (a past lab opened, a replay): recompute the curve."""
        self.source = source
        self.curve = None
        self.reset()
        if source is not None:
            self._compute(None)

    def _titles(self) -> None:
        """The crossover in the border title (it never gets cut inside the chart), the
        profile and the legend in the subtitle."""
        c = self.curve
        if c is None:
            self.border_title = "Scaling · ms/token over d_model"
            self.border_subtitle = self.problem or ""
            return
        if self._lab_crossover is not None:  # the lab's own, once its figures are made
            cross = f"crossover {self._lab_crossover.short()}"
        elif c.band is not None:
            cross = f"crossover {c.band.short()}"
        else:
            cross = (f"crossover ≈{c.crossover:,.0f}" if c.crossover and D_LO <= c.crossover <= D_HI
                     else "no crossover")
        if self._sweep:
            m = sweep_crossover(self._sweep)
            cross = (cross.replace("crossover", "predicted") + " · measured "
                     + (f"≈{m:,.0f}" if m else "none yet"))
        self.border_title = f"Scaling · {cross}"
        self.border_subtitle = c.label + (" · ● this run" if self._point else "") + (
            f" · o x sweep ({len(self._sweep)})" if self._sweep else "")

    def reset(self) -> None:
        self._calibrated = False
        self._point = None
        self._sweep = ()
        self._lab_crossover = None
        self._draw()

    def show(self, state: LabState) -> None:
        point = measured_point(state)
        sweep = sweep_points(state)
        cross = state.lab_figures.crossover if state.lab_figures is not None else None
        if point != self._point or sweep != self._sweep or cross != self._lab_crossover:
            self._point = point
            self._sweep = sweep
            self._lab_crossover = cross
            self._titles()
            self._draw()
        if point and not self._calibrated and self.source is not None:
            self._calibrated = True
            self._compute(state.results)

    def _compute(self, results: dict[str, Any] | None) -> None:
        self._gen += 1
        self.pending += 1
        self._compute_worker(results, self._gen)

    @work(thread=True, group="scaling", exit_on_error=False)
    def _compute_worker(self, results: dict[str, Any] | None, gen: int) -> None:
        """Runs in a thread; the newest request wins (an older, slower one is ignored)."""
        source = self.source
        if source is None:  # the source went away before this worker ran
            return
        try:
            curve, problem = source.compute(results), None
        except ImportError:
            curve, problem = None, "the scaling model (tplab.scaling.latency) is not installed"
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            curve, problem = None, f"scaling model failed: {exc}"
        post_from_thread(self, self._set_curve, curve, problem, gen)

    def _set_curve(self, curve: ScalingCurve | None, problem: str | None, gen: int) -> None:
        self.pending -= 1
        if gen != self._gen:
            return
        if curve is not None or self.curve is None:
            self.curve = curve
        self.problem = problem
        self._titles()
        self._draw()

    def _draw(self) -> None:
        self.set_spec((self.curve, self._point, self.problem, self._sweep))

    def draw(self, plt: Plot, spec, width: int, height: int) -> None:
        curve, point, problem, sweep = spec
        if curve is not None or point is not None or sweep:
            plt.xscale("log")  # plotext's log scale fails on an empty plot
            plt.yscale("log")
        plt.xlabel("d_model")
        plt.ylabel("ms/token")
        if curve is not None:
            plt.plot(curve.d_models, curve.single_ms, label="single", color="cyan",
                     marker="braille")
            plt.plot(curve.d_models, curve.tp_ms, label="tp", color="magenta", marker="braille")
            for end in curve.band_lines():
                plt.vline(end, color="yellow")
        elif problem:
            plt.title(problem)
        if sweep:
            plt.scatter([d for d, _, _ in sweep], [s for _, s, _ in sweep], color="cyan",
                        marker="o")
            plt.scatter([d for d, _, _ in sweep], [t for _, _, t in sweep], color="magenta",
                        marker="x")
            m = sweep_crossover(sweep)
            if m is not None:
                near = min(sweep, key=lambda p: abs(p[0] - m))
                plt.scatter([m], [near[1]], color="green", marker="*")
        if point is not None:
            d, s, t = point
            plt.scatter([d], [s], color="cyan", marker="●")
            plt.scatter([d], [t], color="magenta", marker="●")

    def empty(self, spec) -> bool:
        return spec[0] is None and spec[1] is None and not spec[3]

    def numbers(self, spec, width: int, height: int) -> Text:
        curve, point, problem, sweep = spec
        if curve is None:
            if self.source is None:
                return Text("no scaling model for this lab", style="dim")
            return Text(problem or "computing the curve…", style="dim")
        out = Text(f"{'d_model':>7}{'single':>9}{'tp':>9}", style="bold")
        if curve.band is not None:
            out.append(f"\ncrossover {curve.band.text()}", style="bold")
        for d in TABLE_D:
            i = min(range(len(curve.d_models)), key=lambda k: abs(curve.d_models[k] - d))
            out.append(f"\n{curve.d_models[i]:>7,.0f}{curve.single_ms[i]:>9.3g}"
                       f"{curve.tp_ms[i]:>9.3g}")
        if point is not None:
            d, s, t = point
            out.append(f"\n● this run: d_model {d:,.0f}, single {s:.3g}, tp {t:.3g} ms",
                       style="bold")
        for d, s, t in sweep:
            out.append(f"\nmeasured {d:>6,.0f}{s:>9.3g}{t:>9.3g}", style="bold")
        out.append("\n(too small to plot)", style="dim")
        return out

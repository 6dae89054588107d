"""Scaling curve: the latency model's single-device vs TP per-token time over d_model.

The model lives in ``tplab/scaling.py`` (torch-free); this panel only asks it for a curve and
its crossover and plots them, with this run's measured point once the job's result exists
(and the curve recalibrated on that result, when the model can). The computation runs in a
thread worker so a slow model never stalls the UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from textual import work
from textual_plotext import PlotextPlot

from tplab.labstate import LabState

D_MODELS: tuple[int, ...] = tuple(2 ** k for k in range(6, 15))  # 64 … 16384


@dataclass(frozen=True)
class ScalingCurve:
    d_models: list[int]
    single_ms: list[float]
    tp_ms: list[float]
    crossover: float | None
    label: str


class ScalingSource:
    """Where the curve comes from: ``tplab.scaling`` with a hardware profile and a TP degree."""

    def __init__(self, profile: str | None = None, world_size: int = 2) -> None:
        self.profile_name = profile
        self.world_size = world_size

    @classmethod
    def for_config(cls, config: Any) -> "ScalingSource":
        return cls(getattr(config, "gpu_type", None), int(getattr(config, "gpus", 2) or 2))

    def compute(self, results: dict[str, Any] | None = None) -> ScalingCurve:
        """The curve (calibrated on ``results`` when given). Raises ImportError when the
        scaling model is not installed."""
        from tplab import scaling  # torch-free by contract

        profile = scaling.load_profile(self.profile_name)
        label = str(getattr(profile, "name", self.profile_name or "default"))
        if results:
            profile = scaling.calibrate(profile, results)
            label += " (calibrated)"
        points = scaling.curve(profile, list(D_MODELS), self.world_size)
        d, single, tp = _columns(points)
        cross = scaling.crossover_d_model(profile, self.world_size)
        return ScalingCurve(d, single, tp, float(cross) if cross else None, label)


def _columns(points: Any) -> tuple[list[int], list[float], list[float]]:
    """Accept the model's curve as rows (dicts or objects) with d_model/single_ms/tp_ms."""
    d, s, t = [], [], []
    for p in points:
        get = p.get if isinstance(p, dict) else (lambda k, _p=p: getattr(_p, k, None))
        d.append(int(get("d_model")))
        s.append(float(get("single_ms")))
        t.append(float(get("tp_ms")))
    return d, s, t


def measured_point(state: LabState) -> tuple[int, float, float] | None:
    """(d_model, single ms, tp ms) of this run, from the job's result."""
    r = state.results
    if not r or state.d_model is None:
        return None
    try:
        return state.d_model, float(r["single"]["mean_ms"]), float(r["tp"]["mean_ms"])
    except (KeyError, TypeError, ValueError):
        return None


class ScalingPanel(PlotextPlot):
    DEFAULT_CSS = """
    ScalingPanel { border: round $primary 60%; width: 1fr; height: 1fr; }
    """

    def __init__(self, source: ScalingSource | None = None, **kw) -> None:
        super().__init__(**kw)
        self.source = source
        self.curve: ScalingCurve | None = None
        self.problem: str | None = None
        self._calibrated = False
        self._point: tuple[int, float, float] | None = None

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = "Scaling · per-token ms over d_model"
        self._draw()
        if self.source is not None:
            self._compute(None)

    def reset(self) -> None:
        self._calibrated = False
        self._point = None
        self._draw()

    def show(self, state: LabState) -> None:
        point = measured_point(state)
        if point != self._point:
            self._point = point
            self._draw()
        if point and not self._calibrated and self.source is not None:
            self._calibrated = True
            self._compute(state.results)

    @work(thread=True, exclusive=True, group="scaling", exit_on_error=False)
    def _compute(self, results: dict[str, Any] | None) -> None:
        try:
            curve, problem = self.source.compute(results), None  # type: ignore[union-attr]
        except ImportError:
            curve, problem = None, "the scaling model (tplab.scaling) is not installed"
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            curve, problem = None, f"scaling model failed: {exc}"
        self.app.call_from_thread(self._set_curve, curve, problem)

    def _set_curve(self, curve: ScalingCurve | None, problem: str | None) -> None:
        if curve is not None or self.curve is None:
            self.curve = curve
        self.problem = problem
        self._draw()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.xlabel("d_model (log2)")
        plt.ylabel("ms/token")
        c = self.curve
        if c is not None:
            xs = [math.log2(d) for d in c.d_models]
            plt.plot(xs, c.single_ms, label="single", color="cyan", marker="braille")
            plt.plot(xs, c.tp_ms, label="tp", color="magenta", marker="braille")
            if c.crossover:
                plt.vline(math.log2(c.crossover), color="yellow")
                plt.text(f"crossover ≈{c.crossover:,.0f}", math.log2(c.crossover),
                         max(c.single_ms + c.tp_ms), color="yellow")
            plt.xticks(xs, [str(d) for d in c.d_models])
            plt.title(c.label)
        elif self.problem:
            plt.title(self.problem)
        if self._point is not None:
            d, s, t = self._point
            plt.scatter([math.log2(d)], [s], color="cyan", marker="●", label="this run single")
            plt.scatter([math.log2(d)], [t], color="magenta", marker="●", label="this run tp")
        self.refresh()

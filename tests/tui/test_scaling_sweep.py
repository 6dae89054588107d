"""The dashboard's scaling panel draws the d_model sweep's points as they arrive, with the measured
crossover beside the predicted one."""

from __future__ import annotations

from tests.synthetic_lab import measured_point
from tplab.records.events import EventWriter, SweepPointEvent
from tplab.viewmodel.fold import LabState
from tui.widgets.scaling_panel import ScalingCurve, ScalingPanel, sweep_crossover, sweep_points


class _Plt:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name):
        return lambda *a, **kw: self.calls.append((name, a, kw))


def _state(*points: tuple[int, float, float]) -> LabState:
    s = LabState()
    w = EventWriter(src="job")
    for d, single, tp in points:
        s.apply(w.make(SweepPointEvent(d_model=d, skipped=False,
                                       point=measured_point(d, single, tp))))
    return s


def test_points_and_the_measured_crossover_are_drawn_as_they_arrive():
    one = sweep_points(_state((64, 1.0, 3.0)))
    assert one == ((64.0, 1.0, 3.0),) and sweep_crossover(one) is None
    both = sweep_points(_state((64, 1.0, 3.0), (1024, 40.0, 20.0)))
    cross = sweep_crossover(both)
    assert cross is not None and 64 < cross < 1024
    curve = ScalingCurve([32.0, 16384.0], [1.0, 100.0], [2.0, 60.0], 700.0, "cpu-shm")
    plt = _Plt()
    ScalingPanel.draw(None, plt, (curve, None, None, both), 80, 20)
    scatters = [(a, kw["marker"]) for name, a, kw in plt.calls if name == "scatter"]
    assert scatters[0][0] == ([64.0, 1024.0], [1.0, 40.0]) and scatters[0][1] == "o"
    assert scatters[1][0] == ([64.0, 1024.0], [3.0, 20.0]) and scatters[1][1] == "x"
    assert scatters[2][0][0] == [cross] and scatters[2][1] == "*"
    assert any(name == "vline" and a[0] == 700.0 for name, a, _ in plt.calls)  # predicted
    text = ScalingPanel.numbers(None, (curve, None, None, both), 40, 5).plain
    assert "measured  1,024       40       20" in text

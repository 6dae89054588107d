"""The record of a lab's figures: each figure made once, shown one way, with the pass that took
it; the same record read back from the event and the manifest; every face given the record
prints the same characters for the same figure."""

from __future__ import annotations

import io
import json

import pytest

from tests.synthetic_lab import ScriptOptions, lab_script
from tplab.figures.figure import INSTRUMENTED, MS, SHARE, TIMED, TIMES, Figure, \
    decimals, shown
from tplab.figures.lab_figures import (FIGURES, MEASURED, PREDICTED, LabFigures, crossover_of,
                                       from_manifest)
from tplab.money.lab_money import BILLED, CostFigure
from tplab.records.events import FiguresEvent, ResultEvent
from tplab.scaling.crossover import CrossoverBand
from tplab.viewmodel.fold import LabState


def _results(**over):
    r = {"outputs_match": True, "world_size": 2, "comm": "gloo",
         "single_per_token_ms": 0.9076534, "tp_per_token_ms": 22.331630, "speedup": 0.0406443,
         "allreduce_ms_per_token": 18.478813, "comm_compute_ratio": 6.780164,
         "single": {"per_token_ms": {"n": 198, "mean": 0.9076534, "p50": 0.854752,
                                     "p99": 1.797041},
                    "passes": {"mean": {"spread": 0.0246}}},
         "tp": {"per_token_ms": {"n": 198, "mean": 22.331630, "p50": 21.2, "p99": 44.87},
                "instrumented_per_token_ms": {"n": 198, "mean": 21.204235},
                "passes": {"mean": {"spread": 0.043}}}}
    r.update(over)
    return r


def test_a_figure_is_shown_to_three_significant_digits_and_a_share_in_whole_percent():
    assert [shown(v, MS) for v in (0.9076534, 22.33163, 15.04, 1400.4, 0.040644)] == [
        "0.908", "22.3", "15.0", "1400", "0.0406"]
    assert decimals(9.996) == 1 and shown(9.996, MS) == "10.0"  # a carry is one digit fewer
    assert shown(0.8715, SHARE) == "87" and shown(None, MS) == "—"
    assert Figure(22.33163, MS, TIMED).text() == "22.3 ms"
    assert Figure(0.0406443, TIMES, TIMED).text() == "0.0406×"
    assert Figure(0.8715, SHARE, INSTRUMENTED).text() == "87%"
    f = Figure(22.33163, MS, TIMED, so_far=True)
    assert f.tag() == "timed, so far" and f.rounded() == 22.3
    assert f.at_rounding(22.29) == f.text() and f.at_rounding(22.4) != f.text()


def test_the_record_of_a_run_names_the_pass_of_each_figure():
    f = LabFigures.from_results(_results())
    assert {name: f.figure(name).taken for name in FIGURES} == {
        name: taken for name, (_unit, taken, _label) in FIGURES.items()}
    assert f.tp_ms.taken == TIMED and f.allreduce_ms.taken == INSTRUMENTED
    assert f.tp_ms.n == 198 and f.tp_ms.spread == pytest.approx(0.043)
    # the all-reduce's share is of the pass that timed it: the instrumented pass's own token
    assert f.allreduce_share.value == pytest.approx(18.478813 / 21.204235)
    assert f.allreduce_text() == "18.5 ms of a 21.2 ms token"
    rows = dict(f.rows())
    assert rows["TP per token (timed pass)"] == "22.3 ms"
    assert rows["all-reduce (instrumented pass)"] == "18.5 ms of a 21.2 ms token, 87% of it"
    assert not f.so_far and f.cost is None and f.crossover is None


def test_the_record_reads_back_whole_from_its_dict_and_refuses_what_is_not_one():
    band = CrossoverBand("cpu-gloo", "calibrated", 1400.4, 1117.7, 1527.9, 65536.0, 400, 0.0,
                         "bootstrap")
    made = LabFigures.from_results(
        _results(), cost=CostFigure(0.003694, BILLED, 0.7, 19.0, 1.0e9),
        crossover=crossover_of(_results(), band, measured_on="2 CPU processes (gloo)"))
    back = LabFigures.from_dict(json.loads(json.dumps(made.to_dict())))
    assert back == made
    stored = made.to_dict()
    assert stored["tp_ms"]["shown"] == "22.3 ms" and stored["tp_ms"]["taken"] == TIMED
    assert stored["cost"]["shown"] == "$0.0037 billed"
    assert stored["crossover"]["shown"].startswith("d_model 1,118–1,528")
    for bad in (None, [], {"tp_ms": 1}, {name: {} for name in list(FIGURES)[:-1]}):
        assert LabFigures.from_dict(bad) is None


def test_the_crossover_is_the_measured_one_when_resolved_else_the_models_where_it_says_where():
    band = CrossoverBand("cpu-gloo", "calibrated", 1400.4, 1117.7, 1527.9, 65536.0, 400, 0.0, "")
    sweep = _results(d_model_sweep=[{}], measured_crossover_d_model=700.0,
                     measured_crossover_reason="")
    c = crossover_of(sweep, band)
    assert (c.d_model, c.source, c.predicted_d_model) == (700.0, MEASURED, 1400.4)
    unresolved = {**sweep, "measured_crossover_interval": {"resolved": False, "note": "wide"}}
    c = crossover_of(unresolved, band)
    assert (c.d_model, c.source) == (1400.4, PREDICTED) and "wide" in c.measured_note
    none_below = CrossoverBand("cpu-gloo", "calibrated", None, 3000.0, None, 65536.0, 400, 0.4, "")
    c = crossover_of(_results(), none_below)
    assert c.d_model is None and c.source is None and c.short() == none_below.short()


def test_a_live_record_is_the_stream_so_far_and_a_finished_one_the_labs_own():
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=10))
    s = LabState()
    result_at = next(i for i, e in enumerate(events) if isinstance(e, ResultEvent))
    s.apply_many(events[:result_at])
    live = s.figures
    assert live.so_far and live.tp_ms.so_far and live.tp_ms.tag() == "timed, so far"
    assert live.tp_ms.value == pytest.approx(s.timings["tp"].decode_mean_ms)
    assert live.allreduce_share.value == pytest.approx(s.timings["tp"].ar_share)
    s.apply(events[result_at])  # the job's own figures
    assert not s.figures.so_far
    assert s.figures.tp_ms.value == events[result_at].results["tp_per_token_ms"]
    s.apply_many(events[result_at + 1:])  # the lab's record, its cost billed
    said = next(e for e in events if isinstance(e, FiguresEvent))
    assert s.lab_figures is not None and s.figures.to_dict() == said.figures
    assert s.figures.cost.what == BILLED and s.figures.cost.text() == s.cost.figure().text()


def test_a_manifest_without_the_record_gives_one_from_its_seed_fields():
    m = {"single_gpu_per_token_ms": 0.9076534, "tp_per_token_ms": 22.33163, "speedup": 0.0406,
         "allreduce_ms_per_token": 18.48, "actual_cost_usd": 0.0123, "cost_is": "billed",
         "predicted_crossover_d_model": 1953.0}
    f = from_manifest(m)
    assert f is not None and f.tp_ms.text() == "22.3 ms" and f.single_ms.text() == "0.908 ms"
    assert f.cost.text() == "$0.0123 billed" and f.crossover.short() == "≈1,953"
    made = LabFigures.from_results(_results())
    assert from_manifest({**m, "lab_figures": made.to_dict()}) == made
    assert from_manifest("not a manifest") is None


def test_every_face_given_one_record_prints_each_figure_the_same():
    """The headless table, the dashboard's strip, Timings panel and plot legend, the lesson
    notes and the hand-in's README: each figure's text, the same characters everywhere."""
    from tplab.faces.headless import HeadlessView
    from tplab.handin.gather import figures_section
    from tplab.lab.lesson_notes import lesson_notes
    from tui.widgets.summary import _timing_line
    from tui.widgets.timings import TimingsStats
    from tui.widgets.token_plot import tp_legend
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=10, profiled=True))
    view = HeadlessView(io.StringIO(), tty=False)
    for ev in events:
        view.handle(ev)
    f = view.state.figures
    table = view.table({"status": "COMPLETE", "pod_id": "p", "verified_gone": True})
    strip = _timing_line(view.state, width=200).plain
    timings = TimingsStats.render_state(TimingsStats(), view.state).plain
    result = next(e.results for e in events if isinstance(e, ResultEvent))
    notes = lesson_notes(result, figures=f)
    readme = "\n".join(figures_section({"lab_figures": f.to_dict()}))
    for text in (f.single_ms.text(), f.tp_ms.text(), f.speedup.text(), f.allreduce_text(),
                 f.comm_compute.text(), f.cost.text(), f.profiled_text("tp")):
        assert text in table and text in readme, text
    for number in (f.single_ms.number(), f.tp_ms.number(), f.speedup.text(),
                   f.allreduce_share.text()):
        assert number in strip, number
    for text in (f.single_ms.number(), f.tp_ms.number(), f.speedup.text(), f.allreduce_text()):
        assert text in timings, text
    assert tp_legend(view.state) == f"tp (instr. AR {f.allreduce_share.text()})"
    assert f"one device {f.single_ms.text()}/token, TP {f.tp_ms.text()}/token" in notes
    # and each says its pass
    assert "timed" in strip and "instr." in strip and "(timed pass)" in table
    assert "(instrumented pass)" in table and "(profiled pass)" in table
    assert f.allreduce_share.taken == INSTRUMENTED and f.profiled_tp is not None
    assert f"vs timed {f.tp_ms.text()} (mean)" in table and "profiler on" in table

"""LabState: the reducer both front ends draw from. Bounded memory, exact bookkeeping."""

from __future__ import annotations

import random

import pytest

from tplab.records.events import EventWriter, TokenEvent
from tplab.viewmodel.fold import LabState
from tplab.viewmodel.tokens import LogHistogram
from tests.synthetic_lab import ScriptOptions, lab_script, token_flood


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_histogram_quantiles_within_one_percent_of_exact():
    rng = random.Random(1)
    xs = [rng.lognormvariate(0, 0.6) for _ in range(20_000)]
    h = LogHistogram()
    for x in xs:
        h.add(x)
    s = sorted(xs)
    for q in (0.5, 0.9, 0.99):
        exact = s[int(q * len(s)) - 1]
        assert h.quantile(q) == pytest.approx(exact, rel=0.015)
    assert LogHistogram().quantile(0.5) is None


def test_buffers_stay_bounded_over_many_events():
    s = LabState(recent_tokens=100, log_lines=50)
    w = EventWriter(src="job", clock=lambda: 0.0)
    for ev in token_flood(20_000):
        s.apply(ev)
    for i in range(500):
        s.apply(w.make("log", level="info", msg=f"line {i}"))
    assert s.timings["single"].count + s.timings["tp"].count == 20_000
    assert len(s.timings["single"].recent) == 100 and len(s.timings["tp"].recent) == 100
    assert len(s.log) == 50 and s.log_seq == 500 and s.log[-1].text == "line 499"
    # the recent window is the tail of the run, indexed run-wide
    t = s.timings["tp"]
    assert t.first_recent_index == t.count - 100


def test_complete_script_folds_to_the_results():
    evs = lab_script(ScriptOptions(num_prompts=2, new_tokens=10))
    s = LabState(clock=lambda: evs[-1].ts)
    s.apply_many(evs)
    assert s.done and s.done_status == "COMPLETE" and not s.running
    assert s.terminate_status == "gone" and not s.pod_alive
    assert s.instance.pod_id == "synth7x2k9q" and s.instance.gpu_count == 2
    assert s.timings["single"].count == 20 and s.timings["tp"].count == 20
    assert s.outputs_match() is True and s.prompts_matching() == (2, 2)
    assert s.num_prompts == 2 and s.new_tokens == 10 and s.d_model == 128
    singles = sorted(e.ms for e in evs if isinstance(e, TokenEvent) and e.mode == "single")
    assert s.timings["single"].mean_ms == pytest.approx(sum(singles) / len(singles))
    assert s.budget.held_usd == 0.0 and s.budget.cap_usd == 3.0
    # the log's result line quotes the speedup as the figures show it, naming its pass
    (line,) = [ln.text for ln in s.log if ln.text.startswith("result:")]
    assert line == (f"result: outputs_match=True speedup={s.figures.speedup.text()} (timed)")


def test_running_state_progress_and_pod_alive():
    evs = lab_script(ScriptOptions(num_prompts=3, new_tokens=8, until="running"))
    s = LabState(clock=lambda: evs[-1].ts)
    s.apply_many(evs)
    assert s.running and s.pod_alive and s.terminate_status == "idle"
    p = s.progress()
    assert p == {"mode": "tp", "prompt": 3, "num_prompts": 3, "token": 5, "new_tokens": 8}
    tp = s.timings["tp"]
    # the all-reduce figures as results.json has them: the instrumented pass's decode steps
    # (its own step times), never the uninstrumented pass's ms
    timed = [e for e in evs if isinstance(e, TokenEvent) and e.mode == "tp" and e.pos > 0]
    ar = sum(e.ar_ms for e in timed)
    assert tp.ar_ms_per_token == pytest.approx(ar / len(timed))
    assert tp.comm_compute_ratio == pytest.approx(
        ar / (sum(e.ms_instrumented or 0.0 for e in timed) - ar))
    assert s.timings["single"].ar_ms_per_token is None


def test_terminate_status_follows_the_lab_events():
    evs = lab_script(ScriptOptions(num_prompts=1, new_tokens=4, until="terminated"))
    clock = Clock(evs[0].ts)
    s = LabState(clock=clock)
    seen = []
    assert s.note_terminate_requested() is True
    assert s.note_terminate_requested() is False  # a second press is not a second request
    for ev in evs:
        s.apply(ev)
        if not seen or seen[-1] != s.terminate_status:
            seen.append(s.terminate_status)
    assert seen == ["requested", "terminating", "verifying", "gone"]


def test_no_pod_lab_ends_as_no_pod():
    w = EventWriter(src="lab", clock=lambda: 5.0)
    s = LabState()
    s.note_terminate_requested()
    s.apply(w.make("phase", name="preflight"))
    assert s.terminate_status == "requested" and not s.pod_alive
    s.apply(w.make("phase", name="done", status="FAILED", reason="terminated on request"))
    assert s.terminate_status == "no-pod"


def test_time_figures_tick_from_the_clock_and_freeze_when_done():
    w = EventWriter(src="lab", clock=lambda: 100.0)
    clock = Clock(100.0)
    s = LabState(clock=clock)
    s.apply(w.make("phase", name="boot"))
    s.apply(w.make("instance", state="RUNNING", pod_id="p1", uptime_s=5.0))
    s.apply(w.make("cost", accrued_usd=0.01, usd_per_hr=0.5, seconds_left=600.0))
    s.apply(w.make("heartbeat", age_s=1.0))
    clock.t = 110.0
    assert s.time_in_state() == pytest.approx(10.0)
    assert s.uptime() == pytest.approx(15.0)
    assert s.seconds_left() == pytest.approx(590.0)
    assert s.heartbeat_age() == pytest.approx(11.0)
    s.apply(w.make("instance", state="GONE", pod_id="p1"))
    s.apply(w.make("phase", name="done", status="COMPLETE", reason=""))
    clock.t = 500.0
    assert s.uptime() == pytest.approx(5.0) and s.heartbeat_age() == pytest.approx(1.0)
    assert s.seconds_left() == pytest.approx(600.0)


def test_an_event_class_it_has_no_handler_for_is_counted_not_fatal():
    from dataclasses import dataclass
    from typing import ClassVar

    from tplab.records.events import Event

    @dataclass(slots=True, kw_only=True)
    class FutureEvent(Event):
        type: ClassVar[str] = "future_thing"

    s = LabState()
    s.apply(FutureEvent(seq=0, ts=1.0, src="lab"))
    assert s.unknown_events == 1 and s.events == 1


def test_fatal_error_is_kept_and_logged():
    evs = lab_script(ScriptOptions(num_prompts=1, new_tokens=4, until="error"))
    s = LabState()
    s.apply_many(evs)
    assert s.fatal_error and "CUDA" in s.fatal_error
    assert any(line.level == "error" for line in s.log)
    assert s.done_status == "FAILED"


def test_the_partial_figures_of_a_stopped_lab_come_from_the_same_fold_as_the_views():
    """A lab stopped before results.json reports, per mode, the decode steps the stream timed
    (each prompt's prefill step, pos 0, left out, as results.json does), the all-reduce time
    of the instrumented TP steps only, and how many TP prompts matched; the dashboard's plot,
    from the same fold, still shows every token."""
    w = EventWriter([], src="job", clock=lambda: 1.0)
    s = LabState()
    for pos, ms in enumerate((9.0, 2.0, 4.0)):
        s.apply(w.make("token", mode="single", prompt=0, pos=pos, ms=ms, ar_ms=0.0))
    for pos, (ms, ar, measured) in enumerate(((8.0, 0.0, False), (3.0, 1.0, False),
                                               (5.0, 2.0, True))):
        s.apply(w.make("token", mode="tp", prompt=0, pos=pos, ms=ms, ar_ms=ar,
                       ar_measured=measured))
    s.apply(w.make("prompt_done", mode="tp", prompt=0, text="a", n_tokens=3, match=True))
    part = s.tokens.partial_figures()
    assert (part["single_tokens"], part["tp_tokens"]) == (2, 2)
    assert part["single_per_token_ms"] == 3.0 and part["tp_per_token_ms"] == 4.0
    assert part["speedup"] == 0.75
    assert (part["allreduce_ms_per_token"], part["allreduce_tokens"]) == (2.0, 1)
    assert (part["tp_prompts_done"], part["tp_prompts_matching"]) == (1, 1)
    assert s.tokens.measured and list(s.timings["tp"].recent) == [8.0, 3.0, 5.0]


def test_the_all_reduce_share_of_each_tp_token_reaches_the_strip_the_legend_and_the_progress_line():
    """ar_ms / ms of the measured TP steps: the strip, the live plot's legend and the headless
    progress line all show the lab's share so far, one figure (the legend and the progress line
    once showed the latest step's under the same name: "AR 91%" beside "AR 90%")."""
    import io

    from tplab.faces.headless import HeadlessView
    from tui.widgets.summary import _timing_line
    w = EventWriter([], src="job", clock=lambda: 1.0)
    view = HeadlessView(io.StringIO(), tty=False)
    view.set_plan(num_prompts=1, new_tokens=2, world_size=2)
    # a measured TP step's share is of its own (instrumented) time, not the uninstrumented ms
    for mode, pos, ms, own, ar, measured in (("single", 1, 2.0, 2.0, 0.0, False),
                                             ("tp", 1, 3.0, 4.0, 1.0, True),
                                             ("tp", 2, 5.0, 6.0, 3.0, True)):
        view.handle(w.make("token", mode=mode, prompt=0, pos=pos, ms=ms, ar_ms=ar,
                           ms_instrumented=own, ar_measured=measured))
    tp = view.state.timings["tp"]
    assert tp.ar_share == pytest.approx(0.4)
    # one figure under one name: the strip, the progress line and the plot's legend show the
    # share over the measured steps (40%), never the latest step's own (50%)
    assert "instr. AR 40%" in _timing_line(view.state).plain
    line = view.out.getvalue()
    assert "tp 5.00 ms · AR 40% so far (instrumented pass)" in line and "AR 50%" not in line
    from tui.widgets.token_plot import tp_legend
    assert tp_legend(view.state) == "tp (instr. AR 40%)"
    assert view.state.tokens.partial_figures()["allreduce_share"] == pytest.approx(0.4)


def test_damaged_ledger_lines_are_counted_beside_the_figures_and_kept_through_a_lab():
    from tplab.money.budget import BudgetGuard, default_ledger_path
    from tplab.records.events import EventWriter
    from tplab.viewmodel.ledger_view import read_ledger_budget

    guard = BudgetGuard(default_ledger_path(True), cap_usd=5.0)
    guard.record_actual("earlier", 0.25)
    with default_ledger_path(True).open("a") as f:
        f.write('{"v": 1, "kind": "actual", "amount_usd": "oops\n')
    budget = read_ledger_budget(True)
    assert budget.problem is None and budget.damaged_lines == 1
    assert budget.spent_usd == 0.25 and budget.remaining_usd == 4.75  # the figures stay
    assert budget.damaged_note == "⚠ 1 damaged ledger line left out: tplab budget"
    s = LabState()
    s.set_ledger_budget(budget)
    lab = EventWriter(src="lab")
    s.apply(lab.make("budget", cap_usd=5.0, spent_usd=0.25, held_usd=3.0, remaining_usd=1.75))
    assert s.budget.damaged_lines == 1  # an event that does not say keeps what the ledger said
    s.apply(lab.make("budget", cap_usd=5.0, spent_usd=0.25, held_usd=3.0, remaining_usd=1.75,
                     damaged_lines=2))
    assert s.budget.damaged_lines == 2 and s.budget.damaged_note.startswith("⚠ 2 damaged")


def test_the_views_check_no_event_field_again():
    """An event's fields are checked once, by the decoder (``tplab.records.events``): the
    view-model, the faces and the dashboard read typed attributes and carry no number check of
    their own (no ``_num`` helper; in the view-model no ``isinstance(v, (int, float))`` either:
    a figure read out of a nested record goes through ``tplab.records.untrusted.finite``) and
    no dict access to an event (it has no ``get``, ``[]`` or ``fields``)."""
    import re
    from pathlib import Path

    from tplab.records.events import Event, TokenEvent

    root = Path(__file__).resolve().parents[2]
    helper = re.compile(r"def _(num|nums|int|float|finite)\b")
    check = re.compile(r"isinstance\([^)]*\(int, float\)")
    found = [f"{p.relative_to(root)}:{n}: {line.strip()}"
             for folder in ("tplab/viewmodel", "tplab/faces", "tui")
             for p in sorted((root / folder).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if helper.search(line) or (folder == "tplab/viewmodel" and check.search(line))]
    assert not found, "a view checks a figure again:\n" + "\n".join(found)
    for name in ("get", "__getitem__", "fields"):
        assert not hasattr(Event, name) and not hasattr(TokenEvent, name), name

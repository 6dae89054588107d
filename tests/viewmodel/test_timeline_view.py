"""The profiled pass as the views read it: the job's record, untrusted, read into lanes per rank
and cut into segments and cells; folded from the ``timeline`` event (or the result's section)
into the one state both faces draw; and the headless final table's rows."""

from __future__ import annotations

import copy
import io

import pytest

from tplab.faces.headless import HeadlessView
from tplab.records.events import EventWriter
from tplab.viewmodel.fold import LabState
from tplab.viewmodel.timeline_view import (
    CELL,
    Lane,
    Segment,
    allreduce_text,
    label_row,
    lane_cells,
    timeline_from,
)
from tests.synthetic_lab import ScriptOptions, lab_script, synthetic_timeline


def test_each_step_reads_as_one_lane_per_rank_whose_segments_cover_it_in_order():
    t = timeline_from(synthetic_timeline())
    assert t is not None and t.modes == ("tp", "single") and t.comm == "nccl"
    step = t.steps["tp"][0]
    assert [lane.rank for lane in step.lanes] == [0, 1] and len(step.collectives) == 14
    for lane in step.lanes:
        segs = lane.segments
        assert segs[0].start == lane.start and segs[-1].end == pytest.approx(lane.end)
        assert all(a.end == pytest.approx(b.start) for a, b in zip(segs, segs[1:]))
        wire = sum(s.end - s.start for s in segs if s.kind == "wire")
        wait = sum(s.end - s.start for s in segs if s.kind == "wait")
        assert wire == pytest.approx(lane.wire_us, abs=0.01)
        assert wait == pytest.approx(lane.wait_us, abs=0.01)
        assert {s.label for s in segs if s.kind in ("wire", "wait")} <= {
            c.short for c in step.collectives}
    split = t.splits["tp"]
    assert split.tokens == 4 and split.ranks == 2 and split.allreduce_calls == 13
    text = allreduce_text(split)
    assert text and "is waiting for the other rank" in text
    assert t.splits["single"].wire_us == 0 and not t.steps["single"][0].collectives


def test_a_short_collective_still_shows_in_its_cell_and_the_labels_sit_at_their_start():
    lane = Lane(0, 0.0, 1000.0, 860.0, 40.0, 40.0, 60.0, None, (
        Segment("compute", 0, 460), Segment("wait", 460, 500, "3a"),
        Segment("wire", 500, 540, "3a"), Segment("compute", 540, 940),
        Segment("rest", 940, 1000)))
    cells = lane_cells(lane, 1000.0, 10)  # 100 µs a cell: 40 µs of waiting under 60 of compute
    assert cells[4] in ("wait", "wire") and cells[5] == "wire"
    assert cells[0] == "compute"
    # 8.6 cells of compute, two cells taken by the collective: the other eight are compute
    assert "".join(CELL[c] for c in cells).count("█") == 8
    step = timeline_from(synthetic_timeline()).steps["tp"][0]
    row = label_row(step, 0, step.span_us, 80)
    assert row.split()[0] == "E" and row.split()[-1] == "G"


def _interleaved(token_us: float, ops: int, rest_share: float, busy_gaps_closed: bool) -> Lane:
    """A single-device token of ``ops`` ops, each followed by its share of rest, as the job
    records it: the busy intervals exact, or (``busy_gaps_closed``) one interval over the
    whole step, as a bounded record with its gaps closed draws it."""
    op = token_us * (1 - rest_share) / ops
    gap = token_us * rest_share / ops
    compute = token_us * (1 - rest_share)
    if busy_gaps_closed:
        segs = (Segment("compute", 0.0, token_us),)
    else:
        segs = tuple(s for i in range(ops) for s in (
            Segment("compute", i * (op + gap), i * (op + gap) + op),
            Segment("rest", i * (op + gap) + op, (i + 1) * (op + gap))))
    return Lane(0, 0.0, token_us, compute, 0.0, 0.0, token_us - compute, None, segs)


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("width", [40, 76, 196])
def test_a_token_whose_rest_is_finely_interleaved_shows_that_much_blank(closed, width):
    # the single token: 2084 µs = compute 1170 + rest 914, ~80 ops, each cell of a
    # 76-column lane covering ~1.5 op and gap
    lane = _interleaved(2084.0, 80, 914 / 2084, closed)
    cells = lane_cells(lane, 2084.0, width)
    blank = cells.count("rest") / width
    assert blank == pytest.approx(914 / 2084, abs=2 / width)
    assert blank >= 0.30 - 1 / width


def test_single_and_tp_share_one_scale_and_the_ratio_is_said():
    from tplab.viewmodel.timeline_view import scale_text, to_scale
    t = timeline_from(synthetic_timeline())
    lanes, per_cell = to_scale(t, 60)
    by_mode = {lane.mode: lane for lane in lanes}
    assert set(by_mode) == {"tp", "single"}
    longest = max(by_mode.values(), key=lambda lane: lane.span_us)
    assert len(longest.cells) == 60 and per_cell == pytest.approx(longest.span_us / 60)
    for lane in lanes:  # each drawn as long as its own time on the shared scale
        assert len(lane.cells) == max(1, round(lane.span_us / per_cell))
    ratio = by_mode["tp"].span_us / by_mode["single"].span_us
    assert f"= {ratio:.1f}× single" in scale_text(lanes, per_cell)


def test_labels_left_out_for_want_of_room_are_named():
    from tplab.viewmodel.timeline_view import dropped_labels, dropped_text
    step = timeline_from(synthetic_timeline()).steps["tp"][0]
    assert dropped_labels(step, 0, step.span_us, 400) == []
    gone = dropped_labels(step, 0, step.span_us, 20)
    shown = label_row(step, 0, step.span_us, 20).split()
    assert gone and not set(gone) & set(shown) and len(gone) + len(shown) == len(step.collectives)
    assert dropped_text(gone).startswith("label") and gone[0] in dropped_text(gone)
    assert dropped_text([]) == ""


def test_a_record_that_is_not_one_reads_as_nothing_and_bad_steps_are_skipped():
    good = synthetic_timeline()
    assert timeline_from(None) is None and timeline_from({"modes": []}) is None
    assert timeline_from({"modes": {"tp": {"tokens": "x"}}}) is None
    bad = copy.deepcopy(good)
    bad["modes"]["tp"]["tokens"][0]["ranks"][0]["wire_us"] = float("nan")
    bad["modes"]["tp"]["tokens"][1]["collectives"][0]["start"] = [1.0]  # one rank of two
    bad["modes"]["tp"]["tokens"][2]["ranks"] = [{"rank": "0"}]
    t = timeline_from(bad)
    assert [s.pos for s in t.steps["tp"]] == [6]
    huge = copy.deepcopy(good)
    huge["modes"]["tp"]["tokens"] *= 100
    assert len(timeline_from(huge).steps["tp"]) == 64  # bounded


def test_the_fold_takes_the_timeline_event_and_both_faces_read_it():
    events = lab_script(ScriptOptions(num_prompts=2, new_tokens=6, profiled=True))
    s = LabState()
    for ev in events:
        s.apply(ev)
        if ev.type == "timeline":
            assert s.timeline is not None and s.results is None
    assert s.unknown_events == 0 and s.timeline.splits["tp"].tokens == 4
    assert any(line.text.startswith("profiled pass, TP: ") and "a token; medians: compute"
               in line.text for line in s.log)
    view = HeadlessView(io.StringIO(), tty=False)
    for ev in events:
        view.handle(ev)
    table = view.table({"status": "COMPLETE", "results": s.results})
    assert "TP token (profiled pass)" in table and "per all-reduce" in table
    assert "trace.json" in table
    assert [r[0] for r in s.figures.profiled_rows()] == [
        "TP token (profiled pass)", "per all-reduce (profiled pass)",
        "profiled pass vs timed pass", "single token (profiled pass)"]


def test_a_result_with_the_section_gives_the_timeline_when_its_event_was_missed():
    events = [e for e in lab_script(ScriptOptions(num_prompts=2, new_tokens=6, profiled=True))
              if e.type != "timeline"]
    s = LabState()
    s.apply_many(events)
    assert s.timeline is not None and s.timeline.splits["tp"].tokens == 4
    broken = EventWriter(src="job", clock=lambda: 0.0).make("timeline", section={"modes": {"tp": 1}})
    s2 = LabState()
    s2.apply(broken)
    assert s2.timeline is None and s2.unknown_events == 1

"""The profiled pass as the views read it: the job's record, untrusted, read into lanes per rank
and cut into segments and cells; folded from the ``timeline`` event (or the result's section)
into the one state both faces draw; and the headless final table's rows."""

from __future__ import annotations

import copy
import io

import pytest

from tplab.faces.headless import HeadlessView, timeline_rows
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
    assert cells[0] == "compute" and cells[9] == "rest"
    assert "".join(CELL[c] for c in cells).count("█") == 7
    step = timeline_from(synthetic_timeline()).steps["tp"][0]
    row = label_row(step, 0, step.span_us, 80)
    assert row.split()[0] == "E" and row.split()[-1] == "G"


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
    assert "profiled TP token" in table and "per all-reduce" in table and "trace.json" in table
    assert [r[0] for r in timeline_rows(s.timeline)] == [
        "profiled TP token", "per all-reduce", "profiled single token", "trace"]


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

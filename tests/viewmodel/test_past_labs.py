"""A past lab's stream read back (``read_stream``) and folded as the Labs screen and a replay do:
a damaged line is skipped, and a stream recorded before the events were typed still gives its
figures."""

from __future__ import annotations

import gzip
from pathlib import Path

from tplab.records.events import EventWriter, TokenEvent
from tplab.viewmodel.fold import LabState
from tplab.viewmodel.past_labs import read_stream

OLDER_STREAM = (Path(__file__).resolve().parents[1] / "records" / "streams"
                / "lab-before-typed-events.jsonl.gz")


def test_a_damaged_line_is_skipped_and_the_rest_replays(tmp_path):
    w = EventWriter(src="job")
    lines = [w.make("token", mode="single", prompt=0, pos=i, ms=1.0 + i, ar_ms=0.0).to_json()
             for i in range(3)]
    lines.insert(1, lines[1].replace('"ms":2.0', '"ms":-2.0'))  # refused: a negative time
    lines.insert(3, '{"v":1,"seq":9,"ts":1.0,"src":"job","type":"tok')  # cut by a crash
    (tmp_path / "stream.jsonl").write_text("\n".join(lines) + "\n")
    got = list(read_stream(tmp_path))
    assert [e.ms for e in got if isinstance(e, TokenEvent)] == [1.0, 2.0, 3.0]


def test_a_stream_recorded_before_typed_events_replays_to_its_figures(tmp_path):
    (tmp_path / "stream.jsonl").write_bytes(gzip.decompress(OLDER_STREAM.read_bytes()))
    s = LabState()
    s.apply_many(read_stream(tmp_path))
    assert s.events == 142 and s.unknown_events == 0
    assert s.done and s.done_status == "COMPLETE" and s.instance.state == "GONE"
    assert s.timings["single"].count == s.timings["tp"].count == 12
    assert s.prompts_matching() == (2, 2) and s.outputs_match() is True
    assert [p.d_model for p in s.sweep_points] == [32, 64]
    assert s.timeline is not None and s.timeline.splits["tp"].tokens == 2
    assert s.budget.cap_usd is not None and s.cost.accrued_usd is not None
    assert s.results is not None and s.results["outputs_match"] is True

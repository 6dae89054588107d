"""The event wire contract (tplab/records/events.py) as the job uses it: round trip, split lines, resume."""

from __future__ import annotations

import io
import json

import pytest

from tplab.records.events import EventDecoder, EventError, EventWriter, decode_line, read_events


def _writer(buf: io.StringIO) -> EventWriter:
    ticks = iter(range(1000))
    return EventWriter([buf], src="job", clock=lambda: 1000.0 + next(ticks))


def test_round_trip_every_job_event_type():
    buf = io.StringIO()
    w = _writer(buf)
    sent = [
        w.emit("phase", name="baseline"),
        w.emit("log", level="warning", msg="gloo on the CPU"),
        w.emit("token", mode="tp", prompt=3, pos=7, ms=1.25, ar_ms=0.5, token=42, ms_instrumented=1.3),
        w.emit("prompt_done", mode="single", prompt=3, text="he went to school .", n_tokens=100),
        w.emit("sweep", bytes=256, ms=0.9, algbw_gbps=0.0003, busbw_gbps=0.0003),
        w.emit("result", results={"speedup": 0.1, "nested": {"a": [1, 2]}}),
        w.emit("error", msg="TP output differs", fatal=True),
        w.emit("heartbeat", phase="tp"),
    ]
    lines = buf.getvalue().splitlines()
    assert len(lines) == len(sent)
    got = [decode_line(ln) for ln in lines]
    assert got == sent
    assert [e.seq for e in got] == list(range(len(sent)))
    assert got[2]["ms_instrumented"] == 1.3  # extra fields survive


def test_line_split_across_two_reads_is_held_until_complete():
    buf = io.StringIO()
    w = _writer(buf)
    a = w.emit("token", mode="single", prompt=0, pos=0, ms=2.0, ar_ms=0.0)
    b = w.emit("token", mode="single", prompt=0, pos=1, ms=2.1, ar_ms=0.0)
    data = buf.getvalue().encode()
    cut = len(a.to_json()) + 1 + 17  # inside the second line
    dec = EventDecoder()
    first = dec.feed(data[:cut])
    assert first == [a]
    assert dec.pending == 17
    assert dec.offset == len(a.to_json()) + 1
    second = dec.feed(data[cut:])
    assert second == [b]
    assert dec.pending == 0 and dec.offset == len(data)


def test_split_inside_a_multibyte_character():
    # EventWriter escapes non-ASCII, but a line written by another JSON writer may carry raw UTF-8
    obj = {"v": 1, "seq": 0, "ts": 1.0, "src": "job", "type": "log", "level": "info",
           "msg": "α = 457 µs"}
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    cut = data.index("α".encode()) + 1  # between the two bytes of α
    dec = EventDecoder()
    assert dec.feed(data[:cut]) == []
    (ev,) = dec.feed(data[cut:])
    assert ev["msg"] == "α = 457 µs" and dec.offset == len(data)


def test_resume_from_offset_sees_every_event_once(tmp_path):
    path = tmp_path / "events.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        w = EventWriter([fh])
        for i in range(5):
            w.emit("token", mode="tp", prompt=0, pos=i, ms=1.0, ar_ms=0.2)
    data = path.read_bytes()
    dec = EventDecoder()
    seen = dec.feed(data[:50])
    resumed = EventDecoder(offset=dec.offset)  # a reconnect resumes from the consumed offset
    seen += resumed.feed(data[resumed.offset:])
    assert [e.seq for e in seen] == [0, 1, 2, 3, 4]


def test_read_events_skips_a_partial_last_line(tmp_path):
    path = tmp_path / "events.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        w = EventWriter([fh])
        w.emit("phase", name="tp")
        fh.write('{"v":1,"seq":1,"ts":1.0,"src":"job","type":"pha')  # a write in progress
    assert [e.type for e in read_events(str(path))] == ["phase"]


@pytest.mark.parametrize("line, words", [
    ('{"v":1,"seq":0,"ts":1,"src":"job","type":"token","mode":"tp"}', "missing field 'prompt'"),
    ('{"v":2,"seq":0,"ts":1,"src":"job","type":"phase","name":"x"}', "schema version"),
    ('{"v":1,"seq":0,"ts":1,"src":"job","type":"nope"}', "unknown event type"),
    ("not json", "not JSON"),
])
def test_bad_lines_are_errors(line, words):
    with pytest.raises(EventError, match=words):
        decode_line(line)


def test_writer_rejects_an_invalid_event_before_writing():
    buf = io.StringIO()
    w = EventWriter([buf])
    with pytest.raises(EventError):
        w.emit("token", mode="tp", prompt=0, pos=0, ms="slow", ar_ms=0.0)
    assert buf.getvalue() == ""
    assert json.loads(w.emit("heartbeat").to_json())["seq"] == 0

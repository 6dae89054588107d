"""The event wire contract (tplab/records/events.py): every type round-trips as its dataclass,
the one decoder refuses a malformed or hostile line with a reason naming the field, split
lines, resume, and older streams still read."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from tplab.records.dmodel import DModelPoint
from tplab.records.events import (
    EVENT_TYPES, BudgetEvent, CostEvent, ErrorEvent, EventDecoder, EventError, EventWriter,
    FiguresEvent, HeartbeatEvent, InstanceEvent, LogEvent, StageEvent, PromptDoneEvent, ResultEvent, SshEvent,
    SweepEvent, SweepPointEvent, TimelineEvent, TokenEvent, WarningEvent, decode_line,
    from_dict, read_events)


def _writer(buf: io.StringIO, src: str = "job") -> EventWriter:
    ticks = iter(range(1000))
    return EventWriter([buf], src=src, clock=lambda: 1000.0 + next(ticks))


def _point(d: int = 64) -> DModelPoint:
    return DModelPoint(d_model=d, n_head=2, params=1000, tokens=8, single_ms=1.5, tp_ms=2.5,
                       allreduce_ms=0.7, allreduce_calls=14.0, tp_instrumented_ms=2.7,
                       single_p50_ms=1.4, tp_p50_ms=2.4, outputs_match=True, seconds=0.3,
                       rounds=2, tokens_per_round=4, single_rounds_ms=(1.4, 1.6),
                       tp_rounds_ms=(2.4, 2.6), allreduce_rounds_ms=(0.6, 0.8))


#: one event of every type, each with its optional fields set where it has any
EVERY_TYPE = [
    StageEvent(name="preflight", num_prompts=2, new_tokens=8, world_size=2, lab_id="lab-1",
               mock=True),
    StageEvent(name="done", status="COMPLETE", reason="", out_dir="/tmp/x", pod_id="p1",
               verified_gone=True, exit_code=0, manifest="/tmp/x/manifest.json"),
    StageEvent(name="decode", modes=["single", "tp"], order="interleaved prompt by prompt",
               transports=["gloo"], d_models=[64, 128]),
    LogEvent(level="warning", msg="gloo on the CPU", headline=True),
    TokenEvent(mode="tp", prompt=3, pos=7, ms=1.25, ar_ms=0.5, token=42, ar_measured=True,
               ms_instrumented=1.3, ar_calls=14),
    PromptDoneEvent(mode="tp", prompt=3, text="he went to school .", n_tokens=100, match=True,
                    comm="gloo"),
    SweepEvent(bytes=256, ms=0.9, algbw_gbps=0.0003, busbw_gbps=0.0003, p99_ms=1.2,
               spread=0.05, unstable=False, comm="shm"),
    SweepPointEvent(d_model=64, skipped=False, point=_point()),
    SweepPointEvent(d_model=8192, skipped=True, reason="needs ~40 GiB"),
    TimelineEvent(section={"modes": {"tp": {"tokens": [], "median": None}}, "comm": "gloo"}),
    ResultEvent(results={"speedup": 0.1, "nested": {"a": [1, 2]}}),
    FiguresEvent(figures={"tp_ms": {"value": 22.3, "unit": "ms", "shown": "22.3 ms",
                                    "taken": "timed pass"}, "so_far": False}),
    ErrorEvent(msg="TP output differs", fatal=True),
    HeartbeatEvent(phase="decode"),
    HeartbeatEvent(age_s=0.4),
    CostEvent(accrued_usd=0.01, usd_per_hr=0.69, seconds_left=600.0, authorized_usd=0.75),
    BudgetEvent(cap_usd=5.0, spent_usd=5.5, held_usd=0.0, remaining_usd=-0.5,
                authorized_usd=0.75, label="lab-1", damaged_lines=1),
    InstanceEvent(state="RUNNING", pod_id="p1", provider="runpod", gpu_type="RTX 4090",
                  gpu_count=2, spot=False, usd_per_hr=0.69, ssh_host="203.0.113.7",
                  ssh_port=22017, uptime_s=12.5),
    SshEvent(state="dropped", reason="ConnectionLost", drops=1, resume_offset=4096),
    WarningEvent(msg="pods of earlier labs are still alive", kind="leftovers", pods=["p0"]),
]


def test_every_event_type_round_trips_as_its_dataclass():
    assert {type(ev) for ev in EVERY_TYPE} == set(EVENT_TYPES.values())
    buf = io.StringIO()
    w = _writer(buf)
    sent = [w.emit(ev) for ev in EVERY_TYPE]
    got = [decode_line(ln) for ln in buf.getvalue().splitlines()]
    assert got == sent
    assert [e.seq for e in got] == list(range(len(sent)))
    tok = got[4]
    assert isinstance(tok, TokenEvent) and (tok.ms, tok.ar_calls) == (1.25, 14)
    point = got[7]
    assert isinstance(point, SweepPointEvent) and point.point == _point()


def test_the_named_form_builds_the_same_typed_event():
    buf = io.StringIO()
    ev = _writer(buf, "lab").emit("budget", cap_usd=5.0, spent_usd=1.0, held_usd=0.5,
                                  remaining_usd=3.5, authorized_usd=0.5)
    assert isinstance(ev, BudgetEvent) and ev.remaining_usd == 3.5 and ev.src == "lab"
    assert decode_line(buf.getvalue()) == ev


def test_a_field_at_its_default_is_not_written():
    line = json.loads(EventWriter([io.StringIO()]).emit(
        TokenEvent(mode="single", prompt=0, pos=1, ms=1.0, ar_ms=0.0)).to_json())
    assert set(line) == {"v", "seq", "ts", "src", "type", "mode", "prompt", "pos", "ms", "ar_ms"}


def _line(type_: str, **fields: object) -> str:
    return json.dumps({"v": 1, "seq": 0, "ts": 1.0, "src": "job", "type": type_, **fields})


TOKEN = {"mode": "tp", "prompt": 0, "pos": 1, "ms": 1.0, "ar_ms": 0.2}


@pytest.mark.parametrize("line, words", [
    (_line("token", mode="tp"), "token event is missing field 'prompt'"),
    (_line("token", **{**TOKEN, "ms": -0.5}), "field 'ms' must be a finite number from 0"),
    (_line("token", **TOKEN).replace('"ms": 1.0', '"ms": NaN'), "not strict JSON"),
    (_line("token", **TOKEN).replace('"ms": 1.0', '"ms": 1e999'), "field 'ms' .* got inf"),
    (_line("token", **{**TOKEN, "ms": 10 ** 400}), "field 'ms' must be a finite number"),
    (_line("token", **{**TOKEN, "ms": "slow"}), "field 'ms' must be a finite number"),
    (_line("token", **{**TOKEN, "ms": True}), "field 'ms' must be a finite number"),
    (_line("token", **{**TOKEN, "mode": "tp-gloo"}), "field 'mode' must be one of single, tp"),
    (_line("token", **{**TOKEN, "pos": -1}), "field 'pos' must be an integer from 0"),
    (_line("token", **{**TOKEN, "ms_instrumented": float("inf")}).replace("Infinity", "1e400"),
     "field 'ms_instrumented'"),
    (_line("log", level="info", msg="x" * 100_000), "field 'msg' must be a string of at most"),
    (_line("log", level="loud", msg="hi"), "field 'level' must be one of"),
    (_line("error", msg="m", fatal=1), "field 'fatal' must be true or false"),
    (_line("phase", name="decode", modes=["single"] * 5000), "field 'modes' must be a list of at"),
    (_line("phase", name="decode", modes=["single", 3]), "field 'modes' has an item that"),
    (_line("instance", state="RUNNING", ssh_host="h" * 300), "field 'ssh_host'"),
    (_line("budget", cap_usd=5, spent_usd=-1, held_usd=0, remaining_usd=6), "'spent_usd'"),
    (_line("result", results=[1, 2]), "field 'results' must be an object"),
    (_line("timeline", comm="gloo"), "timeline event has no object 'modes'"),
    (_line("sweep_point", d_model=64, skipped=False), "sweep_point event is missing field"),
    (_line("sweep_point", **{**_point().to_dict(), "skipped": False, "tp_ms": -3.0}),
     "field 'tp_ms' must be a finite number from 0"),
    ('{"v":2,"seq":0,"ts":1,"src":"job","type":"phase","name":"x"}', "schema version"),
    ('{"v":1,"seq":0,"ts":1,"src":"job","type":"nope"}', "unknown event type 'nope'"),
    ('{"v":1,"seq":-3,"ts":1,"src":"job","type":"heartbeat"}', "seq must be a non-negative"),
    ('{"v":1,"seq":0,"ts":1e999,"src":"job","type":"heartbeat"}', "ts must be a finite number"),
    ('{"v":1,"ts":1,"src":"job","type":"heartbeat"}', "missing header field 'seq'"),
    ("not json", "not JSON"),
])
def test_a_malformed_or_hostile_line_is_refused_with_its_reason(line, words):
    with pytest.raises(EventError, match=words):
        decode_line(line)


def test_an_undeclared_field_is_left_at_the_boundary():
    ev = decode_line(_line("token", **TOKEN, injected="x" * 1000))
    assert isinstance(ev, TokenEvent) and not hasattr(ev, "injected")
    assert "injected" not in ev.to_json()


def test_an_older_stream_reads_its_fields_and_defaults_the_rest():
    """A version-1 token line as tplab wrote it before every field was declared (with
    ``ar_measured`` always written, no ``token`` id) decodes with the defaults."""
    ev = decode_line('{"v":1,"seq":4,"ts":17.5,"src":"job","type":"token","mode":"single",'
                     '"prompt":0,"pos":2,"ms":3,"ar_ms":0.0,"ar_measured":false}')
    assert isinstance(ev, TokenEvent)
    assert (ev.ms, ev.token, ev.ms_instrumented, ev.ar_calls) == (3, None, None, None)


def test_the_owned_path_takes_the_timeline_section_without_a_copy():
    obj = json.loads(_line("timeline", modes={"tp": {}}, comm="gloo"))
    ev = from_dict(obj, owned=True)
    assert isinstance(ev, TimelineEvent) and ev.section is obj
    assert ev.section == {"modes": {"tp": {}}, "comm": "gloo"}


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
    assert isinstance(ev, LogEvent) and ev.msg == "α = 457 µs" and dec.offset == len(data)


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


@pytest.mark.parametrize("make, words", [
    (lambda: TokenEvent(mode="tp", prompt=0, pos=0, ms=float("nan"), ar_ms=0.0), "'ms'"),
    (lambda: "token", "missing 1 required keyword-only argument: 'ar_ms'"),
    (lambda: SweepPointEvent(d_model=64, skipped=False), "measured point exactly when"),
    (lambda: SweepPointEvent(d_model=32, skipped=False, point=_point(64)), "is not its point"),
])
def test_the_writer_refuses_what_the_decoder_would_refuse_before_writing(make, words):
    buf = io.StringIO()
    w = EventWriter([buf])
    ev = make()
    with pytest.raises(EventError, match=words):
        if isinstance(ev, str):
            w.emit(ev, mode="tp", prompt=0, pos=0, ms=1.0)
        else:
            w.emit(ev)
    assert buf.getvalue() == ""
    assert json.loads(w.emit(HeartbeatEvent()).to_json())["seq"] == 0


def test_the_writer_names_a_field_its_type_does_not_declare():
    with pytest.raises(EventError, match="unexpected keyword argument 'billed_usd'.*CostEvent"):
        EventWriter().make("cost", accrued_usd=0.1, usd_per_hr=1.0, seconds_left=1.0,
                           billed_usd=0.2)


#: a whole mock lab's stream.jsonl as the tplab before typed events recorded it (2 prompts,
#: 6 tokens, the d_model sweep at 32 and 64, the profiled pass; its out dir renamed)
OLDER_STREAM = Path(__file__).parent / "streams" / "lab-before-typed-events.jsonl.gz"


def test_a_stream_recorded_before_typed_events_reads_whole():
    lines = [ln for ln in gzip.decompress(OLDER_STREAM.read_bytes()).splitlines() if ln.strip()]
    events = [decode_line(ln) for ln in lines]  # none refused
    assert len(events) == len(lines) == 142
    points = [e for e in events if isinstance(e, SweepPointEvent)]
    assert [p.point.d_model for p in points if p.point] == [32, 64]
    assert points[0].point and points[0].point.single_rounds_ms[0] > 0
    assert sum(isinstance(e, TokenEvent) for e in events) == 24

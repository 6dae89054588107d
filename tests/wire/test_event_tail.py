"""The event tail's decoding: the owned fast decoder agrees with the reference one at any chunking,
keeps good events around bad lines, rejects what ``from_dict`` rejects, and the tail's acceptance
drops duplicates and counts gaps. (Moved here from tests/lab/test_lab_units.py.)"""

from __future__ import annotations

import io

import pytest

from tplab.records.events import EventDecoder, EventWriter, HeartbeatEvent
from tplab.wire.event_tail import FastDecoder, TailState, _accept


def _lines(n: int) -> bytes:
    buf = io.StringIO()
    w = EventWriter([buf], src="job")
    for i in range(n):
        w.emit("token", mode="tp", prompt=0, pos=i, ms=1.5, ar_ms=0.5, token=i)
    w.emit("phase", name="finished", wall_s=1.0)
    return buf.getvalue().encode()


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_fast_decoder_matches_reference_at_any_chunking(chunk):
    data = _lines(50)
    ref = EventDecoder().feed(data)
    dec = FastDecoder()
    got = []
    for i in range(0, len(data), chunk):
        got.extend(dec.feed(data[i:i + chunk]))
    assert got == ref
    assert dec.offset == len(data) and dec.pending == 0


def test_fast_decoder_keeps_good_events_around_bad_and_blank_lines():
    good = _lines(3).splitlines(keepends=True)
    data = good[0] + b"\n" + b"{not json}\n" + good[1] + b'{"v": 9, "seq": 5}\n' + good[2]
    dec = FastDecoder()
    events = dec.feed(data)
    assert [e.seq for e in events] == [0, 1, 2]
    assert dec.bad_lines == 2
    assert dec.last_raw == b""  # not stored raw: the bad lines must not travel on
    assert dec.offset == len(data)


def test_the_owned_fast_path_rejects_what_from_dict_rejects():
    from tplab.records.events import EventError, from_dict
    for bad in ({"v": 1, "seq": 0, "ts": 1.0, "src": "job", "type": "token"},
                {"v": 1, "seq": True, "ts": 1.0, "src": "job", "type": "heartbeat"},
                {"v": 1, "seq": 0, "ts": 1.0, "src": "x", "type": "heartbeat"},
                {"v": 1, "seq": 0, "ts": 1.0, "src": "job", "type": "error", "msg": "m",
                 "fatal": 1},
                {"v": 1, "seq": 0, "ts": 1.0, "src": "job", "type": ["token"]},
                {"v": 2, "seq": 0, "ts": 1.0, "src": "job", "type": "heartbeat"},
                ["not", "an", "object"]):
        with pytest.raises(EventError):
            from_dict(bad, owned=True)


def test_accept_drops_duplicates_and_counts_gaps():
    evs = list(FastDecoder().feed(_lines(5)))
    st = TailState()
    assert [e.seq for e in _accept(st, evs[:3])] == [0, 1, 2]
    assert [e.seq for e in _accept(st, evs[1:])] == [3, 4, 5]
    assert st.duplicates == 2 and st.gaps == 0
    assert st.finished_seen_at is not None  # the job's `finished` stage was seen
    _accept(st, [HeartbeatEvent(seq=9, ts=0.0)])
    assert st.gaps == 1


def test_hostile_lines_are_dropped_at_the_tail_and_never_reach_a_view():
    """Lines a broken or hostile pod could write (NaN, an overflowing number, a negative time, a
    huge string, a wrong type) are counted as bad at the client's tail; the view folds only the
    good events around them."""
    from tplab.viewmodel.fold import LabState

    good = _lines(2).splitlines(keepends=True)
    head = b'{"v":1,"seq":%d,"ts":1.0,"src":"job","type":"token","mode":"tp","prompt":0,"pos":1,'
    hostile = [head % 10 + b'"ms":NaN,"ar_ms":0}\n',
               head % 11 + b'"ms":1e999,"ar_ms":0}\n',
               head % 12 + b'"ms":-4.0,"ar_ms":0}\n',
               head % 13 + b'"ms":"fast","ar_ms":0}\n',
               b'{"v":1,"seq":14,"ts":1.0,"src":"job","type":"log","level":"info","msg":"'
               + b"x" * 20_000 + b'"}\n',
               b'{"v":1,"seq":15,"ts":1.0,"src":"job","type":"error","msg":"m","fatal":"yes"}\n']
    dec = FastDecoder()
    events = dec.feed(good[0] + b"".join(hostile) + good[1])
    assert [e.seq for e in events] == [0, 1] and dec.bad_lines == len(hostile)
    state = LabState()
    state.apply_many(events)
    tp = state.timings["tp"]
    assert tp.count == 2 and tp.hist.max == 1.5 and not state.errors and not state.warnings

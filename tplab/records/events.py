"""The one wire contract between the job on the pod, the SSH transport and the views.

Every event is one JSON object on one line (JSON lines). The job writes them to ``events.jsonl``
(flushed per line) and to stdout; the client tails that file over SSH and resumes from its last
byte offset; the orchestrator adds its own events (phases, cost ticks, budget, SSH state); the
dashboard and the headless runner both read the merged stream.

Each line is a flat object::

    {"v": 1, "seq": 17, "ts": 1764450000.123, "src": "job", "type": "token",
     "mode": "tp", "prompt": 0, "pos": 3, "ms": 1.21, "ar_ms": 0.41, "token": 42}

``v`` is the schema version, ``seq`` is monotonic per source (``src`` is ``job`` for what the
pod's job wrote and ``lab`` for what the orchestrator added), so "every job event exactly once"
is checkable from ``seq`` alone. Standard library only: this module travels to the pod.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

SCHEMA_VERSION = 1

#: Required fields per event type, with the Python types they must have. Extra fields are kept.
_NUM = (int, float)
EVENT_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    # a lab or job phase begins: name is e.g. "preflight", "create", "boot", "warmup", "decode"
    "phase": {"name": (str,)},
    # a line of text for the log; level is "debug" | "info" | "warning" | "error"
    "log": {"level": (str,), "msg": (str,)},
    # one decoded token: mode "single" | "tp", prompt index, position in the generated sequence,
    # wall ms of that step and the all-reduce ms spent inside it (0 for single)
    "token": {"mode": (str,), "prompt": (int,), "pos": (int,), "ms": _NUM, "ar_ms": _NUM},
    # one prompt finished in one mode: the decoded text and the number of new tokens
    "prompt_done": {"mode": (str,), "prompt": (int,), "text": (str,), "n_tokens": (int,)},
    # one all-reduce sweep point: message bytes, mean ms, algorithm and bus bandwidth in GB/s
    "sweep": {"bytes": (int,), "ms": _NUM, "algbw_gbps": _NUM, "busbw_gbps": _NUM},
    # one size of the d_model sweep (tplab.job.dmodel_sweep): skipped=False carries the measured
    # point (single_ms, tp_ms, allreduce_ms, outputs_match, params, tokens, ...), skipped=True
    # the reason the size was not run
    "sweep_point": {"d_model": (int,), "skipped": (bool,)},
    # the profiled pass, split rank by rank (results.json's "timeline" section, flat: "modes"
    # holds each mode's profiled token steps and medians; tplab.records.timeline)
    "timeline": {"modes": (dict,)},
    # the job's summary (the content of results.json, under "results")
    "result": {"results": (dict,)},
    # something failed; fatal=True means the run is over
    "error": {"msg": (str,), "fatal": (bool,)},
    # liveness of the job (pod side) or of the client heartbeat
    "heartbeat": {},
    # orchestrator: the lab's cost figure (tplab.money.lab_money.LabMoney.cost): accrued dollars
    # at the quoted price and seconds left before the cap while the pod may bill; optional
    # cost_is ("estimate" | "billed": the provider's bill once settled), ran_s (the pod's life
    # the figure counts), ended_at (epoch s the provider showed it gone), authorized_usd,
    # held_for_pod (the pod whose unproven end keeps the lab's authorization held)
    "cost": {"accrued_usd": _NUM, "usd_per_hr": _NUM, "seconds_left": _NUM},
    # orchestrator: budget figures from BudgetGuard; optional authorized_usd, label,
    # damaged_lines, held_for ("pod 4711 not yet proven gone": money held for a pod whose end
    # is not proven)
    "budget": {"cap_usd": _NUM, "spent_usd": _NUM, "held_usd": _NUM, "remaining_usd": _NUM},
    # orchestrator: pod/instance state (state is the provider's, e.g. CREATED, RUNNING, GONE)
    "instance": {"state": (str,)},
    # orchestrator: SSH connection state ("connecting", "connected", "dropped", "closed")
    "ssh": {"state": (str,)},
    # orchestrator: something the user should look at (e.g. 80% of the authorization spent)
    "warning": {"msg": (str,)},
}

SOURCES = ("job", "lab")


class EventError(ValueError):
    """A line that is not a valid tplab event (bad JSON, unknown type, missing field)."""


class EventVersionError(EventError):
    """An event written by a tplab with a different schema version."""


@dataclass(frozen=True, slots=True)
class Event:
    """One event of the stream. ``fields`` holds the type-specific payload."""

    type: str
    seq: int
    ts: float
    src: str = "job"
    fields: dict[str, Any] = field(default_factory=dict)
    v: int = SCHEMA_VERSION

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": self.v, "seq": self.seq, "ts": self.ts, "src": self.src,
                               "type": self.type}
        out.update(self.fields)
        return out

    def to_json(self) -> str:
        """One line, no trailing newline."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)


def validate(type_: str, fields: dict[str, Any]) -> None:
    """Raise EventError unless ``fields`` carries what an event of ``type_`` needs."""
    spec = EVENT_FIELDS.get(type_)
    if spec is None:
        raise EventError(f"unknown event type {type_!r}")
    for name, types in spec.items():
        if name not in fields:
            raise EventError(f"{type_} event is missing field {name!r}")
        value = fields[name]
        if isinstance(value, bool) and bool not in types:
            raise EventError(f"{type_} event field {name!r} must be {types[0].__name__}, got bool")
        if not isinstance(value, types):
            raise EventError(
                f"{type_} event field {name!r} must be {types[0].__name__}, "
                f"got {type(value).__name__}")


_HEADER = ("v", "seq", "ts", "src", "type")


_SPECS = {t: tuple((name, types, bool in types) for name, types in spec.items())
          for t, spec in EVENT_FIELDS.items()}
_new_event = object.__new__
_set = object.__setattr__
_MISSING = object()


def from_dict(obj: Any, *, owned: bool = False) -> Event:
    """Build and validate an Event from a decoded JSON object.

    ``owned=True`` says ``obj`` is a dict fresh from ``json.loads`` that the caller gives away
    (the client's tail, its hot path): a valid event is then built in place at a fraction of the
    cost (its header keys popped, what is left becomes ``fields``); anything unusual still goes
    through the full checks below, so what counts as valid, and every error, is the same.
    """
    if owned and obj.__class__ is dict:
        ev = _from_owned(obj)
        if ev is not None:
            return ev
    if not isinstance(obj, dict):
        raise EventError("an event must be a JSON object")
    v = obj.get("v")
    if v != SCHEMA_VERSION:
        raise EventVersionError(
            f"event schema version {v!r} is not the {SCHEMA_VERSION} this tplab reads; "
            "run the same tplab version on the client and the pod")
    for key in _HEADER:
        if key not in obj:
            raise EventError(f"event is missing header field {key!r}")
    seq, ts, src, type_ = obj["seq"], obj["ts"], obj["src"], obj["type"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise EventError(f"event seq must be a non-negative integer, got {seq!r}")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise EventError(f"event ts must be a number, got {ts!r}")
    if src not in SOURCES:
        raise EventError(f"event src must be one of {SOURCES}, got {src!r}")
    if not isinstance(type_, str):
        raise EventError("event type must be a string")
    fields = {k: val for k, val in obj.items() if k not in _HEADER}
    validate(type_, fields)
    return Event(type=type_, seq=seq, ts=float(ts), src=src, fields=fields, v=v)


def _from_owned(obj: dict[str, Any]) -> Event | None:
    """The common, valid case of ``from_dict(obj, owned=True)``; None sends it the long way."""
    get = obj.get
    seq = get("seq")
    ts = get("ts")
    src = get("src")
    type_ = get("type")
    spec = _SPECS.get(type_) if type_.__class__ is str else None
    if (spec is None or get("v") != SCHEMA_VERSION or seq.__class__ is not int or seq < 0
            or not (ts.__class__ is float or ts.__class__ is int) or src not in SOURCES):
        return None
    for name, types, bool_ok in spec:
        val = get(name, _MISSING)
        if not isinstance(val, types) or (val.__class__ is bool and not bool_ok):
            return None  # _MISSING is no instance of any field type
    pop = obj.pop
    pop("v")
    pop("seq")
    pop("ts")
    pop("src")
    ev = _new_event(Event)
    _set(ev, "type", pop("type"))
    _set(ev, "seq", seq)
    _set(ev, "ts", float(ts))
    _set(ev, "src", src)
    _set(ev, "fields", obj)
    _set(ev, "v", SCHEMA_VERSION)
    return ev


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` refusing NaN, Infinity and -Infinity (ValueError), as every event reader
    must: EventWriter never writes them."""
    return json.loads(text, parse_constant=_no_constant)


def decode_line(line: str | bytes) -> Event:
    """Decode one complete line (with or without its newline)."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventError(f"event line is not UTF-8: {exc}") from None
    line = line.strip()
    if not line:
        raise EventError("empty event line")
    try:
        obj = loads_strict(line)
    except json.JSONDecodeError as exc:
        raise EventError(f"event line is not JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # NaN / Infinity: never written by EventWriter
        raise EventError(f"event line is not strict JSON ({exc})") from None
    except RecursionError:
        raise EventError("event line is nested too deeply") from None
    return from_dict(obj)


def _no_constant(name: str) -> Any:
    """``json.loads``' hook for NaN, Infinity and -Infinity: refused (EventWriter never writes
    them, so one in an event line means the line did not come from it)."""
    raise ValueError(f"{name} is not a number JSON allows")


class EventDecoder:
    """Incremental decoder for a byte stream of JSON lines.

    ``feed`` takes whatever bytes arrived (possibly half a line, possibly many lines) and returns
    the complete events; a trailing partial line is held until its newline arrives, so a write in
    progress on the pod is neither dropped nor mis-parsed. ``offset`` is the number of bytes fully
    consumed (up to the last newline), i.e. the byte offset to resume a tail from.
    """

    def __init__(self, offset: int = 0) -> None:
        self._buf = bytearray()
        self.offset = offset

    @property
    def pending(self) -> int:
        """Bytes held back because their line is not complete yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Event]:
        self._buf.extend(data)
        events: list[Event] = []
        start = 0
        while True:
            nl = self._buf.find(b"\n", start)
            if nl < 0:
                break
            raw = bytes(self._buf[start:nl])
            consumed = nl + 1 - start
            start = nl + 1
            if raw.strip():
                try:
                    events.append(decode_line(raw))
                except EventError:
                    # keep the offset consistent before reporting the bad line
                    del self._buf[:start]
                    self.offset += consumed
                    raise
            self.offset += consumed
        del self._buf[:start]
        return events


class EventWriter:
    """Writes events with a monotonic ``seq`` to any number of text sinks, flushed per line.

    Thread-safe: the job's timing code and its heartbeat thread may both emit.
    """

    def __init__(self, sinks: Iterable[IO[str]] = (), src: str = "job", start_seq: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        if src not in SOURCES:
            raise ValueError(f"src must be one of {SOURCES}")
        self._sinks = list(sinks)
        self._src = src
        self._seq = start_seq
        self._clock = clock
        self._lock = threading.Lock()

    def add_sink(self, sink: IO[str]) -> None:
        self._sinks.append(sink)

    def make(self, type_: str, **fields: Any) -> Event:
        """Create the next event without writing it (the orchestrator uses this)."""
        validate(type_, fields)
        with self._lock:
            ev = Event(type=type_, seq=self._seq, ts=self._clock(), src=self._src, fields=fields)
            self._seq += 1
        return ev

    def emit(self, type_: str, **fields: Any) -> Event:
        validate(type_, fields)
        with self._lock:
            ev = Event(type=type_, seq=self._seq, ts=self._clock(), src=self._src, fields=fields)
            self._seq += 1
            line = ev.to_json() + "\n"
            for sink in self._sinks:
                sink.write(line)
                sink.flush()
        return ev


#: the most of an events file ``read_events`` reads (the lab fetches at most as much)
READ_LIMIT = 256 << 20


def read_events(path: str, limit: int = READ_LIMIT) -> Iterator[Event]:
    """Read every complete event of an ``events.jsonl`` file (a partial last line is skipped),
    at most ``limit`` bytes of it; a path that is not a regular file is an OSError."""
    from tplab.util.bounded_read import iter_chunks
    dec = EventDecoder()
    for chunk in iter_chunks(path, limit):
        yield from dec.feed(chunk)

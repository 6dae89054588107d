"""The one wire contract between the job on the pod, the SSH transport and the views: typed events.

Every event is one JSON object on one line (JSON lines). The job writes them to ``events.jsonl``
(flushed per line) and to stdout; the client tails that file over SSH and resumes from its last
byte offset; the orchestrator adds its own events (stages, cost ticks, budget, SSH state); the
dashboard and the headless runner both read the merged stream.

Each event type is a dataclass below (``TokenEvent``, ``BudgetEvent``, ...) that declares every
field it may carry, with its kind and bounds (``tplab.records.untrusted``: a count, an amount, a
label, ...) and which are optional. Its producer (the job or the lab) builds it and an
``EventWriter`` checks it, stamps it and writes it; on the other side ``from_dict`` (the one
decoder, under ``decode_line``, ``EventDecoder`` and the client's tail) checks each field of the
untrusted line against the same declarations and builds the same dataclass, so every reader
gets typed, checked attributes (``ev.ms``) and checks nothing again. A line is flat::

    {"v": 1, "seq": 17, "ts": 1764450000.123, "src": "job", "type": "token",
     "mode": "tp", "prompt": 0, "pos": 3, "ms": 1.21, "ar_ms": 0.41, "token": 42}

``v`` is the schema version, ``seq`` is monotonic per source (``src`` is ``job`` for what the
pod's job wrote and ``lab`` for what the orchestrator added), so "every job event exactly once"
is checkable from ``seq`` alone. An optional field at its default is not written.

Older streams (``stream.jsonl`` of past labs, the shipped example, replays): the line format is
the same version 1 it has been; a field an older tplab did not write takes its default, a field
it wrote that is no longer declared is ignored, a line that fails a check is dropped as a bad
line (and counted) like any other. A line of another version is refused whole
(``EventVersionError``): client and pod run the same tplab. A type or field is renamed in
Python only: its name on the wire stays (``StageEvent`` is ``"phase"`` there, and a heartbeat's
stage its ``phase`` field), so every stream ever written reads the same.

Standard library only: this module travels to the pod.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import IO, Annotated, Any, Callable, ClassVar, Iterable, Iterator

from tplab.records.dmodel import DModelPoint
from tplab.records.untrusted import (
    MAX_COUNT, MAX_FIGURE, Amount, Count, Counts, Field, Filler, Int, Label, Labels, LongText, Nested,
    Refused, Signed, check, fields_of, filler, one_of, shown)

SCHEMA_VERSION = 1
SOURCES = ("job", "lab")
_HEADER = ("v", "seq", "ts", "src", "type")
_new = object.__new__

#: a decode mode of the token stream
TokenMode = Annotated[str, one_of("single", "tp")]
LogLevel = Annotated[str, one_of("debug", "info", "warning", "error")]
SshState = Annotated[str, one_of("connecting", "connected", "dropped", "closed")]


class EventError(ValueError):
    """A line that is not a valid tplab event (bad JSON, unknown type, a field missing or not of
    its kind); the text says which field and why."""


class EventVersionError(EventError):
    """An event written by a tplab with a different schema version."""


@dataclass(slots=True, kw_only=True)
class Event:
    """What every event has: its source's sequence number, its time and its source. An event
    is built by its producer, stamped once by the ``EventWriter`` (or the decoder) and not
    changed after: subscribers share it."""

    #: the event's type on the wire ("token", "budget", ...)
    type: ClassVar[str] = ""
    #: its fields and their checks (made from the dataclass's declarations, at import)
    wire_fields: ClassVar[tuple[Field, ...]] = ()
    #: sets those fields on a new event from a JSON object, checked (``untrusted.filler``)
    fill: ClassVar[Filler]

    seq: int = -1
    ts: float = 0.0
    src: str = "job"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": SCHEMA_VERSION, "seq": self.seq, "ts": self.ts,
                               "src": self.src, "type": self.type}
        out.update(self._to_wire())
        return out

    def to_json(self) -> str:
        """One line, no trailing newline."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    # ---- each type's fields on the wire (a type with a nested record flat in it overrides)
    def _to_wire(self) -> dict[str, Any]:
        out = {}
        for f in self.wire_fields:
            v = getattr(self, f.name)
            if f.required or v != f.default:
                out[f.name] = v
        return out

    @classmethod
    def _from_wire(cls, obj: dict[str, Any], seq: int, ts: float, src: str,
                   owned: bool) -> Event:
        ev = _new(cls)
        ev.seq, ev.ts, ev.src = seq, ts, src
        return cls.fill(ev, obj)

    def _check(self) -> None:
        check(self.wire_fields, self)


# ============================================================================================
# the event types


@dataclass(slots=True, kw_only=True)
class StageEvent(Event):
    """A stage of the lab or of the job begins (``src`` says whose); each stage adds the fields
    that say what it does. ``phase`` is its type on the wire, the name it has always had there."""

    type: ClassVar[str] = "phase"
    #: lab: preflight, authorize, create, boot, connect, upload, run, fetch, terminate, verify,
    #: record, manifest, done; job: setup, load, warmup, decode, profile, sweep, d_model_sweep,
    #: results, finished
    name: Label
    # preflight (and a replay's plan): what the lab was asked to do
    num_prompts: Count | None = None
    new_tokens: Count | None = None
    world_size: Count | None = None
    lab_id: Label | None = None
    mock: bool | None = None
    # authorize
    amount_usd: Amount | None = None
    label: LongText | None = None
    # terminate, verify, done
    pod_id: Label | None = None
    # done
    status: Label | None = None
    reason: LongText | None = None
    out_dir: LongText | None = None
    verified_gone: bool | None = None
    exit_code: Int | None = None
    manifest: LongText | None = None
    # the job's setup, load, warmup, decode, profile, sweep, d_model_sweep, finished
    rank_count: Count | None = None
    backend: Label | None = None
    comm: Label | None = None
    checkpoint: LongText | None = None
    modes: Labels | None = None
    order: LongText | None = None
    transports: Labels | None = None
    tokens: Count | None = None
    d_models: Counts | None = None
    budget_s: Amount | None = None
    wall_s: Amount | None = None


@dataclass(slots=True, kw_only=True)
class LogEvent(Event):
    """A line for the log; ``headline``: one every face shows, also the terse headless one (a
    choice the lab made for the user, e.g. which cloud ``--provider auto`` picked)."""

    type: ClassVar[str] = "log"
    level: LogLevel
    msg: LongText
    headline: bool = False


@dataclass(slots=True, kw_only=True)
class TokenEvent(Event):
    """One decoded token of one mode (the single mode's and the primary transport's TP).

    ``ms`` is the plain pass's step time; ``ar_ms`` the instrumented pass's all-reduce time in
    the same step (0.0 when not measured: ``ar_measured`` False), ``ms_instrumented`` that
    instrumented step's own time and ``ar_calls`` its collectives."""

    type: ClassVar[str] = "token"
    mode: TokenMode
    prompt: Count
    pos: Count
    ms: Amount
    ar_ms: Amount
    token: Count | None = None
    ar_measured: bool = False
    ms_instrumented: Amount | None = None
    ar_calls: Count | None = None


@dataclass(slots=True, kw_only=True)
class PromptDoneEvent(Event):
    """One prompt finished in one mode: the decoded correction (the prompt's unknown words
    written back) and the number of new tokens; a TP pass adds whether it matched the single
    device's and over which transport (``--comm both``: the other transport's mode is
    ``tp-<comm>``)."""

    type: ClassVar[str] = "prompt_done"
    mode: Label
    prompt: Count
    text: LongText
    n_tokens: Count
    match: bool | None = None
    comm: Label | None = None


@dataclass(slots=True, kw_only=True)
class SweepEvent(Event):
    """One size of the all-reduce sweep: message bytes, the median ms of its rounds, algorithm
    and bus bandwidth (GB/s); on the CPU the slowest rank's p99, the rounds' spread and
    whether it was flagged unstable; the transport."""

    type: ClassVar[str] = "sweep"
    bytes: Count
    ms: Amount
    algbw_gbps: Amount
    busbw_gbps: Amount
    p99_ms: Amount | None = None
    spread: Amount | None = None
    unstable: bool | None = None
    comm: Label | None = None


@dataclass(slots=True, kw_only=True)
class SweepPointEvent(Event):
    """One size of the d_model sweep (``tplab.job.dmodel_sweep``): measured, its
    ``DModelPoint`` (``tplab.records.dmodel``), whose fields sit flat in the event as
    results.json's ``d_model_sweep`` holds them; skipped, the reason."""

    type: ClassVar[str] = "sweep_point"
    d_model: Count
    skipped: bool
    reason: LongText = ""
    point: DModelPoint | None = None

    def _to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"d_model": self.d_model, "skipped": self.skipped}
        if self.reason:
            out["reason"] = self.reason
        if self.point is not None:
            out.update(self.point.to_dict())
        return out

    @classmethod
    def _from_wire(cls, obj: dict[str, Any], seq: int, ts: float, src: str,
                   owned: bool) -> Event:
        ev = _new(cls)
        ev.seq, ev.ts, ev.src = seq, ts, src
        cls.fill(ev, obj)
        ev.point = None if ev.skipped else _fill_point(_new(DModelPoint), obj)
        return ev

    def _check(self) -> None:
        check(self.wire_fields, self)
        if (self.point is None) != self.skipped:
            raise Refused("carries a measured point exactly when it is not skipped")
        if self.point is not None:
            check(_POINT_FIELDS, self.point)
            if self.point.d_model != self.d_model:
                raise Refused(f"field 'd_model' {self.d_model} is not its point's "
                              f"{self.point.d_model}")


@dataclass(slots=True, kw_only=True)
class TimelineEvent(Event):
    """The profiled pass, split rank by rank: results.json's ``timeline`` section, built and
    described by ``tplab.records.timeline.timeline_section`` and read by
    ``tplab.viewmodel.timeline_view.timeline_from``; its keys sit flat in the event."""

    type: ClassVar[str] = "timeline"
    section: Nested

    def _to_wire(self) -> dict[str, Any]:
        return dict(self.section)

    @classmethod
    def _from_wire(cls, obj: dict[str, Any], seq: int, ts: float, src: str,
                   owned: bool) -> Event:
        section = obj if owned else dict(obj)
        for key in _HEADER:
            section.pop(key, None)
        ev = cls(seq=seq, ts=ts, src=src, section=section)
        ev._check()
        return ev

    def _check(self) -> None:
        check(self.wire_fields, self)
        if self.section.get("modes").__class__ is not dict:
            raise Refused("has no object 'modes' (each mode's profiled steps)")
        if any(key in self.section for key in _HEADER):
            raise Refused(f"has a section key that is a header's ({', '.join(_HEADER)})")


@dataclass(slots=True, kw_only=True)
class ResultEvent(Event):
    """The job's summary: the content of results.json (``tplab.records.results``)."""

    type: ClassVar[str] = "result"
    results: Nested


@dataclass(slots=True, kw_only=True)
class FiguresEvent(Event):
    """The lab's figures as one record (``tplab.figures.lab_figures.LabFigures.to_dict``):
    written by the lab once its results, cost and crossover are known, before ``done``; what
    every face renders. The lab writes it, never the job."""

    type: ClassVar[str] = "figures"
    figures: Nested


@dataclass(slots=True, kw_only=True)
class ErrorEvent(Event):
    """Something failed; ``fatal``: the run is over."""

    type: ClassVar[str] = "error"
    msg: LongText
    fatal: bool


@dataclass(slots=True, kw_only=True)
class HeartbeatEvent(Event):
    """Liveness: the job's (with its current stage) or the lab's (``age_s``: the age of the
    client's last heartbeat write on the pod)."""

    type: ClassVar[str] = "heartbeat"
    #: the job's current stage (``phase`` is the field's name on the wire, kept as it was written)
    phase: Label | None = None
    age_s: Amount | None = None


@dataclass(slots=True, kw_only=True)
class CostEvent(Event):
    """The lab's cost figure (``tplab.money.lab_money.LabMoney.cost``): the dollars, the price,
    the seconds left before a cap, and the lab's authorization; ``cost_is`` says what the
    figure is ("estimate": price x seconds while the pod may bill; "billed": the provider's
    bill, recorded once the pod was shown gone, the one every face shows after GONE),
    ``ran_s`` the pod's life it counts, ``ended_at`` when the provider showed the pod gone,
    ``held_for_pod`` the pod whose unproven end keeps the lab's authorization held."""

    type: ClassVar[str] = "cost"
    accrued_usd: Amount
    usd_per_hr: Amount
    seconds_left: Amount
    authorized_usd: Amount | None = None
    cost_is: Annotated[str, one_of("estimate", "billed")] | None = None
    ran_s: Amount | None = None
    ended_at: Amount | None = None
    held_for_pod: Label | None = None


@dataclass(slots=True, kw_only=True)
class BudgetEvent(Event):
    """The ledger's figures (``BudgetGuard``): the phase cap, spent, held and what remains
    (below zero once overspent); this lab's authorization and ledger label, and how many of the
    ledger's lines are damaged (left out of those figures)."""

    type: ClassVar[str] = "budget"
    cap_usd: Amount
    spent_usd: Amount
    held_usd: Amount
    remaining_usd: Signed
    authorized_usd: Amount | None = None
    label: LongText | None = None
    damaged_lines: Count | None = None
    #: money held for a pod whose end is not proven ("pod 4711 not yet proven gone")
    held_for: LongText | None = None


@dataclass(slots=True, kw_only=True)
class InstanceEvent(Event):
    """The pod as the provider reports it (``state``: CREATED, RUNNING, GONE, ...), its price,
    its SSH endpoint once there is one, and its uptime."""

    type: ClassVar[str] = "instance"
    state: Label
    pod_id: Label | None = None
    provider: Label | None = None
    gpu_type: Label | None = None
    gpu_count: Count | None = None
    spot: bool | None = None
    usd_per_hr: Amount | None = None
    ssh_host: Label | None = None
    ssh_port: Count | None = None
    uptime_s: Amount | None = None


@dataclass(slots=True, kw_only=True)
class SshEvent(Event):
    """The SSH connection to the pod: the endpoint being connected (``via`` "proxy" through
    the provider's proxy), or why it dropped, how often, and the byte the tail resumes at."""

    type: ClassVar[str] = "ssh"
    state: SshState
    host: Label | None = None
    port: Count | None = None
    via: Label | None = None
    reason: LongText | None = None
    drops: Count | None = None
    resume_offset: Count | None = None


@dataclass(slots=True, kw_only=True)
class WarningEvent(Event):
    """Something the user should look at; ``kind`` names the ones a face treats apart
    (``budget80``: 80% of the authorization accrued; ``detached``: the pod was left running,
    with its ``pod_id`` and the ``command`` that ends it), ``pods`` the leftover pods found."""

    type: ClassVar[str] = "warning"
    msg: LongText
    kind: Label | None = None
    pod_id: Label | None = None
    command: LongText | None = None
    pods: Labels | None = None


#: every event type by its name on the wire
EVENT_TYPES: dict[str, type[Event]] = {cls.type: cls for cls in (
    StageEvent, LogEvent, TokenEvent, PromptDoneEvent, SweepEvent, SweepPointEvent,
    TimelineEvent, ResultEvent, FiguresEvent, ErrorEvent, HeartbeatEvent, CostEvent, BudgetEvent,
    InstanceEvent, SshEvent, WarningEvent)}
for _cls in EVENT_TYPES.values():
    _cls.wire_fields = fields_of(_cls, skip=("seq", "ts", "src", "point"))
    _cls.fill = staticmethod(filler(_cls.wire_fields))
#: a measured d_model point's fields, as the sweep_point event carries them
_POINT_FIELDS = fields_of(DModelPoint)
_fill_point = filler(_POINT_FIELDS, frozen=True)


def event(type_: str, **fields: Any) -> Event:
    """The event of type ``type_`` with ``fields``, checked (``EventError`` names the field):
    the untyped form of building one, for ``emit("budget", cap_usd=...)``."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise EventError(f"unknown event type {type_!r}")
    try:
        ev = cls(**fields)
    except TypeError as exc:  # a field not declared, or a required one missing
        raise EventError(f"{type_} event: {exc} (its fields are declared in "
                         f"tplab.records.events.{cls.__name__})") from None
    return ev


def check_event(ev: Event) -> None:
    """``EventError`` unless every field of ``ev`` is of its declared kind (what the decoder
    would refuse is never written)."""
    try:
        ev._check()
    except Refused as exc:
        raise EventError(f"{ev.type} event {exc}") from None


# ============================================================================================
# decoding: the one validation at the boundary

def from_dict(obj: Any, *, owned: bool = False) -> Event:
    """The typed event of a decoded JSON object, every field checked; ``EventError`` says
    what is wrong with it.

    ``owned=True`` says ``obj`` is a dict fresh from ``json.loads`` that the caller gives away
    (the client's tail, its hot path): a nested record flat in the event (the timeline's
    section) is then taken as it is instead of copied.
    """
    if obj.__class__ is not dict:
        raise EventError("an event must be a JSON object")
    get = obj.get
    v = get("v")
    if v.__class__ is not int or v != SCHEMA_VERSION:
        raise EventVersionError(
            f"event schema version {shown(v)} is not the {SCHEMA_VERSION} this tplab reads; "
            "run the same tplab version on the client and the pod")
    type_, seq, ts, src = get("type"), get("seq"), get("ts"), get("src")
    if type_ is None or seq is None or ts is None or src is None:
        missing = next(k for k in ("type", "seq", "ts", "src") if obj.get(k) is None)
        raise EventError(f"event is missing header field {missing!r}")
    cls = EVENT_TYPES.get(type_) if type_.__class__ is str else None
    if cls is None:
        raise EventError(f"unknown event type {shown(type_)}" if type_.__class__ is str
                         else "event type must be a string")
    if seq.__class__ is not int or not 0 <= seq <= MAX_COUNT:
        raise EventError(f"event seq must be a non-negative integer, got {shown(seq)}")
    if not ((ts.__class__ is float or ts.__class__ is int) and 0 <= ts <= MAX_FIGURE):
        raise EventError(f"event ts must be a finite number from 0, got {shown(ts)}")
    if src.__class__ is not str or src not in SOURCES:
        raise EventError(f"event src must be one of {SOURCES}, got {shown(src)}")
    try:
        return cls._from_wire(obj, seq, float(ts), src, owned)
    except Refused as exc:
        raise EventError(f"{type_} event {exc}") from None


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
    return from_dict(obj, owned=True)


def _no_constant(name: str) -> Any:
    """``json.loads``' hook for NaN, Infinity and -Infinity: refused (EventWriter never writes
    them, so one in an event line means the line did not come from it)."""
    raise ValueError(f"{name} is not a number JSON allows")


class EventDecoder:
    """Incremental decoder for a byte stream of JSON lines.

    ``feed`` takes whatever bytes arrived (possibly half a line, possibly many lines) and returns
    the complete events; a trailing partial line is held until its newline arrives, so a write in
    progress on the pod is neither dropped nor mis-parsed. ``offset`` is the number of bytes fully
    consumed (up to the last newline), i.e. the byte offset to resume a tail from. A line that is
    not a valid event raises ``EventError`` (after it is consumed), or with ``skip_bad`` is
    counted in ``bad_lines`` and skipped (a recorded stream read back: the good lines around a
    damaged one still count).
    """

    def __init__(self, offset: int = 0, skip_bad: bool = False) -> None:
        self._buf = bytearray()
        self.offset = offset
        self.skip_bad = skip_bad
        self.bad_lines = 0

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
                    self.bad_lines += 1
                    if not self.skip_bad:
                        # keep the offset consistent before reporting the bad line
                        del self._buf[:start]
                        self.offset += consumed
                        raise
            self.offset += consumed
        del self._buf[:start]
        return events


# ============================================================================================
# writing


class EventWriter:
    """Checks, stamps (``seq``, ``ts``, ``src``) and writes events to any number of text sinks,
    flushed per line. ``emit(TokenEvent(...))`` is the typed form; ``emit("token", ms=...)``
    builds the same event from its type's name.

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

    def make(self, ev: Event | str, /, **fields: Any) -> Event:
        """The next event, checked and stamped, without writing it (the orchestrator publishes
        its own)."""
        if isinstance(ev, str):
            ev = event(ev, **fields)
        elif fields:
            raise TypeError("fields are given either in the event or by name, not both")
        check_event(ev)
        with self._lock:
            self._stamp(ev)
        return ev

    def emit(self, ev: Event | str, /, **fields: Any) -> Event:
        """Check, stamp and write one event (a line on every sink, flushed)."""
        if isinstance(ev, str):
            ev = event(ev, **fields)
        elif fields:
            raise TypeError("fields are given either in the event or by name, not both")
        check_event(ev)
        with self._lock:
            self._stamp(ev)
            line = ev.to_json() + "\n"
            for sink in self._sinks:
                sink.write(line)
                sink.flush()
        return ev

    def _stamp(self, ev: Event) -> None:
        ev.seq, ev.ts, ev.src = self._seq, self._clock(), self._src
        self._seq += 1


#: the most of an events file ``read_events`` reads (the lab fetches at most as much)
READ_LIMIT = 256 << 20


def read_events(path: str, limit: int = READ_LIMIT) -> Iterator[Event]:
    """Read every complete event of an ``events.jsonl`` file (a partial last line is skipped),
    at most ``limit`` bytes of it; a path that is not a regular file is an OSError."""
    from tplab.util.bounded_read import iter_chunks
    dec = EventDecoder()
    for chunk in iter_chunks(path, limit):
        yield from dec.feed(chunk)

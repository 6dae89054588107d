"""The profiled pass as the views read it: each token step as lanes, one per rank.

Why here: the dashboard's timeline view, ``tplab run``'s and ``tplab local``'s final tables and
``tplab timeline`` all show the same thing — where one token's time went on each rank — so the
record the job wrote (results.json's ``timeline``, also the ``timeline`` event; built by
``tplab.records.timeline``) is read once, here, into typed records, and each lane is cut into
segments (compute, on the wire, waiting, rest) and into character cells here too. The pod is
untrusted: every figure is checked, every list bounded, and a record that is not one gives None.

Standard library only: no torch, no textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tplab.records.untrusted import finite, finite_list

#: the kinds of a lane's segments, and each one's cell (distinct without colour)
KINDS = ("compute", "wire", "wait", "rest")
CELL = {"compute": "█", "wire": "▒", "wait": "░", "rest": " "}
LEGEND = "█ compute ▒ on the wire ░ waiting, blank: rest"
#: bounds on what is read from the pod's record
MAX_TOKENS, MAX_RANKS, MAX_COLLECTIVES, MAX_BUSY = 64, 64, 256, 256


@dataclass(frozen=True)
class Segment:
    """A stretch of one rank's lane: ``kind`` from ``start`` to ``end`` (µs after the step's
    earliest start); ``label`` names the collective for wire and wait."""

    kind: str
    start: float
    end: float
    label: str = ""


@dataclass(frozen=True)
class Lane:
    """One rank in one step: its window, its four parts (µs) and its segments in time order."""

    rank: int
    start: float
    end: float
    compute_us: float
    wire_us: float
    wait_us: float
    rest_us: float
    step_us: float | None
    segments: tuple[Segment, ...]

    @property
    def token_us(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Collective:
    """One collective of a step: its name, short label, op, the last rank's arrival and each
    rank's own start and end (in the lanes' rank order)."""

    name: str
    short: str
    op: str
    arrive: float
    starts: tuple[float, ...]
    ends: tuple[float, ...]


@dataclass(frozen=True)
class Step:
    """One profiled token step of one mode, every rank's lane."""

    mode: str
    pos: int
    lanes: tuple[Lane, ...]
    collectives: tuple[Collective, ...]

    @property
    def span_us(self) -> float:
        return max((lane.end for lane in self.lanes), default=0.0)


@dataclass(frozen=True)
class Split:
    """A mode's medians over its profiled steps (µs; per step the mean over the ranks) and the
    all-reduces' split per call."""

    tokens: int
    token_us: float
    compute_us: float
    wire_us: float
    wait_us: float
    rest_us: float
    allreduce_calls: float | None = None
    allreduce_us_per_call: float | None = None
    allreduce_wait_us_per_call: float | None = None
    allreduce_wire_us_per_call: float | None = None
    allreduce_share: float | None = None
    ranks: int = 2

    @property
    def wait_share(self) -> float | None:
        """The waiting part of an all-reduce's time (0..1)."""
        us, wait = self.allreduce_us_per_call, self.allreduce_wait_us_per_call
        return wait / us if us and wait is not None else None


@dataclass(frozen=True)
class Timeline:
    """The profiled pass: each mode's steps and medians, what carried the TP collectives, how
    the clocks were aligned, the sum check and the trace file."""

    steps: dict[str, tuple[Step, ...]]
    splits: dict[str, Split]
    comm: str
    alignment: str
    sum_worst: float | None
    trace_file: str
    trace_note: str

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m in ("tp", "single") if self.steps.get(m))


def _segments(start: float, end: float, busy: list[tuple[float, float]],
              colls: list[tuple[str, float, float, float]]) -> tuple[Segment, ...]:
    """The lane cut into segments: each collective's wait (own start to the last arrival) and
    wire (to its end), compute where it was busy, rest in between."""
    marks: list[Segment] = []
    for label, a, arrive, b in colls:
        if arrive > a:
            marks.append(Segment("wait", a, min(arrive, b), label))
        if b > arrive:
            marks.append(Segment("wire", max(a, arrive), b, label))
    for s, e in busy:
        marks.append(Segment("compute", s, e))
    marks.sort(key=lambda m: (m.start, m.kind != "wait"))
    out: list[Segment] = []
    cursor = start
    for m in marks:
        s = max(m.start, cursor)
        if m.end <= s:
            continue
        if s > cursor:
            out.append(Segment("rest", cursor, s))
        out.append(Segment(m.kind, s, min(m.end, end), m.label))
        cursor = min(m.end, end)
        if cursor >= end:
            break
    if cursor < end:
        out.append(Segment("rest", cursor, end))
    return tuple(out)


def _step(raw: Any) -> Step | None:
    if not isinstance(raw, dict) or raw.get("mode") not in ("single", "tp"):
        return None
    pos, ranks, colls = raw.get("pos"), raw.get("ranks"), raw.get("collectives")
    if not isinstance(pos, int) or not isinstance(ranks, list) or not isinstance(colls, list):
        return None
    if not 0 < len(ranks) <= MAX_RANKS or len(colls) > MAX_COLLECTIVES:
        return None
    n = len(ranks)
    collectives = []
    for c in colls:
        if not isinstance(c, dict):
            return None
        starts, ends = finite_list(c.get("start"), n), finite_list(c.get("end"), n)
        arrive = finite(c.get("arrive"))
        if starts is None or ends is None or arrive is None:
            return None
        collectives.append(Collective(str(c.get("name", ""))[:60], str(c.get("short", ""))[:4],
                                      str(c.get("op", ""))[:12], arrive, starts, ends))
    lanes = []
    for k, r in enumerate(ranks):
        if not isinstance(r, dict) or not isinstance(r.get("rank"), int):
            return None
        vals = [finite(r.get(f)) for f in ("start", "end", "compute_us", "wire_us", "wait_us",
                                         "rest_us")]
        if any(v is None for v in vals):
            return None
        start, end, comp, wire, wait, rest = (float(v) for v in vals)  # type: ignore[arg-type]
        busy_raw: list[Any] = r["busy"] if isinstance(r.get("busy"), list) else []
        busy = [(b[0], b[1]) for b in (finite_list(x, 2) for x in busy_raw[:MAX_BUSY]) if b]
        lane_colls = [(c.short, c.starts[k], c.arrive, c.ends[k]) for c in collectives]
        lanes.append(Lane(r["rank"], start, end, comp, wire, wait, rest, finite(r.get("step_us")),
                          _segments(start, end, busy, lane_colls)))
    return Step(raw["mode"], pos, tuple(lanes), tuple(collectives))


def _split(raw: Any) -> Split | None:
    if not isinstance(raw, dict):
        return None
    keys = ("token_us", "compute_us", "wire_us", "wait_us", "rest_us")
    vals = {k: finite(raw.get(k)) for k in keys}
    if any(v is None for v in vals.values()) or not isinstance(raw.get("tokens"), int):
        return None
    ar: dict[str, Any] = raw["allreduce"] if isinstance(raw.get("allreduce"), dict) else {}
    return Split(raw["tokens"], **{k: float(v or 0.0) for k, v in vals.items()},
                 allreduce_calls=finite(ar.get("calls_per_token")),
                 allreduce_us_per_call=finite(ar.get("us_per_call")),
                 allreduce_wait_us_per_call=finite(ar.get("wait_us_per_call")),
                 allreduce_wire_us_per_call=finite(ar.get("wire_us_per_call")),
                 allreduce_share=finite(ar.get("share_of_token")),
                 ranks=len(raw["ranks"]) if isinstance(raw.get("ranks"), list) else 2)


def timeline_from(section: Any) -> Timeline | None:
    """The typed timeline of a results.json ``timeline`` section (or a ``timeline`` event's
    fields); None when it is not one."""
    if not isinstance(section, dict) or not isinstance(section.get("modes"), dict):
        return None
    steps: dict[str, tuple[Step, ...]] = {}
    splits: dict[str, Split] = {}
    for mode in ("tp", "single"):
        raw = section["modes"].get(mode)
        if not isinstance(raw, dict) or not isinstance(raw.get("tokens"), list):
            continue
        got = [s for s in (_step(t) for t in raw["tokens"][:MAX_TOKENS]) if s is not None]
        if got:
            steps[mode] = tuple(got)
        split = _split(raw.get("median"))
        if split is not None:
            splits[mode] = split
    if not steps:
        return None
    clock: dict[str, Any] = section["clock"] if isinstance(section.get("clock"), dict) else {}
    trace: dict[str, Any] = section["trace"] if isinstance(section.get("trace"), dict) else {}
    check: dict[str, Any] = (section["sum_check"] if isinstance(section.get("sum_check"), dict)
                             else {})
    return Timeline(steps=steps, splits=splits, comm=str(section.get("comm", "?"))[:16],
                    alignment=str(clock.get("alignment", ""))[:300],
                    sum_worst=finite(check.get("worst")),
                    trace_file=str(trace.get("file", "trace.json"))[:64],
                    trace_note=str(trace.get("note", ""))[:300])


def _cover(lane: Lane, span_us: float, width: int) -> list[dict[str, float]]:
    """µs of each kind in each of ``width`` cells over ``span_us``, compute scaled to the split:
    a lane's busy intervals are bounded in number, so where their gaps were closed they cover
    more than the profiler's compute; the excess is drawn as rest, spread over them evenly."""
    dt = span_us / width
    cover = [{k: 0.0 for k in KINDS} for _ in range(width)]
    for seg in lane.segments:
        first, last = int(seg.start / dt), min(width - 1, int(max(seg.start, seg.end - 1e-9) / dt))
        for c in range(max(0, first), last + 1):
            lo, hi = max(seg.start, c * dt), min(seg.end, (c + 1) * dt)
            if hi > lo:
                cover[c][seg.kind] += hi - lo
    drawn = sum(cv["compute"] for cv in cover)
    if drawn > lane.compute_us > 0 or (drawn > 0 and lane.compute_us == 0):
        keep = lane.compute_us / drawn
        for cv in cover:
            cv["rest"] += cv["compute"] * (1 - keep)
            cv["compute"] *= keep
    return cover


def lane_cells(lane: Lane, span_us: float, width: int) -> list[str]:
    """The lane as ``width`` cells of kinds (``KINDS``), time running left to right over
    ``span_us``, drawn to the split: each kind gets as many cells as its time fills (within a
    cell or two), placed where the profiler saw it (error diffusion: a cell goes to the kind
    present in it that is furthest behind its share), and a collective's wire or wait wins a
    cell once it covers a third of it (a short collective must not vanish). So a token that is
    30 % rest shows 30 % blank, however finely its ops and gaps interleave."""
    if width <= 0 or span_us <= 0:
        return []
    dt = span_us / width
    owed = {k: 0.0 for k in KINDS}
    cells = []
    for cv in _cover(lane, span_us, width):
        if sum(cv.values()) <= 0:
            cells.append("")
            continue
        for k in KINDS:
            owed[k] += cv[k] / dt
        comm = max(("wire", "wait"), key=lambda k: cv[k])
        kind = comm if cv[comm] >= dt / 3 else max(
            (k for k in KINDS if cv[k] > 0), key=lambda k: owed[k])
        owed[kind] -= 1.0
        cells.append(kind)
    return cells


def label_row(step: Step, lane_index: int, span_us: float, width: int) -> str:
    """The collectives' short labels ("E", "3a", "3m", "G") over a lane, each at the column of
    its start on that rank, left out where the previous one has not ended."""
    row = [" "] * width
    if width <= 0 or span_us <= 0:
        return ""
    free = 0
    for c in step.collectives:
        col = int(c.starts[lane_index] / span_us * width)
        if col < free or col + len(c.short) > width:
            continue
        row[col:col + len(c.short)] = list(c.short)
        free = col + len(c.short) + 1
    return "".join(row).rstrip()


def dropped_labels(step: Step, lane_index: int, span_us: float, width: int) -> list[str]:
    """The collectives' labels ``label_row`` leaves out at this width (no room beside the one
    before), so a face can say so instead of dropping them without a word."""
    shown = set(label_row(step, lane_index, span_us, width).split())
    return [c.short for c in step.collectives if c.short not in shown]


def dropped_text(labels: list[str]) -> str:
    """'labels 4a, 5a not shown: no room at this width', or ''."""
    if not labels:
        return ""
    few = ", ".join(labels[:6]) + (f" and {len(labels) - 6} more" if len(labels) > 6 else "")
    return f"label{'s' if len(labels) > 1 else ''} {few} not shown: no room at this width"


@dataclass(frozen=True)
class ScaledLane:
    """One mode's median token as one lane on a scale shared with the other mode."""

    mode: str
    rank: int
    span_us: float
    cells: tuple[str, ...]


def to_scale(t: Timeline, width: int) -> tuple[list[ScaledLane], float]:
    """Each mode's median profiled token (its rank 0 lane), all drawn on one time scale, the
    longest filling ``width`` cells: (the lanes, µs per cell). The slowdown TP is about is then
    seen as length, not read off two different scales."""
    picked = []
    for mode in t.modes:
        steps = sorted(t.steps[mode], key=lambda s: s.span_us)
        if steps:
            picked.append(steps[len(steps) // 2])
    longest = max((s.span_us for s in picked), default=0.0)
    if width <= 0 or longest <= 0:
        return [], 0.0
    per_cell = longest / width
    lanes = []
    for step in picked:
        lane = step.lanes[0]
        n = max(1, round(step.span_us / per_cell))
        lanes.append(ScaledLane(step.mode, lane.rank, step.span_us,
                                tuple(lane_cells(lane, step.span_us, n))))
    return lanes, per_cell


def scale_text(lanes: list[ScaledLane], per_cell: float) -> str:
    """'one scale, 390 µs a cell: middle tokens TP 29.7 ms = 15.4× single 1929 µs': the tokens
    drawn (each mode's middle one by span), not the split's medians."""
    spans = {lane.mode: lane.span_us for lane in lanes}
    out = f"one scale, {us(per_cell)} a cell"
    if "tp" in spans and "single" in spans and spans["single"] > 0:
        out += (f": middle tokens TP {us(spans['tp'])} = {spans['tp'] / spans['single']:.1f}× "
                f"single {us(spans['single'])}")
    return out


def us(v: float | None) -> str:
    """µs below 10 ms, else ms."""
    if v is None:
        return "-"
    return f"{v:.0f} µs" if abs(v) < 10_000 else f"{v / 1000:.1f} ms"


def split_text(s: Split) -> str:
    """'16.0 ms a token; medians: compute 1676, wire 12137, wait 111, rest 1426 µs' (each part's
    own median over the steps, so they need not add up to the token's)."""
    return (f"{us(s.token_us)} a token; medians: compute {s.compute_us:.0f}, wire "
            f"{s.wire_us:.0f}, wait {s.wait_us:.0f}, rest {s.rest_us:.0f} µs")


def allreduce_text(s: Split) -> str | None:
    """'of 1239 µs per all-reduce, 149 µs (12%) is waiting for the other rank'."""
    share = s.wait_share
    if s.allreduce_us_per_call is None or s.allreduce_wait_us_per_call is None or share is None:
        return None
    other = "the other rank" if s.ranks <= 2 else "the last rank to arrive"
    return (f"of {s.allreduce_us_per_call:.0f} µs per all-reduce, "
            f"{s.allreduce_wait_us_per_call:.0f} µs ({share:.0%}) is waiting for {other}, "
            f"{s.allreduce_wire_us_per_call or 0:.0f} µs on the wire")

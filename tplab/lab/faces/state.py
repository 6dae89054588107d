"""Fold the lab's event stream into one snapshot that views can draw from.

The dashboard and the headless runner both consume the orchestrator's merged event stream
(``tplab/events.py``). Neither should re-derive lab facts on its own, and neither should keep
every raw event: a lab emits a token event per decoded token per mode, which at GPU speed is
thousands per second. So this module keeps *one* mutable ``LabState`` that ``apply(event)``
updates in O(1), with every per-sample store bounded:

* recent per-token timings live in fixed-length deques (what a live plot needs);
* running p50 / p99 come from a log-spaced histogram (fixed number of bins, ~1 % relative error),
  so percentiles cover the whole run without keeping the samples;
* the log is a bounded deque with a running sequence number, so a view can append only what it
  has not written yet.

A view redraws from this snapshot on its own timer and compares ``rev`` to skip work when
nothing changed. Time-derived figures (time in state, uptime, heartbeat age, seconds left) are
extrapolated from the event's timestamp with an injectable clock so tests are deterministic.

Standard library only: no torch, no textual (a test enforces the latter for all of ``tplab/``).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from tplab.cloud.base import GONE_STATES
from tplab.events import Event
from tplab.lab.faces.timings import LogHistogram, ModeTimings  # noqa: F401 - LogHistogram re-exported

#: the orchestrator's phases, in order (``done`` ends a lab)
LAB_PHASES: tuple[str, ...] = (
    "preflight", "authorize", "create", "boot", "connect", "upload", "run", "fetch",
    "terminate", "verify", "record", "manifest", "done",
)
#: lab phases during which a pod may exist even before an ``instance`` event named it
_POD_PHASES = frozenset({"create", "boot", "connect", "upload", "run", "fetch", "terminate",
                         "verify"})

MODES: tuple[str, ...] = ("single", "tp")


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int      # running number of this line in the whole lab (not the event seq)
    ts: float
    src: str
    level: str    # debug | info | warning | error
    text: str


@dataclass
class Budget:
    cap_usd: float | None = None
    spent_usd: float | None = None
    held_usd: float | None = None
    remaining_usd: float | None = None
    authorized_usd: float | None = None


@dataclass
class Instance:
    pod_id: str | None = None
    provider: str | None = None
    gpu_type: str | None = None
    gpu_count: int | None = None
    spot: bool | None = None
    state: str | None = None
    state_since: float | None = None
    usd_per_hr: float | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    uptime_s: float | None = None
    uptime_ts: float | None = None

    @property
    def gone(self) -> bool:
        return self.state is not None and self.state.upper() in GONE_STATES


@dataclass
class Cost:
    accrued_usd: float | None = None
    usd_per_hr: float | None = None
    seconds_left: float | None = None
    ts: float | None = None


class LabState:
    """Everything a view shows about one lab, updated one event at a time.

    ``apply`` never raises on an event it does not understand (a newer orchestrator may add
    types); unknown types are counted and otherwise ignored.
    """

    def __init__(self, *, recent_tokens: int = 600, log_lines: int = 1000,
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.rev = 0                   # bumped on every applied event: views skip equal revs
        self.events = 0
        self.unknown_events = 0
        # lab progress
        self.phase: str | None = None
        self.phase_since: float | None = None
        self.job_phase: str | None = None
        self.started_at: float | None = None
        self.done = False
        self.done_status: str | None = None
        self.done_reason: str | None = None
        self.out_dir: str | None = None
        self.manifest_path: str | None = None
        self.errors: deque[str] = deque(maxlen=20)
        self.fatal_error: str | None = None
        self.warnings: deque[str] = deque(maxlen=20)
        # money and machine
        self.budget = Budget()
        self.instance = Instance()
        self.cost = Cost()
        self.ssh_state: str | None = None
        self.heartbeat_age_s: float | None = None
        self.heartbeat_ts: float | None = None
        self.job_heartbeat_ts: float | None = None
        # timings
        self.timings: dict[str, ModeTimings] = {m: ModeTimings(recent_len=recent_tokens)
                                                for m in MODES}
        self.num_prompts: int | None = None
        self.new_tokens: int | None = None
        self.d_model: int | None = None
        self.world_size: int | None = None
        self.prompt_texts: dict[str, dict[int, str]] = {m: {} for m in MODES}
        self.last_token_mode: str | None = None
        self.sweeps = 0
        # the d_model sweep as its points arrive (sweep_point events): measured, in d_model order
        self.sweep_points: list[dict[str, Any]] = []
        self.sweep_skipped: list[dict[str, Any]] = []
        self.results: dict[str, Any] | None = None
        # termination as the user sees it
        self.terminate_requested_at: float | None = None
        self.terminate_seen = False    # the lab entered its terminate phase
        self.verify_seen = False
        # the log
        self.log: deque[LogLine] = deque(maxlen=log_lines)
        self.log_seq = 0

    # ------------------------------------------------------------------ inputs
    def set_plan(self, *, num_prompts: int | None = None, new_tokens: int | None = None,
                 world_size: int | None = None) -> None:
        """What the lab was configured to do (for "prompt i of N, token j of M")."""
        if num_prompts is not None:
            self.num_prompts = num_prompts
        if new_tokens is not None:
            self.new_tokens = new_tokens
        if world_size is not None:
            self.world_size = world_size
        self.rev += 1

    def note_terminate_requested(self) -> bool:
        """Record that the user asked to terminate; True only the first time."""
        if self.terminate_requested_at is not None:
            return False
        self.terminate_requested_at = self.clock()
        self._log(self.terminate_requested_at, "lab", "warning", "TERMINATE requested by the user")
        self.rev += 1
        return True

    def note(self, text: str, level: str = "info") -> None:
        """A line from the view itself (e.g. "left the pod running"), kept in the same log."""
        self._log(self.clock(), "ui", level, text)
        self.rev += 1

    def apply_many(self, events: Iterable[Event]) -> None:
        for ev in events:
            self.apply(ev)

    def apply(self, ev: Event) -> None:
        self.events += 1
        self.rev += 1
        handler = _HANDLERS.get(ev.type)
        if handler is None:
            self.unknown_events += 1
            return
        handler(self, ev)

    # ------------------------------------------------------------------ derived
    @property
    def idle(self) -> bool:
        return self.events == 0

    @property
    def running(self) -> bool:
        return self.events > 0 and not self.done

    @property
    def pod_alive(self) -> bool:
        """A pod exists or may exist (quit must not silently leave it behind)."""
        if self.instance.gone:
            return False
        if self.instance.pod_id is not None:
            return True
        return self.running and self.phase in _POD_PHASES

    @property
    def terminate_status(self) -> str:
        """idle | requested | terminating | verifying | gone | no-pod.

        What the TERMINATE button shows. ``gone`` only when the provider said the pod is gone
        (the lab's verify step); ``no-pod`` when the lab ended without ever creating one.
        """
        if self.instance.gone:
            return "gone"
        if self.done and self.instance.pod_id is None:
            return "no-pod" if self.terminate_requested_at is not None else "idle"
        if self.verify_seen:
            return "verifying"
        if self.terminate_seen:
            return "terminating"
        if self.terminate_requested_at is not None:
            return "requested"
        return "idle"

    def now(self) -> float:
        return self.clock()

    def time_in_state(self) -> float | None:
        if self.instance.state_since is None:
            return None
        end = self.now()
        return max(0.0, end - self.instance.state_since)

    def uptime(self) -> float | None:
        inst = self.instance
        if inst.uptime_s is None:
            return None
        if inst.gone or inst.uptime_ts is None or (inst.state or "").upper() != "RUNNING":
            return inst.uptime_s
        return inst.uptime_s + max(0.0, self.now() - inst.uptime_ts)

    def seconds_left(self) -> float | None:
        c = self.cost
        if c.seconds_left is None:
            return None
        if not self.pod_alive or c.ts is None:
            return c.seconds_left
        return max(0.0, c.seconds_left - max(0.0, self.now() - c.ts))

    def heartbeat_age(self) -> float | None:
        if self.heartbeat_age_s is None or self.heartbeat_ts is None:
            return None
        if self.done:
            return self.heartbeat_age_s
        return self.heartbeat_age_s + max(0.0, self.now() - self.heartbeat_ts)

    def progress(self) -> dict[str, Any]:
        """Where decoding is: the current mode, prompt i of N, token j of M (1-based)."""
        mode = self.last_token_mode
        t = self.timings[mode] if mode else None
        return {
            "mode": mode,
            "prompt": (t.prompt + 1) if t and t.prompt is not None else None,
            "num_prompts": self.num_prompts,
            "token": (t.pos + 1) if t and t.pos is not None else None,
            "new_tokens": self.new_tokens,
        }

    def prompts_matching(self) -> tuple[int, int]:
        """(identical, compared) over prompts both modes finished, from prompt_done texts."""
        single, tp = self.prompt_texts["single"], self.prompt_texts["tp"]
        both = single.keys() & tp.keys()
        return sum(1 for k in both if single[k] == tp[k]), len(both)

    def outputs_match(self) -> bool | None:
        """The job's verdict if it reported one, else None."""
        if self.results is None:
            return None
        v = self.results.get("outputs_match")
        return bool(v) if v is not None else None

    # ------------------------------------------------------------------ helpers
    def _log(self, ts: float, src: str, level: str, text: str) -> None:
        self.log_seq += 1
        self.log.append(LogLine(self.log_seq, ts, src, level, text))


# ---------------------------------------------------------------------- handlers
def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _on_phase(s: LabState, ev: Event) -> None:
    name = ev["name"]
    if s.started_at is None:
        s.started_at = ev.ts
    for key in ("num_prompts", "new_tokens", "world_size", "d_model"):
        v = ev.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            setattr(s, key, v)
    if ev.src == "lab":
        s.phase = name
        s.phase_since = ev.ts
        if name == "terminate":
            s.terminate_seen = True
        elif name == "verify":
            s.terminate_seen = True
            s.verify_seen = True
        elif name == "done":
            s.done = True
            s.done_status = ev.get("status")
            s.done_reason = ev.get("reason")
            s.out_dir = ev.get("out_dir") or s.out_dir
            s.manifest_path = ev.get("manifest") or s.manifest_path
            if ev.get("verified_gone") is True and s.instance.pod_id is not None:
                s.instance.state = "GONE"
                s.instance.state_since = ev.ts
        extra = ""
        if name == "done":
            extra = f" {s.done_status or ''}" + (f": {s.done_reason}" if s.done_reason else "")
        s._log(ev.ts, ev.src, "info", f"phase {name}{extra}")
    else:
        s.job_phase = name
        s._log(ev.ts, ev.src, "info", f"phase {name}")


def _on_log(s: LabState, ev: Event) -> None:
    s._log(ev.ts, ev.src, ev["level"], ev["msg"])


def _on_token(s: LabState, ev: Event) -> None:
    mode = ev["mode"]
    t = s.timings.get(mode)
    if t is None:
        s.unknown_events += 1
        return
    t.add(float(ev["ms"]), float(ev["ar_ms"]))
    s.last_token_mode = mode
    t.prompt = ev["prompt"]
    t.pos = ev["pos"]


def _on_prompt_done(s: LabState, ev: Event) -> None:
    mode = ev["mode"]
    t = s.timings.get(mode)
    if t is None:
        return
    t.prompts_done += 1
    texts = s.prompt_texts[mode]
    if len(texts) < 10_000:  # bounded: a lab has tens of prompts
        texts[ev["prompt"]] = ev["text"]


def _on_sweep(s: LabState, ev: Event) -> None:
    s.sweeps += 1


#: the fields of a measured sweep point the views use
_SWEEP_FIELDS = ("d_model", "params", "single_ms", "tp_ms", "allreduce_ms", "outputs_match",
                 "tokens")


def _on_sweep_point(s: LabState, ev: Event) -> None:
    d = ev["d_model"]
    if ev["skipped"]:
        s.sweep_skipped.append({"d_model": d, "reason": str(ev.get("reason", ""))})
        s._log(ev.ts, ev.src, "info", f"d_model sweep: {d} skipped ({ev.get('reason', '')})")
        return
    point = {k: ev.get(k) for k in _SWEEP_FIELDS}
    if not all(isinstance(point[k], (int, float)) for k in ("single_ms", "tp_ms")):
        return
    s.sweep_points = sorted([p for p in s.sweep_points if p["d_model"] != d] + [point],
                            key=lambda p: p["d_model"])
    s._log(ev.ts, ev.src, "info" if point["outputs_match"] else "error",
           f"d_model sweep: {d}: single {point['single_ms']:.3f} ms, TP {point['tp_ms']:.3f} ms"
           + ("" if point["outputs_match"] else ", TP output differs"))


def _on_result(s: LabState, ev: Event) -> None:
    res = ev["results"]
    s.results = res
    model = res.get("model") if isinstance(res.get("model"), dict) else {}
    for key, v in (("d_model", model.get("d_model")), ("world_size", res.get("world_size"))):
        if isinstance(v, int) and not isinstance(v, bool):
            setattr(s, key, v)
    match = res.get("outputs_match")
    s._log(ev.ts, ev.src, "info" if match else "warning",
           f"result: outputs_match={match} speedup={res.get('speedup')}")


def _on_error(s: LabState, ev: Event) -> None:
    msg = ev["msg"]
    s.errors.append(msg)
    if ev["fatal"]:
        s.fatal_error = msg
    s._log(ev.ts, ev.src, "error", ("fatal: " if ev["fatal"] else "") + msg)


def _on_heartbeat(s: LabState, ev: Event) -> None:
    if ev.src == "lab":
        age = _num(ev.get("age_s"))
        if age is not None:
            s.heartbeat_age_s = age
            s.heartbeat_ts = ev.ts
    else:
        s.job_heartbeat_ts = ev.ts


def _on_cost(s: LabState, ev: Event) -> None:
    c = s.cost
    c.accrued_usd = float(ev["accrued_usd"])
    c.usd_per_hr = float(ev["usd_per_hr"])
    c.seconds_left = float(ev["seconds_left"])
    c.ts = ev.ts


def _on_budget(s: LabState, ev: Event) -> None:
    b = s.budget
    b.cap_usd = float(ev["cap_usd"])
    b.spent_usd = float(ev["spent_usd"])
    b.held_usd = float(ev["held_usd"])
    b.remaining_usd = float(ev["remaining_usd"])
    auth = _num(ev.get("authorized_usd"))
    if auth is not None:
        b.authorized_usd = auth


def _on_instance(s: LabState, ev: Event) -> None:
    inst = s.instance
    state = ev["state"]
    if state != inst.state:
        inst.state = state
        inst.state_since = ev.ts
        s._log(ev.ts, ev.src, "info",
               f"instance {ev.get('pod_id') or inst.pod_id or '?'} {state}")
    for key in ("pod_id", "provider", "gpu_type", "ssh_host"):
        v = ev.get(key)
        if isinstance(v, str) and v:
            setattr(inst, key, v)
    for key in ("gpu_count", "ssh_port"):
        v = ev.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            setattr(inst, key, v)
    if isinstance(ev.get("spot"), bool):
        inst.spot = ev.get("spot")
    rate = _num(ev.get("usd_per_hr"))
    if rate is not None:
        inst.usd_per_hr = rate
    up = _num(ev.get("uptime_s"))
    if up is not None:
        inst.uptime_s = up
        inst.uptime_ts = ev.ts


def _on_ssh(s: LabState, ev: Event) -> None:
    if ev["state"] != s.ssh_state:
        s.ssh_state = ev["state"]
        s._log(ev.ts, ev.src, "warning" if ev["state"] == "dropped" else "info",
               f"ssh {ev['state']}")


def _on_warning(s: LabState, ev: Event) -> None:
    s.warnings.append(ev["msg"])
    s._log(ev.ts, ev.src, "warning", ev["msg"])


_HANDLERS: dict[str, Callable[[LabState, Event], None]] = {
    "phase": _on_phase,
    "log": _on_log,
    "token": _on_token,
    "prompt_done": _on_prompt_done,
    "sweep": _on_sweep,
    "sweep_point": _on_sweep_point,
    "result": _on_result,
    "error": _on_error,
    "heartbeat": _on_heartbeat,
    "cost": _on_cost,
    "budget": _on_budget,
    "instance": _on_instance,
    "ssh": _on_ssh,
    "warning": _on_warning,
}

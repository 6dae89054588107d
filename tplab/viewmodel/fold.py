"""The fold: how each event, and each input from a view, changes a lab's ``LabSnapshot``.

Why apart from the snapshot: the snapshot is what views read (its fields and derived figures);
this is how the stream writes it, one small handler per event type, O(1) each. ``LabState`` is
the one fold the dashboard, ``tplab run``'s headless view, a replay and a past lab opened from
the Labs screen all use; the per-token part of it is ``tokens.TokenFold``, which a lab stopped
before its results also keeps for its manifest. ``apply`` never raises on an event it does not
understand (a newer orchestrator may add types); unknown types are counted and otherwise
ignored. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tplab.records.events import Event
from tplab.viewmodel.parts import Budget
from tplab.viewmodel.snapshot import LabSnapshot
from tplab.viewmodel.timeline_view import split_text, timeline_from

#: at most this many lines of the pod's job.log are added to the log (its tail)
REMOTE_LINES = 400
#: the fields of a measured d_model sweep point the views use
_SWEEP_FIELDS = ("d_model", "params", "single_ms", "tp_ms", "allreduce_ms", "outputs_match",
                 "tokens")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class LabState(LabSnapshot):
    """A ``LabSnapshot`` kept up to date: ``apply(event)``, and the inputs a view adds."""

    # ------------------------------------------------------------------ inputs
    def set_plan(self, *, num_prompts: int | None = None, new_tokens: int | None = None,
                 world_size: int | None = None, mock: bool | None = None) -> None:
        """What the lab was configured to do (for "prompt i of N, token j of M")."""
        if mock is not None:
            self.mock = mock
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
        self.add_line(self.terminate_requested_at, "lab", "warning", "TERMINATE requested by the user")
        self.rev += 1
        return True

    def note_starting(self, text: str) -> None:
        """The user pressed Start and the lab is being built: say so at once (the lab's first
        event can be seconds away: imports, the mock cloud starting)."""
        if self.events == 0:
            self.starting = text
            self.add_line(self.clock(), "ui", "info", text)
            self.rev += 1

    def set_ledger_budget(self, budget: Budget) -> None:
        """The ledger's figures read directly (before a lab, or after one ended); a running
        lab's own ``budget`` events replace them."""
        if self.budget.source == "lab" and not self.done:
            return
        authorized = self.budget.authorized_usd
        self.budget = replace(budget)  # a copy: the lab's events update it in place
        if self.done:
            self.budget.authorized_usd = authorized
        self.rev += 1

    def add_remote_lines(self, lines: Iterable[str], ts: float | None = None) -> int:
        """Lines of the pod's job.log (torchrun's stdout and stderr), as the log's ``stderr``
        source; a traceback's lines and lines that say error or warning are marked as such.
        At most the last ``REMOTE_LINES``; returns how many were added."""
        tail = list(lines)[-REMOTE_LINES:]
        when = self.clock() if ts is None else ts
        in_traceback = False
        for text in tail:
            low = text.lower()
            if text.startswith("Traceback ("):
                in_traceback, level = True, "error"
            elif in_traceback:
                level = "error"
                if text and not text[0].isspace():  # the exception's own line ends it
                    in_traceback = False
            elif "error" in low or "exception" in low:
                level = "error"
            elif "warn" in low:
                level = "warning"
            else:
                level = "info"
            self.add_line(when, "stderr", level, text)
        if tail:
            self.rev += 1
        return len(tail)

    def note(self, text: str, level: str = "info") -> None:
        """A line from the view itself (e.g. "left the pod running"), kept in the same log."""
        self.add_line(self.clock(), "ui", level, text)
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

    # ------------------------------------------------------------------ one handler per type
    def _on_phase(self, ev: Event) -> None:
        name = ev["name"]
        if self.started_at is None:
            self.started_at = ev.ts
        self.starting = None
        for key in ("num_prompts", "new_tokens", "world_size", "d_model"):
            v = _int(ev.get(key))
            if v is not None:
                setattr(self, key, v)
        if ev.src == "lab":
            self.phase = name
            self.phase_since = ev.ts
            if isinstance(ev.get("mock"), bool):
                self.mock = ev.get("mock")
            if isinstance(ev.get("lab_id"), str):
                self.lab_id = ev.get("lab_id")
            if name == "terminate":
                self.terminate_seen = True
            elif name == "verify":
                self.terminate_seen = True
                self.verify_seen = True
            elif name == "done":
                self.done = True
                self.done_status = ev.get("status")
                self.done_reason = ev.get("reason")
                self.out_dir = ev.get("out_dir") or self.out_dir
                self.manifest_path = ev.get("manifest") or self.manifest_path
                if ev.get("verified_gone") is True and self.instance.pod_id is not None:
                    self.instance.state = "GONE"
                    self.instance.state_since = ev.ts
            extra = ""
            if name == "done":
                extra = f" {self.done_status or ''}" + (f": {self.done_reason}" if self.done_reason else "")
            level = "info"
            if name == "done" and self.done_status not in ("COMPLETE", None):
                level = "warning" if self.done_status in ("STOPPED", "INTERRUPTED", "EDUCATIONAL_STUB") else "error"
            self.add_line(ev.ts, ev.src, level, f"phase {name}{extra}")
        else:
            self.job_phase = name
            self.add_line(ev.ts, ev.src, "info", f"phase {name}")


    def _on_log(self, ev: Event) -> None:
        self.add_line(ev.ts, ev.src, ev["level"], ev["msg"])


    def _on_token(self, ev: Event) -> None:
        if not self.tokens.apply(ev):
            self.unknown_events += 1
            return
        self.last_token_mode = ev["mode"]

    def _on_prompt_done(self, ev: Event) -> None:
        if not self.tokens.apply(ev):
            return
        texts = self.prompt_texts[ev["mode"]]
        if len(texts) < 10_000:  # bounded: a lab has tens of prompts
            texts[ev["prompt"]] = ev["text"]


    def _on_sweep(self, ev: Event) -> None:
        self.sweeps += 1




    def _on_sweep_point(self, ev: Event) -> None:
        d = ev["d_model"]
        if ev["skipped"]:
            if len(self.sweep_skipped) < 100:  # bounded: a sweep has a handful of sizes
                self.sweep_skipped.append({"d_model": d, "reason": str(ev.get("reason", ""))})
            self.add_line(ev.ts, ev.src, "info", f"d_model sweep: {d} skipped ({ev.get('reason', '')})")
            return
        point = {k: ev.get(k) for k in _SWEEP_FIELDS}
        if _num(point["single_ms"]) is None or _num(point["tp_ms"]) is None:
            self.unknown_events += 1
            return
        others = [p for p in self.sweep_points if p["d_model"] != d][:99]
        self.sweep_points = sorted(others + [point], key=lambda p: p["d_model"])
        self.add_line(ev.ts, ev.src, "info" if point["outputs_match"] else "error",
               f"d_model sweep: {d}: single {point['single_ms']:.3f} ms, TP {point['tp_ms']:.3f} ms"
               + ("" if point["outputs_match"] else ", TP output differs"))


    def _on_timeline(self, ev: Event) -> None:
        timeline = timeline_from(ev.fields)
        if timeline is None:
            self.unknown_events += 1
            return
        self.timeline = timeline
        tp = timeline.splits.get("tp")
        self.add_line(ev.ts, ev.src, "info", "profiled pass, TP: " + (
            f"{split_text(tp)} ({tp.tokens} tokens)" if tp else "no TP step could be split")
            + f"; the trace is {timeline.trace_file} (key 5: the timeline)")

    def _on_result(self, ev: Event) -> None:
        res = ev["results"]
        self.results = res
        if self.timeline is None and res.get("timeline") is not None:
            self.timeline = timeline_from(res.get("timeline"))
        model = res.get("model") if isinstance(res.get("model"), dict) else {}
        for key, v in (("d_model", model.get("d_model")), ("world_size", res.get("world_size"))):
            if _int(v) is not None:
                setattr(self, key, v)
        match = res.get("outputs_match")
        self.add_line(ev.ts, ev.src, "info" if match else "warning",
               f"result: outputs_match={match} speedup={res.get('speedup')}")


    def _on_error(self, ev: Event) -> None:
        msg = ev["msg"]
        self.errors.append(msg)
        if ev["fatal"]:
            self.fatal_error = msg
        self.add_line(ev.ts, ev.src, "error", ("fatal: " if ev["fatal"] else "") + msg)


    def _on_heartbeat(self, ev: Event) -> None:
        if ev.src == "lab":
            age = _num(ev.get("age_s"))
            if age is not None:
                self.heartbeat_age_s = age
                self.heartbeat_ts = ev.ts
        else:
            self.job_heartbeat_ts = ev.ts


    def _on_cost(self, ev: Event) -> None:
        c = self.cost
        what = ev.get("cost_is")
        if c.billed and what != "billed":
            return  # a billed figure is final: a late estimate does not replace it
        c.accrued_usd = float(ev["accrued_usd"])
        c.usd_per_hr = float(ev["usd_per_hr"])
        c.seconds_left = float(ev["seconds_left"])
        c.ts = ev.ts
        c.what = "billed" if what == "billed" else "estimate"
        c.ran_s = _num(ev.get("ran_s"))
        c.ended_at = _num(ev.get("ended_at"))


    def _on_budget(self, ev: Event) -> None:
        b = self.budget
        b.cap_usd = float(ev["cap_usd"])
        b.spent_usd = float(ev["spent_usd"])
        b.held_usd = float(ev["held_usd"])
        b.remaining_usd = float(ev["remaining_usd"])
        b.source, b.problem = "lab", None
        auth = _num(ev.get("authorized_usd"))
        if auth is not None:
            b.authorized_usd = auth
        damaged = _int(ev.get("damaged_lines"))
        if damaged is not None:  # else what the ledger read before the lab said
            b.damaged_lines = damaged
        held_for = ev.get("held_for")
        b.held_for = held_for if isinstance(held_for, str) and held_for else None


    def _on_instance(self, ev: Event) -> None:
        inst = self.instance
        state = ev["state"]
        if state != inst.state:
            inst.state = state
            inst.state_since = ev.ts
            self.add_line(ev.ts, ev.src, "info",
                   f"instance {ev.get('pod_id') or inst.pod_id or '?'} {state}")
        for key in ("pod_id", "provider", "gpu_type", "ssh_host"):
            v = ev.get(key)
            if isinstance(v, str) and v:
                setattr(inst, key, v)
        for key in ("gpu_count", "ssh_port"):
            v = _int(ev.get(key))
            if v is not None:
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


    def _on_ssh(self, ev: Event) -> None:
        if ev["state"] != self.ssh_state:
            self.ssh_state = ev["state"]
            self.add_line(ev.ts, ev.src, "warning" if ev["state"] == "dropped" else "info",
                   f"ssh {ev['state']}")


    def _on_warning(self, ev: Event) -> None:
        self.warnings.append(ev["msg"])
        self.add_line(ev.ts, ev.src, "warning", ev["msg"])


#: ``apply`` looks a handler up here by the event's type; unknown types are counted, not fatal
_HANDLERS: dict[str, Callable[[LabState, Event], None]] = {
    "phase": LabState._on_phase,
    "log": LabState._on_log,
    "token": LabState._on_token,
    "prompt_done": LabState._on_prompt_done,
    "sweep": LabState._on_sweep,
    "sweep_point": LabState._on_sweep_point,
    "timeline": LabState._on_timeline,
    "result": LabState._on_result,
    "error": LabState._on_error,
    "heartbeat": LabState._on_heartbeat,
    "cost": LabState._on_cost,
    "budget": LabState._on_budget,
    "instance": LabState._on_instance,
    "ssh": LabState._on_ssh,
    "warning": LabState._on_warning,
}

"""The fold: how each event, and each input from a view, changes a lab's ``LabSnapshot``.

Why apart from the snapshot: the snapshot is what views read (its fields and derived figures);
this is how the stream writes it, one small handler per event type, O(1) each. ``LabState`` is
the one fold the dashboard, ``tplab run``'s headless view, a replay and a past lab opened from
the Labs screen all use; the per-token part of it is ``tokens.TokenFold``, which a lab stopped
before its results also keeps for its manifest. Every event arrives typed and checked
(``tplab.records.events``: the decoder refused what was not one), so a handler reads its
event's attributes and checks nothing again; ``apply`` never raises, and an event class it has
no handler for is counted and otherwise ignored. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tplab.records.dmodel import SkippedSize
from tplab.records.events import (
    BudgetEvent, CostEvent, ErrorEvent, Event, FiguresEvent, HeartbeatEvent, InstanceEvent,
    LogEvent, StageEvent, PromptDoneEvent, ResultEvent, SshEvent, SweepEvent, SweepPointEvent,
    TimelineEvent, TokenEvent, WarningEvent)
from tplab.figures.lab_figures import LabFigures
from tplab.records.untrusted import count
from tplab.viewmodel.parts import Budget
from tplab.viewmodel.snapshot import LabSnapshot
from tplab.viewmodel.timeline_view import split_text, timeline_from

#: at most this many lines of the pod's job.log are added to the log (its tail)
REMOTE_LINES = 400


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
        handler = _HANDLERS.get(ev.__class__)
        if handler is None:
            self.unknown_events += 1
            return
        handler(self, ev)

    # ------------------------------------------------------------------ one handler per type
    def _on_stage(self, ev: StageEvent) -> None:
        name = ev.name
        if self.started_at is None:
            self.started_at = ev.ts
        self.starting = None
        _carry(self, ev, ("num_prompts", "new_tokens", "world_size"))
        if ev.src != "lab":
            self.job_stage = name
            self.add_line(ev.ts, ev.src, "info", f"stage {name}")
            return
        self.stage = name
        self.stage_since = ev.ts
        if ev.mock is not None:
            self.mock = ev.mock
        if ev.lab_id is not None:
            self.lab_id = ev.lab_id
        if name == "terminate":
            self.terminate_seen = True
        elif name == "verify":
            self.terminate_seen = True
            self.verify_seen = True
        elif name == "done":
            self.done = True
            self.done_status = ev.status
            self.done_reason = ev.reason
            self.out_dir = ev.out_dir or self.out_dir
            self.manifest_path = ev.manifest or self.manifest_path
            if ev.verified_gone is True and self.instance.pod_id is not None:
                self.instance.state = "GONE"
                self.instance.state_since = ev.ts
        extra = ""
        if name == "done":
            extra = f" {self.done_status or ''}" + (f": {self.done_reason}" if self.done_reason else "")
        level = "info"
        if name == "done" and self.done_status not in ("COMPLETE", None):
            level = "warning" if self.done_status in ("STOPPED", "INTERRUPTED", "EDUCATIONAL_STUB") else "error"
        self.add_line(ev.ts, ev.src, level, f"stage {name}{extra}")

    def _on_log(self, ev: LogEvent) -> None:
        self.add_line(ev.ts, ev.src, ev.level, ev.msg)

    def _on_token(self, ev: TokenEvent) -> None:
        self.tokens.apply(ev)
        self.last_token_mode = ev.mode

    def _on_prompt_done(self, ev: PromptDoneEvent) -> None:
        if not self.tokens.apply(ev):
            return
        texts = self.prompt_texts[ev.mode]
        if len(texts) < 10_000:  # bounded: a lab has tens of prompts
            texts[ev.prompt] = ev.text

    def _on_sweep(self, ev: SweepEvent) -> None:
        self.sweeps += 1

    def _on_sweep_point(self, ev: SweepPointEvent) -> None:
        d, point = ev.d_model, ev.point
        if point is None:
            if len(self.sweep_skipped) < 100:  # bounded: a sweep has a handful of sizes
                self.sweep_skipped.append(SkippedSize(d, ev.reason))
            self.add_line(ev.ts, ev.src, "info", f"d_model sweep: {d} skipped ({ev.reason})")
            return
        others = [p for p in self.sweep_points if p.d_model != d][:99]
        self.sweep_points = sorted(others + [point], key=lambda p: p.d_model)
        self.add_line(ev.ts, ev.src, "info" if point.outputs_match else "error",
                      f"d_model sweep: {d}: single {point.single_ms:.3f} ms, TP "
                      f"{point.tp_ms:.3f} ms" + ("" if point.outputs_match
                                                 else ", TP output differs"))

    def _on_timeline(self, ev: TimelineEvent) -> None:
        timeline = timeline_from(ev.section)
        if timeline is None:
            self.unknown_events += 1
            return
        self.timeline = timeline
        tp = timeline.splits.get("tp")
        self.add_line(ev.ts, ev.src, "info", "profiled pass, TP: " + (
            f"{split_text(tp)} ({tp.tokens} tokens)" if tp else "no TP step could be split")
            + f"; the trace is {timeline.trace_file} (key 5: the timeline)")

    def _on_result(self, ev: ResultEvent) -> None:
        res = ev.results
        self.results = res
        if self.timeline is None and res.get("timeline") is not None:
            self.timeline = timeline_from(res.get("timeline"))
        model: dict[str, Any] = res["model"] if isinstance(res.get("model"), dict) else {}
        d_model, world_size = count(model.get("d_model")), count(res.get("world_size"))
        if d_model is not None:
            self.d_model = d_model
        if world_size is not None:
            self.world_size = world_size
        match = res.get("outputs_match")
        speedup = self.figures.speedup  # the record every face renders, made from these results
        self.add_line(ev.ts, ev.src, "info" if match else "warning",
                      f"result: outputs_match={match} speedup={speedup.text()} "
                      f"({speedup.tag()})")

    def _on_figures(self, ev: FiguresEvent) -> None:
        figures = LabFigures.from_dict(ev.figures)
        if figures is None:
            self.unknown_events += 1
            return
        self.lab_figures = figures

    def _on_error(self, ev: ErrorEvent) -> None:
        self.errors.append(ev.msg)
        if ev.fatal:
            self.fatal_error = ev.msg
        self.add_line(ev.ts, ev.src, "error", ("fatal: " if ev.fatal else "") + ev.msg)

    def _on_heartbeat(self, ev: HeartbeatEvent) -> None:
        if ev.src == "lab":
            if ev.age_s is not None:
                self.heartbeat_age_s = ev.age_s
                self.heartbeat_ts = ev.ts
        else:
            self.job_heartbeat_ts = ev.ts

    def _on_cost(self, ev: CostEvent) -> None:
        c = self.cost
        if c.billed and ev.cost_is != "billed":
            return  # a billed figure is final: a late estimate does not replace it
        c.accrued_usd = ev.accrued_usd
        c.usd_per_hr = ev.usd_per_hr
        c.seconds_left = ev.seconds_left
        c.ts = ev.ts
        c.what = "billed" if ev.cost_is == "billed" else "estimate"
        c.ran_s = ev.ran_s
        c.ended_at = ev.ended_at

    def _on_budget(self, ev: BudgetEvent) -> None:
        b = self.budget
        b.cap_usd = ev.cap_usd
        b.spent_usd = ev.spent_usd
        b.held_usd = ev.held_usd
        b.remaining_usd = ev.remaining_usd
        b.source, b.problem = "lab", None
        if ev.authorized_usd is not None:
            b.authorized_usd = ev.authorized_usd
        if ev.damaged_lines is not None:  # else what the ledger read before the lab said
            b.damaged_lines = ev.damaged_lines
        b.held_for = ev.held_for or None

    def _on_instance(self, ev: InstanceEvent) -> None:
        inst = self.instance
        state = ev.state
        if state != inst.state:
            inst.state = state
            inst.state_since = ev.ts
            self.add_line(ev.ts, ev.src, "info",
                          f"instance {ev.pod_id or inst.pod_id or '?'} {state}")
        _carry(inst, ev, ("pod_id", "provider", "gpu_type", "ssh_host", "gpu_count", "ssh_port",
                          "spot", "usd_per_hr"))
        if ev.uptime_s is not None:
            inst.uptime_s = ev.uptime_s
            inst.uptime_ts = ev.ts

    def _on_ssh(self, ev: SshEvent) -> None:
        if ev.state != self.ssh_state:
            self.ssh_state = ev.state
            self.add_line(ev.ts, ev.src, "warning" if ev.state == "dropped" else "info",
                          f"ssh {ev.state}")

    def _on_warning(self, ev: WarningEvent) -> None:
        self.warnings.append(ev.msg)
        self.add_line(ev.ts, ev.src, "warning", ev.msg)


def _carry(target: object, ev: Event, names: tuple[str, ...]) -> None:
    """Each of the event's fields ``names`` onto ``target``'s attribute of the same name, where
    the event carries one (not None, not an empty string); the others keep what they had."""
    for name in names:
        value = getattr(ev, name)
        if value is not None and value != "":
            setattr(target, name, value)


#: ``apply`` looks a handler up here by the event's class; other types are counted, not fatal
_HANDLERS: dict[type[Event], Callable[[LabState, Any], None]] = {
    StageEvent: LabState._on_stage,
    LogEvent: LabState._on_log,
    TokenEvent: LabState._on_token,
    PromptDoneEvent: LabState._on_prompt_done,
    SweepEvent: LabState._on_sweep,
    SweepPointEvent: LabState._on_sweep_point,
    TimelineEvent: LabState._on_timeline,
    ResultEvent: LabState._on_result,
    FiguresEvent: LabState._on_figures,
    ErrorEvent: LabState._on_error,
    HeartbeatEvent: LabState._on_heartbeat,
    CostEvent: LabState._on_cost,
    BudgetEvent: LabState._on_budget,
    InstanceEvent: LabState._on_instance,
    SshEvent: LabState._on_ssh,
    WarningEvent: LabState._on_warning,
}

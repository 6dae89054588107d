"""Fold the lab's event stream into one snapshot that views can draw from.

The dashboard and the headless runner both consume the orchestrator's merged event stream
(``tplab/records/events.py``). Neither should re-derive lab facts on its own, and neither should keep
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
from dataclasses import replace
from typing import Any, Callable, Iterable

from tplab.records.events import Event
from tplab.lab.faces.fold import HANDLERS
from tplab.lab.faces.records import (LOG_SOURCES, Budget, Cost, Instance, LogLine,  # noqa: F401
                                     log_line_matches)
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
#: at most this many lines of the pod's job.log are added to the log (its tail)
REMOTE_LINES = 400


class LabState:
    """Everything a view shows about one lab, updated one event at a time.

    ``apply`` never raises on an event it does not understand (a newer orchestrator may add
    types); unknown types are counted and otherwise ignored.
    """

    def __init__(self, *, recent_tokens: int = 600, log_lines: int = 2000,
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.rev = 0                   # bumped on every applied event: views skip equal revs
        self.events = 0
        self.unknown_events = 0
        # lab progress
        self.starting: str | None = None   # set from Start until the lab's first event
        self.mock: bool | None = None      # the lab runs on the local mock cloud
        self.lab_id: str | None = None
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
        self._log(self.terminate_requested_at, "lab", "warning", "TERMINATE requested by the user")
        self.rev += 1
        return True

    def note_starting(self, text: str) -> None:
        """The user pressed Start and the lab is being built: say so at once (the lab's first
        event can be seconds away: imports, the mock cloud starting)."""
        if self.events == 0:
            self.starting = text
            self._log(self.clock(), "ui", "info", text)
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
            self._log(when, "stderr", level, text)
        if tail:
            self.rev += 1
        return len(tail)

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
        handler = HANDLERS.get(ev.type)
        if handler is None:
            self.unknown_events += 1
            return
        handler(self, ev)

    # ------------------------------------------------------------------ derived
    @property
    def idle(self) -> bool:
        return self.events == 0 and self.starting is None

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

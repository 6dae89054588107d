"""What a view reads about one lab: the snapshot the event fold (``fold.py``) keeps up to date.

Why apart from the fold: the views (the dashboard's panels, ``tplab run``'s lines, a replay)
read these fields and derived figures; how each event changes them is ``fold.py``'s. Every
store is bounded: recent per-token timings in fixed-length deques, running p50 / p99 from a
log-spaced histogram (``tokens.py``), the log a bounded deque with a running sequence number,
so a view can append only what it has not written yet.

A view redraws from this snapshot on its own timer and compares ``rev`` to skip work when
nothing changed. Time-derived figures (time in state, uptime, heartbeat age, seconds left) are
extrapolated from the event's timestamp with an injectable clock so tests are deterministic.

Standard library only: no torch, no textual (a test enforces the latter for all of ``tplab/``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tplab.figures.lab_figures import LabFigures
from tplab.records.dmodel import DModelPoint, SkippedSize
from tplab.viewmodel.parts import Budget, Cost, Instance, LogLine
from tplab.viewmodel.timeline_view import Timeline
from tplab.viewmodel.tokens import MODES, ModeTimings, TokenFold

#: the lab's stages, in order (``done`` ends a lab)
LAB_STAGES: tuple[str, ...] = (
    "preflight", "authorize", "create", "boot", "connect", "upload", "run", "fetch",
    "terminate", "verify", "record", "manifest", "done",
)
#: the lab's stages during which a pod may exist even before an ``instance`` event named it
_POD_STAGES = frozenset({"create", "boot", "connect", "upload", "run", "fetch", "terminate",
                         "verify"})


class LabSnapshot:
    """Everything a view shows about one lab: its fields and the figures derived from them.
    Views read it; ``LabState`` (its subclass) writes it, one event at a time."""

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
        self.stage: str | None = None
        self.stage_since: float | None = None
        self.job_stage: str | None = None
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
        # timings: the one per-token fold
        self.tokens = TokenFold(recent_len=recent_tokens)
        self.timings: dict[str, ModeTimings] = self.tokens.modes
        self.num_prompts: int | None = None
        self.new_tokens: int | None = None
        self.d_model: int | None = None
        self.world_size: int | None = None
        self.prompt_texts: dict[str, dict[int, str]] = {m: {} for m in MODES}
        self.last_token_mode: str | None = None
        self.sweeps = 0
        # the d_model sweep as its points arrive (sweep_point events): measured, in d_model order
        self.sweep_points: list[DModelPoint] = []
        self.sweep_skipped: list[SkippedSize] = []
        self.results: dict[str, Any] | None = None
        # the profiled pass: each token step as lanes, one per rank (``timeline_view``)
        self.timeline: Timeline | None = None
        # the lab's figures as it wrote them (the ``figures`` event), once it has them
        self.lab_figures: LabFigures | None = None
        self._figures: tuple[int, LabFigures] | None = None
        # termination as the user sees it
        self.terminate_requested_at: float | None = None
        self.terminate_seen = False    # the lab entered its terminate stage
        self.verify_seen = False
        # the log
        self.log: deque[LogLine] = deque(maxlen=log_lines)
        self.log_seq = 0

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
        return self.running and self.stage in _POD_STAGES

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

    @property
    def figures(self) -> LabFigures:
        """The lab's figures, the one record every face renders: the lab's own once it wrote
        them (the ``figures`` event), else made from the job's results (with the cost figure
        so far), else from the live stream (each figure ``so_far``). Made once per ``rev``."""
        if self._figures is not None and self._figures[0] == self.rev:
            return self._figures[1]
        if self.lab_figures is not None:
            made = self.lab_figures
        elif self.results:
            made = LabFigures.from_results(self.results, cost=self.cost.figure())
        else:
            made = LabFigures.from_fold(self.tokens, timeline=self.timeline,
                                        cost=self.cost.figure())
        self._figures = (self.rev, made)
        return made

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

    # ------------------------------------------------------------------ the log
    def add_line(self, ts: float, src: str, level: str, text: str) -> None:
        """Add a line to the bounded log (``log_seq`` numbers every line the lab had)."""
        self.log_seq += 1
        self.log.append(LogLine(self.log_seq, ts, src, level, text))

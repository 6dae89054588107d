"""The app's lab side: Start, following a lab's events, and what happens when it ends.

A mixin of ``TplabApp`` (``tui/dashboard.py``), which holds the attributes used here. The lab is
built and awaited in a worker (``_run_lab``): the orchestrator's imports and the start checks
run in a thread, so Start answers at once ("starting …") and the first paint never waits. A
start that cannot work (no API key, a missing file, a budget that fails pre-flight) is refused
there with one sentence, before any lab folder exists.

Three kinds of lab go through the same path, so they fill the same panels:

* ``live``   a real (or ``--mock``) lab from ``lab_factory``;
* ``replay`` a finished lab's ``stream.jsonl`` played at a chosen speed (``--replay DIR``);
* ``past``   a lab opened from the Labs screen (its stream played at once).

When a lab ends: the pod's job.log lines join the log (the ``stderr`` filter), and for a live
lab the ledger is read again, the cloud check runs again, and the screen is saved as
``proof-terminated.svg`` next to the manifest.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from textual import work

from tplab.view.past_labs import read_lab, remote_stderr
from tui.messages import LabFinished, PrecheckDone
from tui.precheck import no_precheck, report_rows
from tui.replay.lab import ReplayLab, speed_name
from tui.scaling.panel import ScalingSource

PROOF_NAME = "proof-terminated.svg"
LIVE, REPLAY, PAST = "live", "replay", "past"


def source_for_lab(manifest: dict[str, Any]) -> ScalingSource:
    """The scaling curve's source for a past lab, from its manifest."""
    kind = str(manifest.get("instance_type") or "")
    parts = kind.split(" ", 1)
    gpu = parts[1] if len(parts) == 2 and parts[0].endswith("x") else kind
    for suffix in (" spot", " on-demand"):
        gpu = gpu.removesuffix(suffix)
    world = manifest.get("world_size")
    return ScalingSource(gpu, world if isinstance(world, int) and world > 1 else 2,
                         manifest.get("mock") is True)


class LabRunner:
    # ------------------------------------------------------------------ start
    def action_start(self) -> None:
        if self.lab_active:
            self.notify("A lab is already starting or running: TERMINATE it (ctrl+t) or wait "
                        "for it to end.", severity="warning")
            return
        if self.replay_dir is not None:
            speed = self.replay_speed
            self._begin(lambda: ReplayLab(self.replay_dir, speed), REPLAY,
                        f"replaying {self.replay_dir.name} at {speed_name(speed)}")
            return
        if self.lab_factory is None:
            self.notify("No lab to start (run tplab-tui with lab options or --mock).",
                        severity="error")
            return
        self._begin(self.lab_factory, LIVE, "loading the lab; the local mock cloud starts "
                    "first" if self.mock else "loading the lab and checking before spending")

    def open_past_lab(self, path: Path, speed: float = 0.0) -> None:
        """Show a finished lab in the dashboard: its stream played into the same panels (at
        once with ``speed`` 0, else as a replay at that speed). Never creates a pod."""
        if self.lab_active:
            self.notify("A lab is running: TERMINATE it or wait for it to end, then open a past "
                        "lab.", severity="error")
            return
        lab = read_lab(path)
        if not lab.has_stream:
            self.notify(f"{path} has no stream.jsonl to show.", severity="error")
            return
        self.scaling_panel.set_source(source_for_lab(lab.manifest))
        mode = PAST if speed == 0 else REPLAY
        self._begin(lambda: ReplayLab(path, speed), mode,
                    f"opening {path.name}" if mode == PAST
                    else f"replaying {path.name} at {speed_name(speed)}")
        self.shown_lab = lab
        self.state.set_plan(mock=lab.mock)  # its stream says so too; the manifest always does
        self.state.lab_id = lab.lab_id
        self.redraw_controls()

    def _begin(self, factory: Callable[[], Any], mode: str, starting: str) -> None:
        if mode == LIVE and self.scaling_panel.source is not self.scaling:
            self.scaling_panel.set_source(self.scaling)
        self.mode = mode
        self.shown_lab = None
        self.state = self._new_state()
        self.state.note_starting(starting)
        if mode == LIVE and self.ledger_budget is not None:
            self.state.set_ledger_budget(self.ledger_budget)
        self.scaling_panel.reset()
        self.log_panel.reset()
        self.outcome = self.lab_error = self.notice = None
        self.proof_path = None
        self._sweep, self._sweep_done = None, False
        self.lab_active = True
        self.redraw_controls()  # the answer to Start at once; the panels follow on the timer
        self._run_lab(factory)

    @work(group="lab", exclusive=True, exit_on_error=False)
    async def _run_lab(self, factory: Callable[[], Any]) -> None:
        """Build the lab, stream its events into the state, await its end."""
        preload = getattr(factory, "preload", None)
        refusal = getattr(factory, "refusal", None)
        try:
            if preload is not None:  # heavy imports off the UI loop
                await asyncio.to_thread(preload)
            if refusal is not None:
                why = await asyncio.to_thread(refusal)
                if why:
                    self.post_message(LabFinished(refused=why))
                    return
            lab = factory()
        except Exception as exc:  # noqa: BLE001 - shown to the user, lab never started
            self.post_message(LabFinished(None, f"could not start the lab: {exc}"))
            return
        self.lab = lab
        now = getattr(lab, "now", None)
        if callable(now):
            self.state.clock = now
        consumer = asyncio.create_task(self._consume(lab.subscribe()))
        await asyncio.sleep(0)  # let the subscription register before the lab emits
        if self.state.terminate_requested_at is not None:
            lab.request_terminate("user")
        outcome, error = None, None
        try:
            outcome = await lab.run()
        except Exception as exc:  # noqa: BLE001 - the lab's own failure, shown as such
            error = f"{type(exc).__name__}: {exc}"
        try:
            await asyncio.wait_for(consumer, timeout=5.0)  # the last events (done, gone)
        except (TimeoutError, Exception):  # noqa: BLE001
            consumer.cancel()
        self.post_message(LabFinished(outcome, error))

    async def _consume(self, events) -> None:
        apply = self.state.apply
        n = 0
        async for ev in events:
            apply(ev)
            n += 1
            if n % 256 == 0:  # a backlog must not starve key presses
                await asyncio.sleep(0)

    def feed(self, events) -> None:
        """Apply events directly (tests); the timer redraws as usual."""
        self.state.apply_many(events)

    # ------------------------------------------------------------------ the end
    def on_lab_finished(self, msg: LabFinished) -> None:
        self.lab_active = False
        if msg.refused:
            self.state.starting = None
            self.state.note(msg.refused, "error")
            self.notice = f"not started: {msg.refused}"
            self.notify(msg.refused, title="Not started (nothing was created)",
                        severity="error", timeout=12)
            self.redraw(force=True)
            if self._quit_after_lab:
                self.call_after_refresh(self._exit_now)
            return
        self.outcome = msg.outcome
        self.lab_error = msg.error
        if msg.error:
            self.state.note(f"lab error: {msg.error}", "error")
            self.notify(msg.error, title="Lab failed", severity="error", timeout=10)
        out_dir = getattr(msg.outcome, "out_dir", None) or self.state.out_dir
        if out_dir:
            self.state.add_remote_lines(remote_stderr(Path(out_dir)))
        if self.mode == LIVE:
            self.refresh_budget()
            self.start_precheck()
        self.redraw(force=True)
        if self.save_proof and out_dir and self.mode == LIVE:
            self.call_after_refresh(self._save_proof, Path(out_dir))
        elif self._quit_after_lab:
            self.call_after_refresh(self._exit_now)

    def _save_proof(self, out_dir: Path) -> None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            self.proof_path = Path(self.save_screenshot(PROOF_NAME, str(out_dir)))
            self.state.note(f"screen saved: {self.proof_path}")
        except OSError as exc:
            self.notify(f"could not save {PROOF_NAME}: {exc}", severity="error")
        else:
            # list it in manifest.json (artifacts, terminated_screenshot) when the lab can
            add_artifact = getattr(self.lab, "add_artifact", None)
            if callable(add_artifact) and self.proof_path.parent == out_dir:
                try:
                    add_artifact(PROOF_NAME)
                except Exception as exc:  # noqa: BLE001 - shown, the screenshot is saved
                    self.notify(f"could not list {PROOF_NAME} in the manifest: {exc}",
                                severity="warning")
        if self._quit_after_lab:
            self._exit_now()

    # ------------------------------------------------------------------ before Start
    def refresh_budget(self) -> None:
        """Read the ledger now (standard library only: fast, no torch) into the state."""
        if self.ledger is None:
            return
        self.ledger_budget = self.ledger()
        self.state.set_ledger_budget(self.ledger_budget)

    def start_precheck(self) -> None:
        if self.precheck is None or self.precheck is no_precheck:
            return
        self.instance_panel.check_status = "checking the cloud…"
        self.instance_panel.redo()
        self._precheck_worker()

    @work(thread=True, group="precheck", exclusive=True, exit_on_error=False)
    def _precheck_worker(self) -> None:
        try:
            report, error = self.precheck(), None  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            report, error = None, " ".join(str(exc).split()) or type(exc).__name__
        self.post_message(PrecheckDone(report, error))

    def on_precheck_done(self, msg: PrecheckDone) -> None:
        panel = self.instance_panel
        panel.check_rows = report_rows(msg.report)
        panel.check_status = (f"check failed: {msg.error}" if msg.error else
                              "" if panel.check_rows else "the check returned nothing")
        panel.redo()

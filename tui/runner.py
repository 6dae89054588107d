"""The dashboard's lab side, as one object the App owns: Start, following a lab, TERMINATE, the
leftover-pod sweep and the end of a lab (with ``quit_flow``, how the dashboard ends).

Why one object: the App draws; the runner decides what happens to the lab and its pod, and owns
the lab's ``LabState``. It holds no widget: what it needs from the App (a notification, a
redraw, a worker, a dialog) is the ``Host`` protocol below, which ``TplabApp`` satisfies.

The lab is built and awaited in a worker (``follow``): the orchestrator's imports and the start
checks run in a thread, so Start answers at once ("starting …") and the first paint never waits.
A start that cannot work (no API key, a missing file, a budget that fails pre-flight) is refused
there with one sentence, before any lab folder exists. Three kinds of lab go the same way, so
they fill the same panels: ``live`` (a real or ``--mock`` lab from ``lab_factory``), ``replay``
(a finished lab's ``stream.jsonl`` at a chosen speed) and ``past`` (a lab opened from the Labs
screen, its stream played at once).

TERMINATE never asks for confirmation, works in every state, and a second press changes nothing:
with a lab running it asks the lab to terminate its pod (the lab terminates and verifies); with
none running it looks for tplab pods left behind and terminates them. How the dashboard
ends (quit, a stop signal, the terminal gone, leaving the pod running) is ``tui/quit_flow.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, Literal, Protocol

from textual.message import Message
from textual.screen import Screen

from tplab.records.events import Event
from tplab.viewmodel.past_labs import PastLab, read_lab, remote_stderr
from tplab.viewmodel.parts import Budget
from tplab.viewmodel.fold import LabState
from tui.lab_port import LabFactory, LabPort
from tui.messages import LabFinished, SweepProgress
from tui.replay import ReplayLab, speed_name
from tui.quit_flow import QuitFlow
from tui.widgets.scaling_panel import ScalingSource

PROOF_NAME = "proof-terminated.svg"
LIVE, REPLAY, PAST = "live", "replay", "past"
Severity = Literal["information", "warning", "error"]


class Host(Protocol):
    """What the runner asks of the App."""

    def notify(self, message: str, *, title: str = "", severity: Severity = "information",
               timeout: float | None = None) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def call_after_refresh(self, callback: Callable[..., Any], *args: Any) -> bool: ...

    def exit(self, result: int | None = None) -> None: ...

    def finish(self, code: int) -> None:
        """Exit with ``code`` once the lab is over and recorded (the process ends even if the
        toolkit's shutdown cannot finish)."""

    def show_dashboard(self) -> None: ...

    def save_screenshot(self, filename: str | None = None, path: str | None = None) -> str: ...

    def start_worker(self, work: Coroutine[Any, Any, None], group: str) -> None: ...

    def push_dialog(self, screen: Screen[Any], callback: Callable[[Any], None]) -> None: ...

    def dialog_open(self) -> bool: ...

    def lab_began(self, scaling: ScalingSource | None) -> None: ...

    def start_precheck(self) -> None: ...

    def redraw(self, force: bool = False) -> None: ...

    def redraw_controls(self) -> None: ...


def check_refusal(report: Any) -> str | None:
    """One sentence when the cloud check before Start (a ``CheckReport``) says a lab cannot
    run now, naming the first reason; None when it can, or when there is no answer yet."""
    if report is None or getattr(report, "can_run", True):
        return None
    lines = [x for x in getattr(report, "lines", []) if getattr(x, "ok", None) is False]
    first = lines[0].text.rstrip(". ") if lines else "see the Instance panel"
    return (f"The cloud check says a lab cannot run now ({first}); nothing was created. The "
            "check runs again: press s once it says a lab can run.")


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
    """One lab at a time, and its ``state`` (what the panels draw)."""

    def __init__(self, host: Host, *, lab_factory: LabFactory | None = None,
                 sweep_factory: Callable[[], Any] | None = None, plan: dict[str, Any],
                 clock: Callable[[], float], mock: bool = False, api_url: str | None = None,
                 ledger: Callable[[], Budget] | None = None, save_proof: bool = True,
                 replay_dir: Path | None = None, replay_speed: float = 10.0) -> None:
        self.host = host
        self.lab_factory = lab_factory
        self.sweep_factory = sweep_factory
        self.plan = plan
        self.clock = clock
        self.mock = mock
        self.api_url = api_url
        self.ledger = ledger
        self.ledger_budget: Budget | None = None
        self.save_proof = save_proof
        self.replay_dir = replay_dir
        self.replay_speed = replay_speed
        #: the lab a replay plays (``--replay DIR``, or the one replayed from the Labs screen):
        #: Start plays it again while the dashboard shows a replay
        self.replayed: Path | None = replay_dir
        self.mode = REPLAY if replay_dir is not None else LIVE
        self.shown_lab: PastLab | None = None
        self.state = self.new_state()
        self.lab: LabPort | None = None
        self.lab_active = False
        self.outcome: Any = None
        self.lab_error: str | None = None
        self.notice: str | None = None
        self.proof_path: Path | None = None
        self.saving_proof = False          # the lab ended; its proof screenshot is on its way
        self.sweep: str | None = None      # what the leftover sweep says now
        self.sweep_done = False
        self.sweeping = False
        self.quitting = QuitFlow(self)     # quit, a stop signal, leaving the pod running
        #: the cloud check's last answer before Start (``tplab check``'s report), if any
        self.check_report: Any = None

    @property
    def is_live(self) -> bool:
        """A lab of this dashboard's own (real or mock), not a replay or a past lab."""
        return self.mode == LIVE

    def new_state(self) -> LabState:
        state = LabState(clock=self.clock)
        state.set_plan(num_prompts=self.plan.get("num_prompts"),
                       new_tokens=self.plan.get("new_tokens"),
                       world_size=self.plan.get("world_size"),
                       mock=self.mock if self.mode in (LIVE, REPLAY) else None)
        return state

    # ------------------------------------------------------------------ start
    @property
    def start_label(self) -> str:
        """What Start does now: "Replay" in a replay (it plays it again), else "Start"."""
        return "Replay" if self.mode == REPLAY and self.replayed is not None else "Start"

    @property
    def can_start_new(self) -> bool:
        """Whether a lab of this dashboard's own can start (it was given lab options)."""
        return self.lab_factory is not None

    def start(self) -> None:
        """Start (``s``): in a replay, play the same lab again; else start a new lab."""
        if self.mode == REPLAY and self.replayed is not None:
            if self._busy():
                return
            folder, speed = self.replayed, self.replay_speed
            lab = self.shown_lab
            self._begin(lambda: ReplayLab(folder, speed), REPLAY,
                        f"replaying {folder.name} at {speed_name(speed)}",
                        scaling=source_for_lab(lab.manifest) if lab is not None else None)
            self._shown(lab)
            return
        self.start_new()

    def _busy(self) -> bool:
        if self.lab_active:
            self.host.notify("A lab is already starting or running: TERMINATE it (ctrl+t) or "
                             "wait for it to end." if self.mode == LIVE else
                             "The replay is still playing: wait for it to end.",
                             severity="warning")
        return self.lab_active

    def start_new(self) -> None:
        """A new lab of this dashboard's own (``n`` after a replay or a past lab; ``s`` else)."""
        host = self.host
        if self._busy():
            return
        if self.lab_factory is None:
            host.notify("No lab to start (run tplab-tui with lab options or --mock).",
                        severity="error")
            return
        why = check_refusal(self.check_report)
        if why:  # the check before Start said no: refused here, nothing made (no lab folder)
            self.mode = LIVE
            self.finished(LabFinished(refused=why))
            host.start_precheck()  # asked again: the next Start goes by the new answer
            return
        self._begin(self.lab_factory, LIVE, "loading the lab; the local mock cloud starts "
                    "first" if self.mock else "loading the lab and checking before spending")

    def open_past_lab(self, path: Path, speed: float = 0.0) -> None:
        """Show a finished lab in the dashboard: its stream played into the same panels (at
        once with ``speed`` 0, else as a replay at that speed). Never creates a pod."""
        if self.lab_active:
            self.host.notify("A lab is running: TERMINATE it or wait for it to end, then open a "
                             "past lab.", severity="error")
            return
        lab = read_lab(path)
        if not lab.has_stream:
            self.host.notify(f"{path} has no stream.jsonl to show.", severity="error")
            return
        mode = PAST if speed == 0 else REPLAY
        if mode == REPLAY:
            self.replayed, self.replay_speed = path, speed
        self._begin(lambda: ReplayLab(path, speed), mode,
                    f"opening {path.name}" if mode == PAST
                    else f"replaying {path.name} at {speed_name(speed)}",
                    scaling=source_for_lab(lab.manifest))
        self._shown(lab)

    def _shown(self, lab: PastLab | None) -> None:
        """The past lab the panels show (its manifest says whether it was a mock lab)."""
        if lab is None:
            return
        self.shown_lab = lab
        self.state.set_plan(mock=lab.mock)  # its stream says so too; the manifest always does
        self.state.lab_id = lab.lab_id
        self.host.redraw_controls()

    def _begin(self, factory: Callable[[], LabPort], mode: str, starting: str,
               scaling: ScalingSource | None = None) -> None:
        self.mode = mode
        self.shown_lab = None
        self.state = self.new_state()
        self.state.note_starting(starting)
        if mode == LIVE and self.ledger_budget is not None:
            self.state.set_ledger_budget(self.ledger_budget)
        self.host.lab_began(scaling)
        self.outcome = self.lab_error = self.notice = None
        self.proof_path = None
        self.sweep, self.sweep_done = None, False
        self.lab_active = True
        self.host.redraw_controls()  # the answer to Start at once; the panels follow on the timer
        self.host.start_worker(self.follow(factory), "lab")

    async def follow(self, factory: Callable[[], LabPort]) -> None:
        """Build the lab, stream its events into the state, await its end (a worker)."""
        post = self.host.post_message
        preload = getattr(factory, "preload", None)
        refusal = getattr(factory, "refusal", None)
        try:
            if preload is not None:  # heavy imports off the UI loop
                await asyncio.to_thread(preload)
            if refusal is not None:
                why = await asyncio.to_thread(refusal)
                if why:
                    post(LabFinished(refused=why))
                    return
            lab = factory()
        except Exception as exc:  # noqa: BLE001 - shown to the user, lab never started
            post(LabFinished(None, f"could not start the lab: {exc}"))
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
        except Exception:  # noqa: BLE001 - a stream that did not end in time is dropped
            consumer.cancel()
        post(LabFinished(outcome, error))

    async def _consume(self, events: AsyncIterator[Event]) -> None:
        apply = self.state.apply
        n = 0
        async for ev in events:
            apply(ev)
            n += 1
            if n % 256 == 0:  # a backlog must not starve key presses
                await asyncio.sleep(0)

    def feed(self, events: Iterable[Event]) -> None:
        """Apply events directly (tests); the timer redraws as usual."""
        self.state.apply_many(events)

    # ------------------------------------------------------------------ the end
    def finished(self, msg: LabFinished) -> None:
        host = self.host
        self.lab_active = False
        if msg.refused:
            self.state.starting = None
            self.state.note(msg.refused, "error")
            self.notice = f"not started: {msg.refused}"
            host.notify(msg.refused, title="Not started (nothing was created)",
                        severity="error", timeout=12)
            host.redraw(force=True)
            if self.quitting.asked:
                host.call_after_refresh(self.quitting.exit_now)
            return
        self.outcome = msg.outcome
        self.lab_error = msg.error
        if msg.error:
            self.state.note(f"lab error: {msg.error}", "error")
            host.notify(msg.error, title="Lab failed", severity="error", timeout=10)
        out_dir = getattr(msg.outcome, "out_dir", None) or self.state.out_dir
        if out_dir:
            self.state.add_remote_lines(remote_stderr(Path(out_dir)))
        if self.mode == LIVE:
            self.refresh_budget()
            if not self.quitting.asked:  # asking the cloud again is for the next Start
                host.start_precheck()
        host.redraw(force=True)
        rented = getattr(msg.outcome, "pod_id", None) or self.state.instance.pod_id
        if self.save_proof and out_dir and self.mode == LIVE and rented:
            # the screen is the proof of a pod's end: a lab that never rented has none
            self.saving_proof = True
            host.call_after_refresh(self._save_proof, Path(out_dir))
        elif self.quitting.asked:
            host.call_after_refresh(self.quitting.exit_now)

    def _save_proof(self, out_dir: Path) -> None:
        host = self.host
        self.saving_proof = False
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            self.proof_path = proof = Path(host.save_screenshot(PROOF_NAME, str(out_dir)))
            self.state.note(f"screen saved: {proof}")
        except OSError as exc:
            host.notify(f"could not save {PROOF_NAME}: {exc}", severity="error")
        else:
            # list it in manifest.json (artifacts, terminated_screenshot) when the lab can
            add_artifact = getattr(self.lab, "add_artifact", None)
            if callable(add_artifact) and proof.parent == out_dir:
                try:
                    add_artifact(PROOF_NAME)
                except Exception as exc:  # noqa: BLE001 - shown, the screenshot is saved
                    host.notify(f"could not list {PROOF_NAME} in the manifest: {exc}",
                                severity="warning")
        if self.quitting.asked:
            self.quitting.exit_now()

    def refresh_budget(self) -> None:
        """Read the ledger now (standard library only: fast, no torch) into the state."""
        if self.ledger is None:
            return
        self.ledger_budget = self.ledger()
        self.state.set_ledger_budget(self.ledger_budget)

    # ------------------------------------------------------------------ TERMINATE
    def terminate(self) -> None:
        if self.mode != LIVE and (self.lab_active or self.sweep_factory is None):
            self.host.notify("This is a recording played back: there is no pod to terminate.",
                             title="REPLAY")
            return
        if self.lab_active:
            if self.state.note_terminate_requested() and self.lab is not None:
                self.lab.request_terminate("user")
            # a lab still being built picks the request up from the state (see follow)
        elif self.state.terminate_status == "gone" and self.mode == LIVE:
            pass  # this lab's pod is verified gone: nothing left to do
        elif not self.sweeping:
            self.sweeping = True
            self.host.start_worker(self.sweep_leftovers(), "sweep")
        self.host.redraw_controls()

    async def sweep_leftovers(self) -> None:
        """TERMINATE with no lab running: find pods tplab left behind and terminate them."""
        post = self.host.post_message
        if self.sweep_factory is None:
            post(SweepProgress("no lab configured: no provider to ask for pods", finished=True,
                               ok=False))
            return
        post(SweepProgress("looking for tplab pods left running…"))
        try:
            lab = await asyncio.to_thread(self.sweep_factory)
            pods = list(await asyncio.to_thread(lab.find_leftover_pods))
            left: list[str] = []
            for pod in pods:  # one pod's failure never stops the others
                post(SweepProgress(f"terminating leftover pod {pod.id}… verifying gone…"))
                try:
                    proof = await lab.terminate_pod(pod.id)
                    gone, why = bool(getattr(proof, "gone", False)), "still shown alive"
                except Exception as exc:  # noqa: BLE001 - said, and the next pod still goes
                    gone, why = False, " ".join(str(exc).split()) or type(exc).__name__
                if not gone:
                    left.append(pod.id)
                self.state.note(f"leftover pod {pod.id} "
                                + ("terminated, verified gone" if gone else
                                   f"NOT verified gone ({why}): check the provider console and "
                                   f"press TERMINATE again"),
                                "info" if gone else "error")
            if left:
                post(SweepProgress(f"{len(left)} of {len(pods)} leftover pod(s) NOT verified gone "
                                   f"({', '.join(left)}): check the provider console",
                                   finished=True, ok=False))
            else:
                post(SweepProgress(f"{len(pods)} leftover pod(s) terminated ✓" if pods
                                   else "no tplab pod is running ✓", finished=True, ok=True))
        except Exception as exc:  # noqa: BLE001 - shown to the user
            post(SweepProgress(f"leftover check failed: {exc}", finished=True, ok=False))

    def sweep_progress(self, msg: SweepProgress) -> None:
        self.sweep = msg.text
        if msg.finished:
            self.sweeping = False
        self.sweep_done = msg.finished and msg.ok
        self.state.note(msg.text, "info" if msg.ok else "error")
        self.host.redraw_controls()
        if msg.finished and self.quitting.asked and not self.lab_active:
            self.quitting.exit_now()  # a stop signal came while leftover pods were being ended

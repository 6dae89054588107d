"""`tplab-tui`: the live dashboard of one tensor-parallel lab.

How it is wired (and why):

* One worker builds the orchestrator's ``Lab`` (imported there, after the first paint, so the
  first frame never waits for asyncssh or the provider, and torch is never imported), subscribes
  to its event stream and awaits ``lab.run()``. A second task folds every event into a
  ``LabState`` (O(1) per event, bounded buffers).
* The panels redraw from that state on a timer (``refresh_hz``, 4–30 Hz), never once per event,
  so a stream of thousands of token events per second costs ten redraws per second and a key
  press is answered at once.
* The app holds no lab logic: TERMINATE calls ``lab.request_terminate()`` and the button shows
  what the lab's own events say (terminating… verifying… gone ✓). Quit with a pod alive asks
  what to do with it. When the lab ends the screen is saved as ``proof-terminated.svg`` next to
  the manifest.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header

from tplab.events import Event
from tplab.lab.faces.state import LabState
from tui.budget.panel import BudgetPanel
from tui.commands import LabCommands
from tui.instance.panel import InstancePanel
from tui.lab_port import LabFactory, LabPort
from tui.log.panel import LogPanel
from tui.messages import LabFinished, SweepProgress
from tui.scaling.panel import ScalingPanel, ScalingSource
from tui.screens.quit import (CANCEL, LEAVE_RUNNING, TERMINATE_AND_QUIT, ConfirmLeaveScreen,
                              QuitScreen)
from tui.terminate.bar import ActionBar, StartPressed, TerminatePressed
from tui.timings.plot import TokenPlot
from tui.timings.stats import TimingsStats

PROOF_NAME = "proof-terminated.svg"
MIN_HZ, MAX_HZ = 4.0, 30.0


class TplabApp(App[int]):
    """The dashboard. ``lab_factory`` builds the lab on Start (None: nothing to start)."""

    CSS_PATH = "app.tcss"
    TITLE = "tplab"
    SUB_TITLE = "tensor-parallel inference lab"
    COMMANDS = App.COMMANDS | {LabCommands}
    BINDINGS = [
        Binding("ctrl+t", "terminate", "TERMINATE", priority=True),
        Binding("t", "terminate", "Terminate", show=False),
        Binding("s", "start", "Start"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False),
    ]

    def __init__(self, lab_factory: LabFactory | None = None, *, start: bool = False,
                 plan: dict[str, int] | None = None, clock: Callable[[], float] = time.time,
                 refresh_hz: float = 10.0, scaling: ScalingSource | None = None,
                 save_proof: bool = True,
                 sweep_factory: Callable[[], Any] | None = None) -> None:
        super().__init__()
        if not MIN_HZ <= refresh_hz <= MAX_HZ:
            raise ValueError(f"refresh_hz must be between {MIN_HZ} and {MAX_HZ}")
        self.lab_factory = lab_factory
        self.sweep_factory = sweep_factory
        self.autostart = start
        self.plan = plan or {}
        self.clock = clock
        self.refresh_hz = refresh_hz
        self.scaling = scaling
        self.save_proof = save_proof
        self.state = self._new_state()
        self.lab: LabPort | None = None
        self.lab_active = False
        self.outcome: Any = None
        self.lab_error: str | None = None
        self.proof_path: Path | None = None
        self._quit_after_lab = False
        self._left_running = False
        self._sweep: str | None = None
        self._sweep_done = False
        self._sweeping = False
        self._drawn_rev = -1
        self._last_tick = 0.0
        self.redraws = 0

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        # references kept: the redraw must reach them while a modal screen is on top
        self.budget_panel = BudgetPanel(id="budget")
        self.instance_panel = InstancePanel(id="instance")
        self.timings_panel = TimingsStats(id="timings")
        self.token_plot = TokenPlot(id="plot")
        self.scaling_panel = ScalingPanel(self.scaling, id="scaling")
        self.log_panel = LogPanel(id="log")
        self.action_bar = ActionBar(id="actions")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield self.budget_panel
                yield self.instance_panel
                yield self.timings_panel
            with Vertical(id="right"):
                yield self.token_plot
                with Horizontal(id="lower"):
                    yield self.scaling_panel
                    yield self.log_panel
        yield self.action_bar
        yield Footer()

    def on_mount(self) -> None:
        # The plots are built in worker threads (tui/plot.py). With CPython's default 5 ms GIL
        # switch interval, every time the UI loop releases the GIL (each select) a busy plot
        # thread keeps it up to 5 ms: tens of such waits per frame add up to a sluggish key
        # press. 1 ms hands it back sooner; restored when the app unmounts.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, 0.001))
        self.set_interval(1.0 / self.refresh_hz, self.redraw)
        self.redraw(force=True)
        self._install_stop_signals()
        if self.autostart:
            self.call_after_refresh(self.action_start)

    def _install_stop_signals(self) -> None:
        """SIGTERM, SIGHUP (the terminal went away) and SIGQUIT end the dashboard the way
        "terminate and quit" does: the lab terminates its pod, verifies it gone, then the app
        exits. (Ctrl-C is a key here, not a signal: it opens the quit dialog.)"""
        import signal

        from tplab.lab.faces.signals import STOP_SIGNALS
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            try:
                loop.add_signal_handler(sig, self._on_stop_signal, STOP_SIGNALS[sig])
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (tests' pilot), or no such signal here

    def _on_stop_signal(self, name: str) -> None:
        self.state.note(f"{name}: terminating the pod, then closing", "warning")
        self._quit_after_lab = True
        if self.lab_active:
            if self.state.note_terminate_requested() and self.lab is not None:
                self.lab.request_terminate(name)
        elif not self.state.pod_alive:
            self._exit_now()

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # our palette entries replace the default Quit and Screenshot (same names, our actions)
        for cmd in super().get_system_commands(screen):
            if cmd.title not in ("Quit", "Screenshot"):
                yield cmd

    # ------------------------------------------------------------------ redraw
    def _new_state(self) -> LabState:
        state = LabState(clock=self.clock)
        state.set_plan(num_prompts=self.plan.get("num_prompts"),
                       new_tokens=self.plan.get("new_tokens"),
                       world_size=self.plan.get("world_size"))
        return state

    def redraw(self, force: bool = False) -> None:
        """Redraw the panels from the state: all of them when it changed, else once a second
        the ones showing time (state age, uptime, heartbeat age)."""
        s = self.state
        now = time.monotonic()
        changed = force or s.rev != self._drawn_rev
        tick = now - self._last_tick >= 1.0
        if not changed and not tick:
            return
        self._last_tick = now
        self.redraws += 1
        self.instance_panel.show(s)
        self.action_bar.show(s, lab_active=self.lab_active, sweep=self._sweep,
                                       sweeping=self._sweeping, sweep_done=self._sweep_done)
        if not changed:
            return
        self._drawn_rev = s.rev
        self.budget_panel.show(s)
        self.timings_panel.show(s)
        self.token_plot.show(s, force=force)
        self.log_panel.show(s)
        self.scaling_panel.show(s)
        self.sub_title = self._subtitle()

    def _subtitle(self) -> str:
        s = self.state
        if s.idle:
            return "idle"
        if s.done:
            return f"{s.done_status or 'ended'}"
        return f"phase {s.phase or '…'}"

    # ------------------------------------------------------------------ lab
    def action_start(self) -> None:
        if self.lab_active:
            self.notify("A lab is already running.", severity="warning")
            return
        if self.lab_factory is None:
            self.notify("No lab to start (run tplab-tui with lab options or --mock).",
                        severity="error")
            return
        self.state = self._new_state()
        self.scaling_panel.reset()
        self.outcome = self.lab_error = None
        self.proof_path = None
        self._sweep, self._sweep_done = None, False
        self.lab_active = True
        self.redraw(force=True)
        self._run_lab()

    @work(group="lab", exclusive=True, exit_on_error=False)
    async def _run_lab(self) -> None:
        """Build the lab, stream its events into the state, await its end."""
        factory = self.lab_factory
        assert factory is not None
        preload = getattr(factory, "preload", None)
        try:
            if preload is not None:  # heavy imports off the UI loop
                await asyncio.to_thread(preload)
            lab = factory()
        except Exception as exc:  # noqa: BLE001 - shown to the user, lab never started
            self.post_message(LabFinished(None, f"could not start the lab: {exc}"))
            return
        self.lab = lab
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
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001
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

    def feed(self, events: Iterable[Event]) -> None:
        """Apply events directly (tests and replays); the timer redraws as usual."""
        self.state.apply_many(events)

    def on_lab_finished(self, msg: LabFinished) -> None:
        self.lab_active = False
        self.outcome = msg.outcome
        self.lab_error = msg.error
        if msg.error:
            self.state.note(f"lab error: {msg.error}", "error")
            self.notify(msg.error, title="Lab failed", severity="error", timeout=10)
        self.redraw(force=True)
        out_dir = getattr(msg.outcome, "out_dir", None) or self.state.out_dir
        if self.save_proof and out_dir:
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

    def _exit_now(self) -> None:
        self.exit(self.exit_code())

    def exit_code(self) -> int:
        if self.lab_error:
            return 1
        code = getattr(self.outcome, "exit_code", None)
        return int(code) if code is not None else 0

    # ------------------------------------------------------------------ terminate
    def on_terminate_pressed(self, _: TerminatePressed) -> None:
        self.action_terminate()

    def on_start_pressed(self, _: StartPressed) -> None:
        self.action_start()

    def action_terminate(self) -> None:
        """TERMINATE: no confirmation, works in every state, and a second press changes
        nothing. With a lab running it asks the lab to terminate its pod (the lab terminates
        and verifies); with none running it looks for tplab pods left behind and terminates
        them."""
        if self.lab_active:
            if self.state.note_terminate_requested() and self.lab is not None:
                self.lab.request_terminate("user")
            # a lab still being built picks the request up from the state (see _run_lab)
        elif self.state.terminate_status == "gone":
            pass  # this lab's pod is verified gone: nothing left to do
        elif not self._sweeping:
            self._sweeping = True
            self._sweep_leftovers()
        self.redraw(force=True)

    @work(group="sweep", exclusive=True, exit_on_error=False)
    async def _sweep_leftovers(self) -> None:
        """TERMINATE with no lab running: find pods tplab left behind and terminate them."""
        post = self.post_message
        if self.sweep_factory is None:
            post(SweepProgress("no lab configured: no provider to ask for pods", finished=True,
                               ok=False))
            return
        post(SweepProgress("looking for tplab pods left running…"))
        try:
            lab = await asyncio.to_thread(self.sweep_factory)
            pods = list(await asyncio.to_thread(lab.find_leftover_pods))
            all_gone = True
            for pod in pods:
                post(SweepProgress(f"terminating leftover pod {pod.id}… verifying gone…"))
                proof = await lab.terminate_pod(pod.id)
                gone = not getattr(proof, "listed", False)
                all_gone = all_gone and gone
                self.state.note(f"leftover pod {pod.id} "
                                + ("terminated, verified gone" if gone else
                                   "terminated but still listed: check the provider console"),
                                "info" if gone else "error")
            post(SweepProgress(f"{len(pods)} leftover pod(s) terminated ✓" if pods
                               else "no tplab pod is running ✓", finished=True, ok=all_gone))
        except Exception as exc:  # noqa: BLE001 - shown to the user
            post(SweepProgress(f"leftover check failed: {exc}", finished=True, ok=False))

    def on_sweep_progress(self, msg: SweepProgress) -> None:
        self._sweep = msg.text
        if msg.finished:
            self._sweeping = False
        self._sweep_done = msg.finished and msg.ok
        self.state.note(msg.text, "info" if msg.ok else "error")
        self.redraw(force=True)

    # ------------------------------------------------------------------ quit
    async def action_quit(self) -> None:
        if self._quit_after_lab:
            self.notify("Terminating; the dashboard closes once the pod is verified gone.")
            return
        if not self.lab_active and not self.state.pod_alive:
            self.exit(self.exit_code())
            return
        if isinstance(self.screen, (QuitScreen, ConfirmLeaveScreen)):
            return
        self.push_screen(QuitScreen(self.state.instance.pod_id), self._on_quit_choice)

    def _on_quit_choice(self, choice: str | None) -> None:
        if choice == TERMINATE_AND_QUIT:
            self._quit_after_lab = True
            self.action_terminate()
            if not self.lab_active:
                self._exit_now()
        elif choice == LEAVE_RUNNING:
            self.push_screen(ConfirmLeaveScreen(self.state.instance.pod_id),
                             self._on_leave_confirmed)
        elif choice in (CANCEL, None):
            pass

    def _on_leave_confirmed(self, yes: bool | None) -> None:
        """Leave the pod running: quit without terminating. ``lab.detach()`` makes the lab stop
        its client side (SSH, heartbeat, cost ticks) without its teardown when the app's exit
        cancels it; the pod's watchdog then terminates it when the heartbeat goes stale or the
        wall-clock cap passes, and the lab's instance record stays open so the next start finds
        it."""
        if not yes:
            return
        detach = getattr(self.lab, "detach", None)
        if callable(detach):
            detach()
        self._left_running = True
        self.state.note("left the pod running (its watchdog still guards it)", "warning")
        self.exit(0)

    # ------------------------------------------------------------------ misc
    def action_help(self) -> None:
        from tui.screens.help import HelpScreen  # not needed for the first paint

        if not isinstance(self.screen, HelpScreen):
            if not self.is_screen_installed("help"):
                self.install_screen(HelpScreen(), "help")  # kept: rendered once, reused
            self.push_screen("help")

    def action_screenshot(self) -> None:
        out = self.state.out_dir or "."
        path = self.save_screenshot(path=out)
        self.notify(f"saved {path}")


# ---------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tplab-tui",
        description="Live dashboard of a tensor-parallel lab on a rented pod (or --mock).")
    parser.add_argument("--start", action="store_true",
                        help="start the lab at once (otherwise press s)")
    parser.add_argument("--refresh-hz", type=float, default=10.0,
                        help=f"panel redraw rate, {MIN_HZ:g}-{MAX_HZ:g} Hz (default 10)")
    from tplab.lab.options import add_lab_arguments  # torch-free, stdlib argparse only

    add_lab_arguments(parser)
    if not any(a.dest == "mock" for a in parser._actions):
        parser.add_argument("--mock", action="store_true",
                            help="use the local mock cloud instead of RunPod")
    return parser


def app_from_args(argv: Sequence[str] | None = None) -> TplabApp:
    args = build_parser().parse_args(argv)
    from tui.lab_port import LazyConfig, real_lab_factory, real_sweep_factory

    # what the panels need comes from the parsed options; the LabConfig itself (which imports
    # tplab.lab) is built in a worker when the lab starts
    config = LazyConfig(args)
    gpus = getattr(args, "gpus", None)
    plan = {k: v for k, v in (
        ("num_prompts", getattr(args, "num_prompts", None)),
        ("new_tokens", getattr(args, "new_tokens", None)),
        ("world_size", gpus)) if isinstance(v, int)}
    scaling = ScalingSource(str(getattr(args, "gpu_type", "") or ""), int(gpus or 2),
                            bool(getattr(args, "mock", False)))
    return TplabApp(real_lab_factory(config), start=args.start, plan=plan,
                    refresh_hz=args.refresh_hz, scaling=scaling,
                    sweep_factory=real_sweep_factory(config))


def main(argv: Sequence[str] | None = None) -> int:
    app = app_from_args(argv)
    code = app.run()
    if app._left_running:
        pod = app.state.instance.pod_id
        print(f"tplab-tui: pod {pod} left running; its watchdog still guards it. "
              f"Stop it with: tplab terminate {pod or ''}".rstrip(), file=sys.stderr)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())

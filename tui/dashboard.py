"""`tplab-tui`'s App: the panels, the layout for the terminal's size, and the redraw timer.

How it is wired (and why):

* The app holds no lab logic. It owns one ``LabRunner`` (``tui/runner.py``: Start, the worker
  that builds and follows a lab, TERMINATE, the end of a lab, quitting), which owns the lab's
  ``LabState``; the app's actions and messages hand over to it, and its long work runs in the
  app's workers. The panels are ``tui/widgets/``, the full screens ``tui/screens/``.
* Events are folded into a ``LabState`` as they arrive; the panels redraw from it on a timer
  (``refresh_hz``, 4–30 Hz), never once per event, so thousands of token events a second cost
  ten redraws a second and a key press is answered at once.
* The layout follows the terminal's size (``tui/layout.py``): wide, medium or narrow, by
  CSS classes on the screen; a narrow screen keeps a summary strip and TERMINATE on screen and
  switches the rest with keys 1–5 (5: the timeline of the profiled pass, in every layout).
* The budget is read from the ledger before the first frame (standard library only, no torch),
  and again after each lab.
* On a real terminal the driver is ``tui/terminal_driver.py``'s (no write blocks the loop; a
  terminal that went away is let go and reported to ``terminal_lost``) and the stop signals are
  ``tui/exit_guard.py``'s; under a test's pilot (headless) neither is used.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header

from tplab.viewmodel.parts import Budget
from tplab.viewmodel.fold import LabState
from tui.palette import LabCommands
from tui.lab_port import LabFactory
from tui.exit_guard import ExitGuard, guard_signals
from tui.layout import VIEWS, WIDE, effective_view, layout_for, switchable
from tui.messages import LabFinished, PrecheckDone, SweepProgress
from tui.precheck import Precheck, no_precheck, report_rows
from tui.replay import SPEEDS, speed_name
from tui.runner import LIVE, PAST, REPLAY, LabRunner
from tui.screens.quit import ConfirmLeaveScreen, QuitScreen
from tui.widgets.action_bar import ActionBar, StartPressed, TerminatePressed
from tui.widgets.budget_panel import BudgetPanel
from tui.widgets.instance import InstancePanel
from tui.widgets.log import LogPanel
from tui.widgets.scaling_panel import ScalingPanel, ScalingSource
from tui.widgets.summary import SummaryStrip
from tui.widgets.timeline_panel import TimelineKeys, TimelinePanel
from tui.widgets.timings import TimingsStats
from tui.widgets.token_plot import TokenPlot
from tui.widgets.view_bar import ViewBar

MIN_HZ, MAX_HZ = 4.0, 30.0
#: after a key press or a click, the dense panels wait this long (see ``input_quiet``)
INPUT_QUIET_S = 0.25


class TplabApp(TimelineKeys, App[int]):
    """The dashboard. ``lab_factory`` builds the lab on Start (None: nothing to start);
    ``replay_dir`` makes it a replay of that finished lab instead (no pod, ever)."""

    CSS_PATH = "app.tcss"
    TITLE = "tplab"
    SUB_TITLE = "tensor-parallel inference lab"
    COMMANDS = App.COMMANDS | {LabCommands}
    BINDINGS = [
        Binding("ctrl+t", "terminate", "TERMINATE", priority=True),
        Binding("t", "terminate", "Terminate", show=False),
        Binding("s", "start", "Start"),
        Binding("n", "new_lab", "New lab"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("l", "labs", "Labs"),
        Binding("1", "view('plot')", "Plot", show=False),
        Binding("2", "view('scaling')", "Scaling", show=False),
        Binding("3", "view('log')", "Log", show=False),
        Binding("4", "view('figures')", "Figures", show=False),
        Binding("5", "view('timeline')", "Timeline", show=False),
        Binding("left_square_bracket", "timeline('prev')", "Previous token", show=False),
        Binding("right_square_bracket", "timeline('next')", "Next token", show=False),
        Binding("m", "timeline('mode')", "Single/TP", show=False),
        Binding("f", "log_filter", "Log filter", show=False),
        Binding("plus", "speed(1)", "Faster", show=False),
        Binding("minus", "speed(-1)", "Slower", show=False),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False),
    ]

    def __init__(self, lab_factory: LabFactory | None = None, *, start: bool = False,
                 plan: dict[str, Any] | None = None, clock: Callable[[], float] = time.time,
                 refresh_hz: float = 10.0, scaling: ScalingSource | None = None,
                 save_proof: bool = True, sweep_factory: Callable[[], Any] | None = None,
                 mock: bool = False, api_url: str | None = None,
                 ledger: Callable[[], Budget] | None = None, precheck: Precheck | None = None,
                 lab_dirs: Iterable[Path] = (), replay_dir: Path | None = None,
                 replay_speed: float = 10.0, screenshots_dir: Path | None = None) -> None:
        super().__init__()
        if not MIN_HZ <= refresh_hz <= MAX_HZ:
            raise ValueError(f"refresh_hz must be between {MIN_HZ} and {MAX_HZ}")
        self.autostart = start
        self.plan = plan or {}
        self.refresh_hz = refresh_hz
        self.scaling = scaling
        self.precheck = precheck
        self.lab_dirs = list(lab_dirs)
        self.screenshots_dir = screenshots_dir
        #: the lab side: Start, the lab and its state, TERMINATE, quitting
        self.runner = LabRunner(self, lab_factory=lab_factory, sweep_factory=sweep_factory,
                                plan=self.plan, clock=clock, mock=mock, api_url=api_url,
                                ledger=ledger, save_proof=save_proof, replay_dir=replay_dir,
                                replay_speed=replay_speed)
        self.view = "plot"
        self.layout_name = WIDE
        self._drawn_rev = -1
        self._last_tick = 0.0
        self._input_at = 0.0
        self.redraws = 0
        #: the stop signals' handlers, on a real terminal only (``_guard_exit``)
        self.exit_guard: ExitGuard | None = None

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        # references kept: the redraw must reach them while another screen is on top
        self.summary = SummaryStrip(id="summary")
        self.view_bar = ViewBar(id="views")
        self.budget_panel = BudgetPanel(id="budget")
        self.instance_panel = InstancePanel(id="instance")
        self.timings_panel = TimingsStats(id="timings")
        self.token_plot = TokenPlot(id="plot")
        self.scaling_panel = ScalingPanel(self.scaling, id="scaling")
        self.log_panel = LogPanel(id="log")
        self.timeline_panel = TimelinePanel(id="timeline")
        self.action_bar = ActionBar(id="actions")
        plan = self._plan_text()
        self.summary.plan_text = self.instance_panel.plan_text = plan
        yield self.summary
        yield self.view_bar
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
            yield self.timeline_panel
        yield self.action_bar
        yield Footer()

    def _plan_text(self) -> str:
        gpu, n = self.plan.get("gpu_type"), self.plan.get("world_size")
        if not gpu:
            return ""
        kind = "on-demand" if self.plan.get("spot") is False else "spot"
        return f"{gpu} × {n or 2} · {kind}"

    def on_mount(self) -> None:
        # The plots are built in worker threads (tui/widgets/plot.py). With CPython's default 5 ms GIL
        # switch interval, every time the UI loop releases the GIL (each select) a busy plot
        # thread keeps it up to 5 ms: tens of such waits per frame add up to a sluggish key
        # press. 1 ms hands it back sooner; restored when the app unmounts.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, 0.001))
        self.runner.refresh_budget()  # before the first frame: the budget is there from the start
        self._apply_layout(self.size.width, self.size.height)
        self.set_interval(1.0 / self.refresh_hz, self.redraw)
        self.redraw(force=True)
        self._guard_exit()
        if self.runner.mode == LIVE:
            self.call_after_refresh(self.start_precheck)
        self.call_after_refresh(self._warm_help)
        if self.autostart:
            self.call_after_refresh(self.action_start)

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    # ------------------------------------------------------------------ the way out
    def get_driver_class(self) -> type[Driver]:
        from tui.terminal_driver import guarded_driver

        return guarded_driver(super().get_driver_class())

    def _guard_exit(self) -> None:
        """Take the stop signals over (on a real terminal only: a test's pilot runs headless in
        the test's own process, whose signals stay its own)."""
        if self.exit_guard is None:
            self.exit_guard = guard_signals(self._driver, self.runner)

    def terminal_lost(self, reason: str) -> None:
        """The driver found the terminal gone (a failed write, a hangup): as SIGHUP."""
        self.runner.quitting.on_stop_signal(reason)

    def finish(self, code: int) -> None:
        """Exit with ``code``; the lab is over and recorded, so the exit guard ends the process
        even if the shutdown cannot finish."""
        if self.exit_guard is not None:
            self.exit_guard.finish_within(code)
        self.exit(code)

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        closing = getattr(self._driver, "mark_closing", None)
        if callable(closing):
            closing()  # restoring the terminal must not wait on one that takes nothing
        super().exit(result, return_code, message)

    def show_dashboard(self) -> None:
        """Close every screen over the dashboard (a dialog, help, the Labs screen) without
        answering it: a stop signal has answered, and the proof screenshot shows the lab."""
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def on_resize(self, event) -> None:
        self._apply_layout(event.size.width, event.size.height)

    def _apply_layout(self, width: int, height: int) -> None:
        layout = layout_for(width, height)
        view = effective_view(layout, self.view)
        screen = self.screen_stack[0] if self.screen_stack else self.screen
        for name in ("wide", "medium", "narrow"):
            screen.set_class(name == layout, f"-{name}")
        for v, _ in VIEWS:
            screen.set_class(v == view, f"-view-{v}")
        screen.set_class(self._mock_now(), "-mock")
        screen.set_class(self.runner.mode != LIVE, "-replay")
        self.layout_name = layout
        extra = "lower right" if layout == "medium" else ""
        if self.runner.mode == REPLAY:
            extra += f"  +/-: speed ({speed_name(self._speed())})"
        self.view_bar.show(switchable(layout), view, extra.strip())

    def action_view(self, view: str) -> None:
        """Keys 1–5 (and clicks on the switch): show that view where the layout switches."""
        if view not in dict(VIEWS):
            return
        self.view = view
        self._apply_layout(self.size.width, self.size.height)

    def action_log_filter(self, group: str | None = None) -> None:
        """``f`` steps through the log's filters; a click on the filter bar picks one."""
        if group is None:
            group = self.log_panel.next_group()
        else:
            self.log_panel.set_group(group)
        if self.layout_name != WIDE and effective_view(self.layout_name, self.view) != "log":
            self.action_view("log")
        # the filter bar marks the group (▸) in the log now on screen: no toast over the lines

    def _speed(self) -> float:
        runner = self.runner
        lab_speed = getattr(runner.lab, "speed", None) if runner.mode == REPLAY else None
        return runner.replay_speed if lab_speed is None else float(lab_speed)

    def action_speed(self, step: int) -> None:
        """+ / -: the replay's speed (×1, ×10, ×100, as fast as it draws)."""
        if self.runner.mode != REPLAY:
            self.notify("+/- change the speed of a replay (tplab-tui --replay DIR).")
            return
        order = list(SPEEDS)
        current = self._speed()
        i = order.index(current) if current in order else 1
        speed = order[max(0, min(len(order) - 1, i + step))]
        self.runner.replay_speed = speed
        lab = self.runner.lab
        if lab is not None and hasattr(lab, "speed"):
            lab.speed = speed
        self._apply_layout(self.size.width, self.size.height)
        self.title = self._title()
        self.notify(f"replay speed {speed_name(speed)}", timeout=1.5)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # our palette entries replace the default Quit and Screenshot (same names, our actions)
        for cmd in super().get_system_commands(screen):
            if cmd.title not in ("Quit", "Screenshot"):
                yield cmd

    # ------------------------------------------------------------------ redraw
    @property
    def state(self) -> LabState:
        """The lab shown: what every panel draws (the runner's)."""
        return self.runner.state

    def _mock_now(self) -> bool:
        return bool(self.state.mock if self.state.mock is not None else
                    (self.runner.mock and self.runner.mode == LIVE))

    async def on_event(self, event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)):
            self._input_at = time.monotonic()
        await super().on_event(event)

    def input_quiet(self) -> float:
        """Seconds left of the quiet window after a key press or click: the dense panels (the
        timings, the plots) wait so that the frame answering the input is a light one."""
        return max(0.0, self._input_at + INPUT_QUIET_S - time.monotonic())

    def _covered(self) -> bool:
        """A full screen (help, Labs) hides the dashboard: its dense panels wait, so they are
        not all dirty (and drawn again at once) when it comes back; a lab's end still draws
        them (``force``)."""
        return len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen)

    def redraw_controls(self) -> None:
        """Only what answers a key press (the action bar, the summary strip, the instance
        panel): light widgets, so the answer is on the next frame, not after the dense ones."""
        s = self.state
        self.instance_panel.show(s)
        self.summary.show(s)
        r = self.runner
        self.action_bar.show(s, lab_active=r.lab_active, sweep=r.sweep or r.notice,
                             sweeping=r.sweeping, sweep_done=r.sweep_done,
                             mode=r.mode, start_label=r.start_label)

    def redraw(self, force: bool = False) -> None:
        """Redraw the panels from the state: all of them when it changed, else once a second
        the ones showing time (state age, uptime, heartbeat age). Right after a key press only
        the controls (``input_quiet``)."""
        s = self.state
        now = time.monotonic()
        changed = force or s.rev != self._drawn_rev
        tick = now - self._last_tick >= 1.0
        if not changed and not tick:
            return
        self.redraws += 1
        self.redraw_controls()
        if not force and (self.input_quiet() > 0 or self._covered()):
            return
        self._last_tick = now
        self.timings_panel.show(s, force=force)  # throttled; the tick catches the last change
        if not changed:
            return
        self._drawn_rev = s.rev
        self.budget_panel.show(s)
        self.token_plot.show(s, force=force)
        self.log_panel.show(s)
        self.scaling_panel.show(s)
        self.timeline_panel.show(s)
        title, sub = self._title(), self._subtitle()
        if title != self.title:
            self.title = title
            self._apply_layout(self.size.width, self.size.height)
        if sub != self.sub_title:
            self.sub_title = sub

    def _title(self) -> str:
        mode, replayed = self.runner.mode, self.runner.replayed
        parts = ["tplab"] if mode == LIVE else []  # a recording's title is long: it fits 80
        if self._mock_now():
            parts.append("MOCK (simulated)" if mode == LIVE else "MOCK")
        if mode == REPLAY:
            name = replayed.name if replayed else (self.state.lab_id or "")
            parts.append(f"REPLAY {speed_name(self._speed())} · {name} · no pod")
        elif mode == PAST:
            parts.append(f"PAST LAB {self.state.lab_id or ''}".rstrip())
        return " · ".join(parts)

    def _subtitle(self) -> str:
        s = self.state
        if s.idle:
            return "idle"
        if s.done:
            return f"{s.done_status or 'ended'}"
        if s.starting:
            return "starting"
        return f"stage {s.stage or '…'}"

    # ------------------------------------------------------------------ screens
    @work(thread=True, group="warm", exit_on_error=False)
    def _warm_help(self) -> None:
        """Lay the help text out once, off the UI loop, so the first ? is as quick as the rest."""
        from tui.screens.help import help_text, text_width

        help_text(text_width(self.size.width))

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen  # not needed for the first paint

        if not isinstance(self.screen, HelpScreen):
            if not self.is_screen_installed("help"):
                self.install_screen(HelpScreen(), "help")  # kept: rendered once, reused
            self.push_screen("help")

    def action_labs(self) -> None:
        from tui.screens.past_labs_screen import LabsScreen  # not needed for the first paint

        if isinstance(self.screen, LabsScreen):
            return
        self.push_screen(LabsScreen(self.lab_dirs), self._on_lab_chosen)

    def _on_lab_chosen(self, choice: tuple[str, Path] | None) -> None:
        if not choice:
            return
        what, path = choice
        self.runner.open_past_lab(Path(path), 0.0 if what == "open" else 10.0)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """ctrl+s: an SVG of the screen next to the lab shown (its folder), else in
        TPLAB_HOME/screenshots; never in the current directory. (``filename`` and ``path``, as
        Textual's own action takes them, override the name and the folder.)"""
        out = (Path(path) if path else Path(self.state.out_dir) if self.state.out_dir
               else self.screenshots_dir)
        if out is None:
            from tplab.home.paths import tplab_home
            out = tplab_home(self.runner.mock) / "screenshots"
        try:
            out.mkdir(parents=True, exist_ok=True)
            name = filename or time.strftime("tplab-%Y%m%d-%H%M%S.svg", time.localtime())
            saved = self.save_screenshot(name, path=str(out))
        except OSError as exc:
            self.notify(f"could not save the screenshot in {out}: {exc}", severity="error")
            return
        self.notify(f"saved {saved}")

    # ------------------------------------------------------------------ the lab side
    def action_start(self) -> None:
        self.runner.start()

    def action_new_lab(self) -> None:
        self.runner.start_new()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``n`` only in a replay, where Start plays it again, if a lab of its own can start."""
        return action != "new_lab" or (self.runner.mode == REPLAY and self.runner.can_start_new)

    def action_terminate(self) -> None:
        self.runner.terminate()

    async def action_quit(self) -> None:
        self.runner.quitting.quit()

    def on_start_pressed(self, _: StartPressed) -> None:
        self.runner.start()

    def on_terminate_pressed(self, _: TerminatePressed) -> None:
        self.runner.terminate()

    def on_lab_finished(self, msg: LabFinished) -> None:
        self.runner.finished(msg)

    def on_sweep_progress(self, msg: SweepProgress) -> None:
        self.runner.sweep_progress(msg)

    def start_worker(self, work: Coroutine[Any, Any, None], group: str) -> None:
        """The runner's long work (a lab, the leftover sweep): one per group, newest wins."""
        self.run_worker(work, group=group, exclusive=True, exit_on_error=False)

    def push_dialog(self, screen: Screen[Any], callback: Callable[[Any], None]) -> None:
        self.push_screen(screen, callback)

    def dialog_open(self) -> bool:
        return isinstance(self.screen, (QuitScreen, ConfirmLeaveScreen))

    def lab_began(self, scaling: ScalingSource | None) -> None:
        """A lab (live, replayed or past) starts filling the panels: they start empty."""
        if scaling is not None:
            self.scaling_panel.set_source(scaling)
        elif self.runner.mode == LIVE and self.scaling_panel.source is not self.scaling:
            self.scaling_panel.set_source(self.scaling)
        self.scaling_panel.reset()
        self.log_panel.reset()
        self.timeline_panel.reset()
        self.refresh_bindings()  # n is offered in a replay only

    # ------------------------------------------------------------------ before Start
    def start_precheck(self) -> None:
        if self.precheck is None or self.precheck is no_precheck:
            return
        self.runner.check_report = None  # a new answer is on its way
        self.instance_panel.check_status = "checking the cloud…"
        self.instance_panel.redo()
        self._precheck_worker()

    @work(thread=True, group="precheck", exclusive=True, exit_on_error=False)
    def _precheck_worker(self) -> None:
        check = self.precheck
        report: Any = None
        error: str | None = None
        try:
            report = check() if check is not None else None
        except Exception as exc:  # noqa: BLE001 - shown in the panel
            error = " ".join(str(exc).split()) or type(exc).__name__
        self.post_message(PrecheckDone(report, error))

    def on_precheck_done(self, msg: PrecheckDone) -> None:
        self.runner.check_report = msg.report  # Start refuses what the check says cannot run
        panel = self.instance_panel
        panel.check_rows = report_rows(msg.report)
        panel.check_status = (f"check failed: {msg.error}" if msg.error else
                              "" if panel.check_rows else "the check returned nothing")
        panel.redo()

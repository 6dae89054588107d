"""How the dashboard ends on a signal: the lab torn down first, then out within seconds, whatever
state Textual's shutdown is in.

Why plain ``signal.signal`` handlers rather than asyncio's ``add_signal_handler``: asyncio runs
its handlers on the event loop, so a loop that is stuck never runs them, and neither a first
nor a second SIGTERM does anything. Python runs these on the main thread between bytecodes,
also while it waits on a lock; they hand the work to the loop (``call_soon_threadsafe``) or
end the process, nothing else.

* SIGTERM, SIGINT, SIGQUIT, SIGHUP: the first asks the app to stop (``stop(name)``: the runner
  terminates a live pod and verifies it gone, then exits; with no pod, in a replay or on the
  Labs screen it exits at once). Every SIGHUP first asks the driver whether the terminal is
  still there (``on_hangup(name)``), so a closed terminal is let go before anything is drawn on it.
* a second SIGTERM, SIGINT or SIGQUIT ends the process at once: the terminal restored as far as
  it can be in a moment, one line on stderr (``farewell()``: which pod may still be running and
  how to end it), exit 128 + the signal. A repeated SIGHUP changes nothing: a closing terminal
  may send several, and the terminal going away must never cut the teardown short.
* ``finish_within(code)``, called once the lab is over and recorded (never before): Textual gets
  ``EXIT_GRACE_S`` to finish its own shutdown; past that the process ends with ``code``
  (``os._exit``), so a shutdown that cannot finish (a thread that never returns, a write that
  never completes) cannot keep it alive. A signal after that ends it at once, with ``code``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from tplab.faces.signals import STOP_SIGNALS

#: how long Textual's shutdown may take once the lab is over and recorded
EXIT_GRACE_S = 3.0
GUARDED: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
#: sent by a person (or a supervisor) asking again: the second one ends the process at once
INSISTENT = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGQUIT})


def _nothing(*_: Any) -> None:
    return None


class ExitGuard:
    """The dashboard's signal handlers and its exit watchdog (see the module docstring).

    ``last_words(line)`` restores the terminal and writes ``line`` in a bounded time;
    ``exit_process`` is ``os._exit`` (tests pass their own)."""

    def __init__(self, *, stop: Callable[[str], None],
                 on_hangup: Callable[[str], object] = _nothing,
                 last_words: Callable[[str], None] = _nothing,
                 farewell: Callable[[str], str] = lambda name: "",
                 exit_process: Callable[[int], None] = os._exit,
                 grace_s: float = EXIT_GRACE_S) -> None:
        self.stop = stop
        self.on_hangup = on_hangup
        self.last_words = last_words
        self.farewell = farewell
        self.exit_process = exit_process
        self.grace_s = grace_s
        self.received: list[int] = []
        self.exit_code: int | None = None    # set once the lab is over and recorded
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}
        self._watchdog: threading.Thread | None = None

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> ExitGuard:
        self._loop = loop or asyncio.get_running_loop()
        for sig in GUARDED:
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass  # not the main thread: nothing taken over
        return self

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            try:
                signal.signal(sig, previous)
            except (ValueError, OSError, TypeError):
                pass
        self._previous.clear()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.handle(signum)

    def handle(self, signum: int) -> None:
        """What one signal does (the handler's body)."""
        asked_before = any(s in INSISTENT for s in self.received)
        first = not self.received
        self.received.append(signum)
        name = STOP_SIGNALS.get(signum) or signal.Signals(signum).name
        if self.exit_code is not None:  # the lab is over and recorded: nothing to wait for
            self.last_words("")
            self.exit_process(self.exit_code)
            return
        if signum in INSISTENT and asked_before:
            self.last_words(self.farewell(name))
            self.exit_process(128 + signum)
            return
        if signum == signal.SIGHUP:
            self.on_hangup(name)
        if not first:
            return  # already stopping: the teardown is not cut short
        loop = self._loop
        try:
            if loop is None:
                raise RuntimeError("not installed on a loop")
            loop.call_soon_threadsafe(self.stop, name)
        except RuntimeError:  # the loop is closed: the app has ended, nothing runs any more
            self.exit_process(128 + signum)

    def finish_within(self, code: int) -> None:
        """The lab is over and recorded and the app is exiting with ``code``: make sure the
        process ends within ``grace_s`` even if Textual's shutdown cannot finish."""
        self.exit_code = code
        if self._watchdog is not None:
            return
        self._watchdog = threading.Thread(target=self._watch, name="tplab-exit-watchdog",
                                          daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        threading.Event().wait(self.grace_s)
        code = self.exit_code if self.exit_code is not None else 1
        self.last_words(f"tplab-tui: the dashboard did not close within {self.grace_s:g} s of "
                        "the lab's end (its record is written); exiting now.")
        self.exit_process(code)


def guard_signals(driver: Any, runner: Any) -> ExitGuard | None:
    """The dashboard's guard, installed, when it runs on a real terminal (``GuardedDriver``);
    None under a headless driver (a test's pilot), which leaves the process's signals alone."""
    from tui.terminal_driver import GuardedDriver

    if not isinstance(driver, GuardedDriver):
        return None
    return ExitGuard(stop=runner.quitting.on_stop_signal, on_hangup=driver.check_terminal,
                     last_words=driver.restore_now, farewell=runner.quitting.forced_exit_note).install()

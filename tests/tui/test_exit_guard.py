"""The dashboard's stop signals and exit watchdog (tui/exit_guard.py), driven by calling the
handler the way the interpreter does, with a recording ``exit_process`` instead of ``os._exit``.
Real signals to a real dashboard are in test_terminal_gone.py."""

from __future__ import annotations

import asyncio
import signal
import time

from tui.exit_guard import ExitGuard


class _Recorder:
    def __init__(self) -> None:
        self.stops: list[str] = []
        self.hangups: list[str] = []
        self.words: list[str] = []
        self.exits: list[int] = []

    def guard(self, loop: asyncio.AbstractEventLoop, grace_s: float = 3.0) -> ExitGuard:
        guard = ExitGuard(stop=self.stops.append, on_hangup=self.hangups.append,
                          last_words=self.words.append,
                          farewell=lambda name: f"{name} again: pod p1 may still be running",
                          exit_process=self.exits.append, grace_s=grace_s)
        guard._loop = loop  # what install() records, without taking this process's signals
        return guard


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_first_sigterm_asks_for_the_teardown_and_a_second_ends_at_once():
    rec = _Recorder()
    guard = rec.guard(asyncio.get_running_loop())
    guard.handle(signal.SIGTERM)
    await _settle()
    assert rec.stops == ["SIGTERM"] and rec.exits == []
    guard.handle(signal.SIGTERM)
    assert rec.exits == [128 + signal.SIGTERM]
    assert rec.words == ["SIGTERM again: pod p1 may still be running"]
    await _settle()
    assert rec.stops == ["SIGTERM"]


async def test_sigint_then_sigquit_is_asking_twice():
    rec = _Recorder()
    guard = rec.guard(asyncio.get_running_loop())
    guard.handle(signal.SIGINT)
    guard.handle(signal.SIGQUIT)
    await _settle()
    assert rec.stops == ["Ctrl-C"] and rec.exits == [128 + signal.SIGQUIT]


async def test_hangups_never_cut_the_teardown_short():
    """A closing terminal may send SIGHUP more than once, and a SIGTERM may follow it: the
    teardown goes on; every SIGHUP checks the terminal."""
    rec = _Recorder()
    guard = rec.guard(asyncio.get_running_loop())
    for sig in (signal.SIGHUP, signal.SIGHUP, signal.SIGTERM, signal.SIGHUP):
        guard.handle(sig)
    await _settle()
    assert rec.stops == ["SIGHUP (the terminal went away)"]
    assert len(rec.hangups) == 3 and rec.exits == []


async def test_once_the_lab_is_recorded_the_watchdog_ends_the_process_within_its_grace():
    rec = _Recorder()
    guard = rec.guard(asyncio.get_running_loop(), grace_s=0.2)
    t0 = time.monotonic()
    guard.finish_within(4)
    guard.finish_within(4)  # one watchdog
    while not rec.exits and time.monotonic() - t0 < 5:
        await asyncio.sleep(0.02)
    assert rec.exits == [4] and 0.2 <= time.monotonic() - t0 < 2
    assert "did not close within 0.2 s" in rec.words[-1]


async def test_a_signal_after_the_lab_is_recorded_ends_at_once_with_the_labs_code():
    rec = _Recorder()
    guard = rec.guard(asyncio.get_running_loop(), grace_s=60)
    guard.finish_within(4)
    guard.handle(signal.SIGHUP)
    assert rec.exits == [4] and rec.stops == []


async def test_a_signal_after_the_loop_closed_ends_the_process():
    loop = asyncio.new_event_loop()
    loop.close()
    rec = _Recorder()
    guard = rec.guard(loop)
    guard.handle(signal.SIGTERM)
    assert rec.exits == [128 + signal.SIGTERM]


def test_install_takes_the_four_signals_and_uninstall_gives_them_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT,
                                                    signal.SIGQUIT, signal.SIGHUP)}
    loop = asyncio.new_event_loop()
    guard = ExitGuard(stop=lambda name: None, exit_process=lambda code: None)
    try:
        guard.install(loop)
        assert all(signal.getsignal(sig) == guard._on_signal for sig in before)
    finally:
        guard.uninstall()
        loop.close()
    assert {sig: signal.getsignal(sig) for sig in before} == before

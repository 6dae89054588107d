"""The dashboard's writer thread (tui/terminal_driver.py): a terminal that went away or takes
nothing never blocks a write for long, and what a live terminal is sent arrives whole, in order.

The driver around it (SIGHUP, SIGCONT, the input thread) runs on a real pseudo-terminal in
test_terminal_gone.py; these drive the thread against pipes, in this process."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tui import terminal_driver
from tui.terminal_driver import OutputThread, gone_reason, tty_alive


class _Calls:
    def __init__(self) -> None:
        self.lost: list[str] = []
        self.flowing = 0

    def on_lost(self, reason: str) -> None:
        self.lost.append(reason)

    def on_flowing(self) -> None:
        self.flowing += 1


def _pipe_thread(calls: _Calls) -> tuple[OutputThread, int]:
    r, w = os.pipe()
    writer = OutputThread(os.fdopen(w, "w", encoding="utf-8"), calls.on_lost, calls.on_flowing)
    writer.start()
    return writer, r


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_what_is_written_arrives_whole_and_in_order():
    calls = _Calls()
    writer, r = _pipe_thread(calls)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(_read_all(r)))
    reader.start()
    sent = [f"\x1b[{i};1Hline {i} ✓" for i in range(2000)]
    for text in sent:
        writer.write(text)
    writer.stop()
    writer.join(10)
    writer._file.close()
    reader.join(10)
    os.close(r)
    assert not writer.is_alive()
    assert got and got[0].decode() == "".join(sent)
    assert calls.lost == [] and writer.dropped == 0


def test_a_reader_gone_marks_the_terminal_lost_once_and_writes_never_wait():
    calls = _Calls()
    writer, r = _pipe_thread(calls)
    os.close(r)  # the other side went away: the next write fails with EPIPE
    writer.write("the first frame")
    deadline = time.monotonic() + 5
    while not calls.lost and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls.lost == ["the terminal went away (EPIPE)"] and writer.lost
    t0 = time.monotonic()
    for i in range(10 * terminal_driver.MAX_QUEUED):  # far past the queue's room
        writer.write(f"frame {i}")
    assert time.monotonic() - t0 < 0.5
    writer.stop()
    assert not writer.is_alive() and calls.lost == ["the terminal went away (EPIPE)"]
    writer._file.close()


def test_a_terminal_that_takes_nothing_is_written_past_then_repainted_when_it_flows(monkeypatch):
    monkeypatch.setattr(terminal_driver, "STALL_S", 0.2)
    calls = _Calls()
    writer, r = _pipe_thread(calls)
    frame = "x" * 8192
    t0 = time.monotonic()
    while writer.dropped == 0 and time.monotonic() - t0 < 10:  # nobody reads the pipe
        writer.write(frame)
    stalled_at = time.monotonic() - t0
    assert writer.dropped == 1, "a write waited for a terminal that took nothing"
    t1 = time.monotonic()
    for _ in range(50):  # written past at once now
        writer.write(frame)
    assert time.monotonic() - t1 < 0.5 and writer.dropped == 51
    assert stalled_at < 5 and calls.flowing == 0 and calls.lost == []
    drained = threading.Thread(target=lambda: _read_all(r), daemon=True)
    drained.start()  # the terminal takes output again
    deadline = time.monotonic() + 5
    while calls.flowing == 0 and time.monotonic() < deadline:
        writer.write(frame)
        time.sleep(0.01)
    assert calls.flowing == 1  # the app is asked for a full repaint
    writer.stop()
    writer.join(10)
    writer._file.close()
    drained.join(5)
    os.close(r)


def test_stopping_a_writer_stuck_on_a_terminal_that_takes_nothing_is_bounded(monkeypatch):
    monkeypatch.setattr(terminal_driver, "STALL_S", 0.1)
    calls = _Calls()
    writer, r = _pipe_thread(calls)
    while writer.dropped == 0:
        writer.write("y" * 65536)
    writer.closing = True
    t0 = time.monotonic()
    for _ in range(20):
        writer.write("restore")
    writer.stop()
    assert time.monotonic() - t0 < 2 * terminal_driver.CLOSING_S + 0.5
    assert writer.is_alive()  # stuck in write(): a daemon thread, which the process does not wait for
    assert writer.daemon
    os.close(r)  # its write fails now (EPIPE): what is queued is dropped, and it can be stopped
    writer.stop()
    writer.join(5)
    assert not writer.is_alive() and calls.lost == ["the terminal went away (EPIPE)"]
    writer._file.close()


def test_a_pipe_is_no_terminal_and_reasons_name_the_error():
    r, w = os.pipe()
    try:
        assert not tty_alive(r)
    finally:
        os.close(r)
        os.close(w)
    assert gone_reason(OSError(5, "Input/output error")) == "the terminal went away (EIO)"
    assert gone_reason(ValueError("closed file")) == "the terminal went away (ValueError)"


@pytest.mark.parametrize("missing", ["_run_input_thread", "_sigtstp_application",
                                     "_sigcont_application", "_writer_thread", "exit_event"])
def test_the_linux_driver_still_has_what_the_guarded_driver_takes_over(missing):
    """GuardedDriver overrides these LinuxDriver internals: a Textual that renamed one would
    bypass the guard silently."""
    import inspect

    from textual.drivers.linux_driver import LinuxDriver

    source = inspect.getsource(LinuxDriver)
    assert missing in source

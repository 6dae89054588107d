"""The dashboard's terminal driver: Textual's LinuxDriver, except that no write can block the
event loop for long and a terminal that went away is noticed and let go.

Why: LinuxDriver hands every write to a writer thread through a queue of 30. When the terminal
closes, its tty answers writes with EIO; the writer thread dies on the first one, nothing
drains the queue again, and the 31st write blocks the event-loop thread for good: the redraw,
the lab's teardown (which runs on that loop), every handler queued on it, and Textual's own
shutdown, which writes to restore the terminal. After a hangup the kernel also sends SIGCONT,
on which LinuxDriver starts application mode again (another writer and input thread), and the
input thread spins on the tty's end of file. So here:

* the writer thread (``OutputThread``) outlives a failed write: EIO, EPIPE, EBADF mark the
  terminal lost and every later write is dropped; fds 1 and 2 are then pointed at /dev/null, so
  nothing (a traceback, the interpreter's exit flush) writes to the dead tty again;
* a write waits for room at most ``STALL_S`` (``CLOSING_S`` once the app is exiting): a
  terminal that takes nothing for that long (a frozen emulator, a stalled SSH link) is written
  past, and the screen is repainted in full once it takes output again;
* a lost terminal stops the input thread and is reported once to the app (its
  ``terminal_lost(reason)``), which ends the lab and exits the way SIGHUP does;
* SIGCONT resumes application mode only after this driver stopped for SIGTSTP (ctrl+z), and only
  on a terminal that is still there.

The writer is swapped in through ``_writer_thread`` (a property here): LinuxDriver creates its
writer in ``start_application_mode`` and stops it in ``close``, and the setter puts an
``OutputThread`` there instead, so the rest of LinuxDriver is used as it is.
"""

from __future__ import annotations

import errno
import os
import queue
import termios
import threading
from collections.abc import Callable
from typing import IO, Any, cast

from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

#: writes queued for the terminal before a write waits (Textual's own figure)
MAX_QUEUED = 30
#: longest a write waits for the terminal to take output while the dashboard runs
STALL_S = 2.0
#: ... and once the app is exiting (restoring the terminal must not hold up the exit)
CLOSING_S = 0.3
#: what restores a terminal LinuxDriver set up, written when there is no time for its shutdown:
#: kitty keys off, mouse off, bracketed paste off, line wrap on, focus events off, main screen,
#: cursor shown
RESET = ("\x1b[<u\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?7h\x1b[?1004l"
         "\x1b[?1049l\x1b[?25h")

TERMINAL_GONE = "the terminal went away"


def gone_reason(exc: BaseException) -> str:
    """The words for a terminal lost to ``exc`` (an errno name when there is one)."""
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    return f"{TERMINAL_GONE} ({name or type(exc).__name__})"


def tty_alive(fd: int) -> bool:
    """Whether ``fd`` is a terminal that still answers (a hung-up tty gives EIO)."""
    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        return False
    return True


def point_at_devnull(fds: tuple[int, ...] = (1, 2)) -> None:
    """Make ``fds`` write to /dev/null (async-signal-safe calls only; failures ignored)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for fd in fds:
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


class OutputThread(WriterThread):
    """Textual's writer thread, bounded: see the module docstring. ``on_lost(reason)`` is
    called once (from this thread) when a write fails; ``on_flowing()`` when output is taken
    again after writes were dropped."""

    def __init__(self, file: IO[str], on_lost: Callable[[str], None],
                 on_flowing: Callable[[], None]) -> None:
        super().__init__(file)
        self.name = "tplab-output"
        self._queue = queue.Queue(MAX_QUEUED)
        self._on_lost = on_lost
        self._on_flowing = on_flowing
        self.lost = False        # the terminal is gone: nothing is written again
        self.closing = False     # the app is exiting: waits are short
        self.dropped = 0         # writes the terminal did not take in time
        self._dropping = False

    def write(self, text: str) -> None:
        if self.lost:
            return
        try:
            if self._dropping:
                self._queue.put_nowait(text)
                self._dropping = False
                self._on_flowing()
            else:
                self._queue.put(text, timeout=CLOSING_S if self.closing else STALL_S)
        except queue.Full:
            self._dropping = True
            self.dropped += 1

    def run(self) -> None:
        """Write what is queued, coalesced, straight to the file descriptor: a write that never
        returns then holds no lock of ``sys.stderr`` that the interpreter's exit would wait for."""
        file = self._file
        encoding = getattr(file, "encoding", None) or "utf-8"
        errors = getattr(file, "errors", None) or "replace"
        try:
            fd = file.fileno()
        except (OSError, ValueError) as exc:
            self._fail(exc)
            fd = -1
        get, get_nowait = self._queue.get, self._queue.get_nowait
        while True:
            text = get()
            parts: list[str] = []
            while text is not None:
                parts.append(text)
                try:
                    text = get_nowait()
                except queue.Empty:
                    break
            if parts and not self.lost:
                try:
                    data = "".join(parts).encode(encoding, errors)
                    while data:
                        data = data[os.write(fd, data):]
                except (OSError, ValueError) as exc:
                    self._fail(exc)
            if text is None:
                return

    def _fail(self, exc: BaseException) -> None:
        self.lost = True
        self._on_lost(gone_reason(exc))

    def stop(self) -> None:
        """Ask the thread to end and wait for it, briefly: a terminal that takes nothing keeps
        a daemon thread, not the process."""
        try:
            self._queue.put(None, timeout=CLOSING_S)
        except queue.Full:
            return
        self.join(CLOSING_S)


class GuardedDriver(LinuxDriver):
    """LinuxDriver with the writer, the hangup and the SIGCONT handling described above."""

    def __init__(self, app: Any, *, debug: bool = False, mouse: bool = True,
                 size: tuple[int, int] | None = None) -> None:
        self._output: OutputThread | None = None
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        self.lost_reason: str | None = None
        self._was_tty = tty_alive(self.fileno)
        self._resume_on_cont = False

    # -- the writer: LinuxDriver creates, starts and stops what it finds here
    @property
    def _writer_thread(self) -> WriterThread | None:
        return self._output

    @_writer_thread.setter
    def _writer_thread(self, thread: WriterThread | None) -> None:
        if thread is None or isinstance(thread, OutputThread):
            self._output = thread
            return
        file = cast(IO[str], self._file)  # sys.__stderr__, as LinuxDriver's own writer takes it
        self._output = OutputThread(file, self.lose, self._repaint)  # LinuxDriver's unused
        if self.lost_reason is not None:
            self._output.lost = True

    def write(self, data: str) -> None:
        output = self._output
        if output is not None:
            output.write(data)

    @property
    def lost(self) -> bool:
        return self.lost_reason is not None

    def mark_closing(self) -> None:
        """The app is exiting: from now on a write waits at most ``CLOSING_S``."""
        if self._output is not None:
            self._output.closing = True

    def _repaint(self) -> None:
        app = self._app
        app.call_later(app.refresh)

    # -- the terminal going away
    def check_terminal(self, reason: str = TERMINAL_GONE) -> bool:
        """After SIGHUP: whether the terminal is still there; if not it is let go (``lose``,
        with ``reason``)."""
        if self.lost:
            return False
        if self._was_tty and not tty_alive(self.fileno):
            self.lose(reason)
            return False
        return True

    def lose(self, reason: str) -> None:
        """The terminal is gone: stop writing and reading it and tell the app. Safe from any
        thread and from a signal handler; only the first call does anything."""
        if self.lost_reason is not None:
            return
        self.lost_reason = reason
        if self._output is not None:
            self._output.lost = True
        self.exit_event.set()  # the input thread ends (and disable_input has nothing to undo)
        point_at_devnull()
        handler = getattr(self._app, "terminal_lost", None)
        if callable(handler):
            try:
                self._loop.call_soon_threadsafe(handler, reason)
            except RuntimeError:
                pass  # the loop is closed: the app has ended already

    def _run_input_thread(self) -> None:
        try:
            self.run_input_thread()
        except OSError as exc:  # the tty's input failed: it is gone (EIO once its other side closed)
            self.lose(gone_reason(exc))
        except BaseException:
            import rich.traceback

            self._app.call_later(self._app.panic, rich.traceback.Traceback())

    # -- ctrl+z and SIGCONT
    def _sigtstp_application(self, *args: Any) -> None:
        self._resume_on_cont = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        """A SIGCONT that follows a hangup, or one sent by hand, must not start application
        mode again: only the one after our own SIGTSTP stop does."""
        if not self._resume_on_cont or self.lost or not tty_alive(self.fileno):
            return
        self._resume_on_cont = False
        super()._sigcont_application(*args)

    # -- the last resort
    def restore_now(self, line: str = "", timeout_s: float = 0.3) -> None:
        """Put the terminal back as it was and write ``line`` under it, without Textual's
        shutdown, in at most ``timeout_s`` (a terminal that takes nothing keeps a daemon thread,
        not the process). With the terminal gone there is nothing to restore or tell."""
        if self.lost:
            return
        attrs, fd_in = self.attrs_before, self.fileno
        try:
            fd_out = cast(IO[str], self._file).fileno()
        except (OSError, ValueError, AttributeError):
            fd_out = 2
        text = RESET + (line.rstrip("\n") + "\n" if line else "")

        def restore() -> None:
            try:
                if attrs is not None:
                    termios.tcsetattr(fd_in, termios.TCSANOW, attrs)
                os.write(fd_out, text.encode())
            except (termios.error, OSError):
                pass

        worker = threading.Thread(target=restore, name="tplab-restore", daemon=True)
        worker.start()
        worker.join(timeout_s)


def guarded_driver(cls: type[Any]) -> type[Any]:
    """The driver the dashboard runs on: ``GuardedDriver`` where Textual would use its
    LinuxDriver, else ``cls`` unchanged (a driver named in TEXTUAL_DRIVER, Windows)."""
    return GuardedDriver if cls is LinuxDriver else cls

"""A command on a pseudo-terminal the test owns: the terminal a person's dashboard runs in, which
the test can read, type into, stop reading (a frozen terminal) or close (the terminal window
closed: the kernel hangs the tty up and sends the session SIGHUP).

The child is a session leader with the pty as its controlling terminal, as under a terminal
emulator, tmux or sshd. Every wait is bounded; ``close`` kills and reaps whatever is left, so a
test that fails leaves nothing running (the suite's reaper checks too). ``assert_nothing_left``
is what a lab's end must leave: no process of the test's, nothing in TPLAB_HOME that makes the
next lab refuse or warn.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import termios
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: CSI and OSC sequences, and the single-character escapes Textual writes
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()78A-Z]")


class PtyProcess:
    def __init__(self, argv: list[str], env: dict[str, str], *, cols: int = 80,
                 rows: int = 24, cwd: Path = REPO) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        pid = os.fork()
        if pid == 0:  # the child: only system calls until exec
            try:
                os.close(master)
                os.setsid()
                fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(slave, fd)
                if slave > 2:
                    os.close(slave)
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        os.close(slave)
        self.pid = pid
        self.master: int | None = master
        self.returncode: int | None = None
        self._out = bytearray()
        self._lock = threading.Lock()
        self._reading = threading.Event()
        self._reading.set()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, name="pty-reader", daemon=True)
        self._reader.start()

    # -- the terminal's side
    def _read(self) -> None:
        while not self._stop.is_set():
            if not self._reading.wait(0.05):
                continue
            fd = self.master
            if fd is None:
                return
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    with self._lock:
                        self._out += data
            except OSError:  # EIO: every slave fd is closed (the child is gone)
                return

    def text(self) -> str:
        """Everything shown so far, escape sequences removed."""
        with self._lock:
            raw = bytes(self._out)
        return _ESCAPES.sub("", raw.decode("utf-8", "replace"))

    def wait_for_text(self, needle: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.text():
            if time.monotonic() > deadline or self.poll() is not None:
                raise AssertionError(f"{needle!r} never shown within {timeout_s:.0f} s "
                                     f"(exit {self.returncode}); the last of the screen: "
                                     f"{self.text()[-600:]!r}")
            time.sleep(0.05)

    def type(self, keys: str) -> None:
        assert self.master is not None
        os.write(self.master, keys.encode())

    def pending(self) -> int:
        """Bytes the program wrote that the terminal has not read (its output buffer)."""
        if self.master is None:
            return 0
        buf = fcntl.ioctl(self.master, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", buf)[0])

    def freeze(self) -> None:
        """Stop reading: the terminal takes nothing more (a frozen emulator, a stalled link)."""
        self._reading.clear()

    def close_terminal(self) -> None:
        """Close the terminal: the pty's master goes, the kernel hangs the tty up."""
        self._stop.set()
        self._reader.join(2)
        if self.master is not None:
            os.close(self.master)
            self.master = None

    # -- the process
    def send(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout_s: float) -> float:
        """Seconds until the process ended; fails the test (and kills it) past ``timeout_s``."""
        t0 = time.monotonic()
        while self.poll() is None:
            if time.monotonic() - t0 > timeout_s:
                tail = self.text()[-600:]
                self.close()
                raise AssertionError(f"still running {timeout_s:.0f} s later; the last of the "
                                     f"screen: {tail!r}")
            time.sleep(0.02)
        return time.monotonic() - t0

    def close(self) -> None:
        """Kill and reap the process if it is still there, and close the terminal."""
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.returncode = -signal.SIGKILL
        self.close_terminal()


def processes_carrying(marker: str) -> dict[int, str]:
    """pid -> command line of each live process whose environment holds ``marker``
    (NAME=value), this one aside."""
    needle = marker.encode()
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if (d / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if needle in (d / "environ").read_bytes().split(b"\0"):
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found[int(d.name)] = cmd[:160]
        except (OSError, IndexError):
            continue
    return found


def _reap_marker() -> str:
    """The marker every process this test started carries (tests/conftest.py's reaper)."""
    from tests.conftest import REAP_ENV

    return f"{REAP_ENV}={os.environ[REAP_ENV]}"


def assert_nothing_left(but: tuple[int, ...] = ()) -> None:
    """No process this test started is alive (the dashboard, its mock cloud, a pod, torchrun;
    ``but``: pids of a mock cloud the test runs itself), and nothing in TPLAB_HOME makes the
    next lab refuse or warn: no open instance record, no record of a mock cloud, no budget
    held."""
    from tplab.home import mock_clouds
    from tplab.lab import instances
    from tplab.money.budget import BudgetGuard, default_ledger_path

    def left() -> dict[int, str]:
        return {pid: cmd for pid, cmd in processes_carrying(_reap_marker()).items()
                if pid not in but}

    deadline = time.monotonic() + 3.0
    while left() and time.monotonic() < deadline:  # a mock cloud on its way out
        time.sleep(0.1)
    assert left() == {}, "left running"
    assert [r.lab_id for r in instances.open_records(True)] == []
    assert [c.pid for c in mock_clouds.running() if c.pid not in but] == []
    ledger = default_ledger_path(mock=True)
    if ledger.exists():
        assert BudgetGuard(ledger, 100.0).held == 0.0

"""A command whose reader went away (``tplab scaling | head -1``) ends quietly.

Why one place: Python ignores SIGPIPE, so the first write after the reader closed the pipe
raises ``BrokenPipeError``, and the interpreter's own flush at exit raises it again; either
prints a traceback where a shell user expects nothing. Every subcommand ends the same way
instead: stdout pointed at /dev/null (so no later write or flush can fail), nothing said,
exit status 141, the status of a program ended by SIGPIPE (128 + 13), as `yes | head -1`
leaves it. `tplab run` stops its lab first (terminate, verify gone) and ends the same way.
Standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TextIO

#: the exit status of a command whose reader went away: a program ended by SIGPIPE
EXIT_STATUS = 128 + signal.SIGPIPE


def silence(stream: TextIO) -> None:
    """Point a dead stdout/stderr at /dev/null, so nothing (the interpreter's exit flush
    included) prints a BrokenPipeError traceback."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


def stdout_is_gone() -> bool:
    """Whether stdout's reader went away: its pipe reports an error to a poll (a pipe whose
    reading end is closed does), so a BrokenPipeError from another pipe is not taken for it."""
    import select
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def end_quietly() -> int:
    """Silence stdout and give the exit status of a command whose reader went away."""
    silence(sys.stdout)
    return EXIT_STATUS

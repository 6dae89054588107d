"""The profiler's own chatter kept out of the job's log.

Why: torch's profiler (kineto) prints its progress straight to the process's stderr, from C++,
whatever Python's logging says: ``USDT:… profiler_start``, ``profiler_stop``, ``STAGE:…
Completed Stage: Collection`` at every session, and on a CUDA build of torch running on a CPU an
``ERROR:… gpuGetDeviceCount failed`` for the GPU it was never asked to use. A profiled pass opens
a session per mode on every rank, so the job's log (``job.log``, the ``torchrun.log`` of
``tplab local``) filled with lines that say nothing about the lab. ``KINETO_LOG_LEVEL`` cannot
help: the USDT lines are printed at every level below the one that also silences real errors.

So around the profiler's start, stop and export (never around the steps it times) file
descriptor 2 goes to a temporary file; afterwards every line that is not chatter is written back
to stderr, in order: the profiler's warnings and errors, and anything else that was printed
meanwhile, still reach the log.

Pod-side: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

#: kineto's log lines: LEVEL:date time pid:tid File.cpp:line] message
_KINETO = re.compile(rb"^(USDT|STAGE|INFO|VERBOSE|WARNING|ERROR):\d{4}-\d\d-\d\d "
                     rb"\d\d:\d\d:\d\d \d+:\d+ \S+:\d+\] (.*)$")
#: the levels that only say what the profiler is doing
CHATTER_LEVELS = frozenset({b"USDT", b"STAGE", b"INFO", b"VERBOSE"})
#: a CUDA build of torch looking for a GPU: chatter when the run does not use one
_NO_GPU = re.compile(rb"gpuGetDeviceCount failed|cuInit|CUPTI.*(not|could not) "
                     rb"(be )?(init|load)", re.I)
#: the most bytes of other output written back from one quiet block (the rest: one line saying
#: how much was left out)
MAX_KEPT_BYTES = 64 << 10
#: the most bytes read back from one quiet block
MAX_READ_BYTES = 4 << 20


def is_chatter(line: bytes, gpu: bool) -> bool:
    """Whether a stderr line is the profiler speaking of itself (``gpu``: the run uses a GPU, so
    a missing GPU is no chatter but a problem)."""
    m = _KINETO.match(line.rstrip(b"\r\n"))
    if m is None:
        return False
    if m.group(1) in CHATTER_LEVELS:
        return True
    return not gpu and bool(_NO_GPU.search(m.group(2)))


def kept_lines(data: bytes, gpu: bool) -> bytes:
    """What of ``data`` (stderr captured during a quiet block) goes back to stderr."""
    out = b"".join(line for line in data.splitlines(keepends=True) if not is_chatter(line, gpu))
    if len(out) > MAX_KEPT_BYTES:
        left = len(out) - MAX_KEPT_BYTES
        out = out[:MAX_KEPT_BYTES] + f"\n[{left} more bytes of stderr left out]\n".encode()
    return out


@contextlib.contextmanager
def chatter_kept_out(gpu: bool) -> Iterator[None]:
    """Inside: this process's stderr (file descriptor 2, C++ included) goes to a temporary
    file; on the way out what is not chatter is written back. Nothing is lost if the block
    raises."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to take over: nothing to keep out
        yield
        return
    with tempfile.TemporaryFile(prefix="tplab-profiler-log-") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            back = kept_lines(tmp.read(MAX_READ_BYTES), gpu)
            if back:
                with contextlib.suppress(OSError):
                    os.write(2, back)

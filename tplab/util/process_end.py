"""Ending a process that has loaded torch, once its work is written: the exit handlers, the
output flushed, then ``os._exit`` without the interpreter's teardown.

Why one helper: unloading torch at exit costs an interpreter 0.3-0.9 s here (more on a loaded
host), and on the pod every such second is waited for — by torchrun, for its ranks, and by the
lab, for torchrun's exit status before it fetches the run and terminates the pod that bills it.
The job's ranks, the launcher (``tplab.job.torchrun``) and ``generate_tp``'s ranks all end this
way. Standard library only: it travels to the pod with the job.
"""

from __future__ import annotations

import atexit
import os
import sys


def end_now(code: int) -> None:
    """End this process with ``code`` as an ordinary exit would, less the interpreter's
    teardown: the exit handlers, then the output flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can be said
            pass
    os._exit(code)

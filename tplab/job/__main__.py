"""``python -m tplab.job`` — the lab job; launch it under ``torchrun --nproc-per-node=N``."""

from __future__ import annotations

import os
import sys

from .run import main

if __name__ == "__main__":
    code = main()
    # The run is over and written: events closed, results and trace on disk, the transports
    # closed and the process group left. End the process now: the interpreter's own teardown with
    # torch loaded takes 0.3-0.9 s a rank here, and torchrun, and the lab's fetch behind it,
    # would wait for it. (An exception out of ``main`` still ends the usual way, with its
    # traceback.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

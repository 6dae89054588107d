"""``python -m tplab.job.torchrun ARGS``: torchrun (``python -m torch.distributed.run ARGS``), its
process ended the moment torchrun returns.

Why: once the ranks have exited, torchrun's own work is done within a tenth of a second, but its
interpreter then spends half a second or more (more on a loaded host) unloading torch before the
process ends, and the lab waits for that exit status before it fetches the run and terminates
the pod that bills it. Here torchrun runs exactly as ``-m`` runs it (as ``__main__``, with these
arguments); then the exit handlers run and the output is flushed as at any exit, and only the
interpreter's teardown is skipped (``tplab.util.process_end``). The exit status is the one
``python -m`` would give.

Pod-side: the standard library and ``tplab.util`` only (torch is what it runs).
"""

from __future__ import annotations

import runpy
import sys
import traceback

from tplab.util.process_end import end_now


def exit_status(code: object) -> int:
    """The status the interpreter gives ``sys.exit(code)``: None 0, an int itself, anything
    else (a message) printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(module: str = "torch.distributed.run") -> int:
    """Run ``module`` as ``python -m`` does, with this process's arguments; its exit status (an
    exception that escapes it is printed, as the interpreter prints it, and is 1)."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exit_status(exc.code)
    except Exception:  # noqa: BLE001 - what an uncaught exception does at exit: print it, 1
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    end_now(run())

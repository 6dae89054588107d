"""Whether the process a record names is still alive: the one pid-alive check of tplab.

Why one: a ledger authorization, a mock cloud's record and a shared-memory segment's rank line all
carry the pid of the process that wrote them, and each reader must tell "still running" from
"gone" the same way. A zombie (killed, not yet reaped) is gone: it will never release anything.
Standard library only (the shared-memory transport on the pod uses it too).
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a killed, not yet reaped process).
    A process of another user counts as alive (it exists; we may not signal it)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True  # no /proc (macOS): existence is all we can tell
    # "pid (comm) S ...": the state follows the last ')' (comm may contain spaces or parens)
    state = stat[stat.rfind(b")") + 2: stat.rfind(b")") + 3]
    return state not in (b"Z", b"X", b"x")

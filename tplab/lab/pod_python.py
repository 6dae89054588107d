"""``--pod-python``: the interpreter a mock pod (or `tplab local`) runs the pod side with.

Why: a mock pod is a process on this machine and would run the client's own torch, while a real
pod runs its image's (torch 2.4 in the default images). Pointing the mock's pods at a second
interpreter, one with the image's torch, runs the whole lab — upload, torchrun, streaming,
watchdog, teardown — with the pod side on that torch and the client on its own. A real pod always
runs its image's ``python3``, so the option is refused there.

The interpreter is checked before anything starts: it must run, and its torch (read from its
installed metadata, without importing torch) must be one the job supports.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tplab.records.torch_support import SUPPORTED_TORCH, unsupported_torch

#: prints the interpreter's installed torch version, or nothing (no torch is imported)
_VERSION_PROBE = ("import importlib.metadata as m\n"
                  "try:\n    print(m.version('torch'))\n"
                  "except m.PackageNotFoundError:\n    pass\n")


def torch_version_of(python: str, timeout_s: float = 60.0) -> str | None:
    """The torch version installed for interpreter ``python``; None when it has none."""
    done = subprocess.run([python, "-I", "-c", _VERSION_PROBE], capture_output=True, text=True,
                          timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise OSError(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                      else f"exit {done.returncode}")
    return done.stdout.strip() or None


def pod_python_problem(python: str | None, mock: bool) -> str | None:
    """Why ``python`` cannot be the pod's interpreter, in one sentence; None when it can (or no
    ``--pod-python`` was given)."""
    if python is None:
        return None
    if not mock:
        return ("--pod-python is for the mock lab and `tplab local`: a real pod runs its image's "
                "python3; drop --pod-python (or choose the image with --image).")
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        return f"--pod-python {python} is not an executable file; name a Python interpreter."
    try:
        version = torch_version_of(python)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--pod-python {python} did not run ({exc}); name a working Python interpreter."
    if version is None:
        return (f"--pod-python {python} has no torch installed; install a torch "
                f"{SUPPORTED_TORCH} into it, e.g. `{python} -m pip install torch==2.4.0`.")
    bad = unsupported_torch(version)
    return f"--pod-python {python}: {bad}" if bad else None


def pod_bindir(python: str) -> str:
    """The folder a mock pod's ``PATH`` starts with, so its ``python3`` is ``python`` (a
    virtual environment's interpreter is kept as named: its link must not be resolved)."""
    return os.path.dirname(os.path.abspath(python))

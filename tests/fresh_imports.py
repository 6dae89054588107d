"""Which packages does importing some modules load, in a fresh interpreter?

Why one helper: several rooms promise "importing me does not load X" (the client never imports
torch at module import time, the watchdog runs on the pod's bare Python, `tplab check` starts
without the SDK). Each such test is the same subprocess: import the modules, list which watched
top-level packages ended up in ``sys.modules``. A bound on the subprocess keeps a test from
hanging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]


def packages_loaded_by(modules: Sequence[str], watched: Sequence[str],
                       timeout_s: float = 120.0) -> list[str]:
    """The packages of ``watched`` (top-level names) that importing ``modules`` loads, each
    listed once, in a fresh interpreter run from the repository (its own submodules count)."""
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}:\n"
            "    importlib.import_module(m)\n"
            "tops = {m.split('.')[0] for m in sys.modules}\n"
            f"print(json.dumps(sorted(w for w in {list(watched)!r} if w in tops)))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])

"""The pod's boot guard as it travels in the provider's create call: a zip Python runs, where it
goes on the pod, and the POSIX sh line that starts it in the background.

Why on the client side: packing what travels to the pod is the client's job (like
``tplab.lab.bundle``); the guard's code (``tplab.job.boot_guard`` with ``tplab.job.self_terminate``
and the self-termination word's format, ``tplab.records.self_end_word``) is read here as files, by
path, never imported: the client does not import the pod's job package. Each provider puts the
three strings in its own create field (RunPod: the container command, before it hands over to the
image's start script; Vast: ``onstart``).
"""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path

#: where the create's command unpacks the guard on the pod (per pod: the mock's pods share a
#: machine, and $HOME is each pod's own)
GUARD_DIR = "$HOME/.tplab-guard"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # tplab/
#: the pod-side files the guard runs from, with nothing else of tplab on the pod
GUARD_FILES = ("job/boot_guard.py", "job/self_terminate.py", "records/self_end_word.py")


def pack() -> bytes:
    """The guard and its terminator as a zip Python runs (``python3 guard.zip ...``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("tplab", "tplab/job", "tplab/records"):
            zf.writestr(f"{package}/__init__.py", "")
        for name in GUARD_FILES:
            zf.write(PACKAGE_ROOT / name, f"tplab/{name}")
        zf.writestr("__main__.py", "import sys\nfrom tplab.job.boot_guard import main\n"
                                   "sys.exit(main())\n")
    return buf.getvalue()


def boot_step(first_heartbeat_s: float, wall_cap_s: float, stale_after_s: float,
              self_end_arg: str) -> tuple[str, str, str]:
    """Where the guard's zip goes on the pod, the zip (base64) and the sh line that starts it."""
    path = f"{GUARD_DIR}/guard.zip"
    d = f'"{GUARD_DIR}"'
    command = (f"(setsid nohup python3 {d}/guard.zip "
               f"--first-heartbeat {first_heartbeat_s:g} --wall-cap {wall_cap_s:g} "
               f"--stale-after {stale_after_s:g} --self-end {self_end_arg} "
               f">> {d}/guard.out 2>&1 < /dev/null &)")
    return path, base64.b64encode(pack()).decode(), command

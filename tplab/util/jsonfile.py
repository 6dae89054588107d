"""The one atomic JSON writer: results.json, the manifest, instance records, mock cloud records.

Why one: a reader (the dashboard's Labs screen, `tplab status`, a second terminal, the pod's
client fetching results) must never see half a file, and a crash mid-write must never leave a
torn one. A temp file in the same folder (mode 0600: some of these carry keys) is written,
optionally fsync'd, then renamed over the target; on any failure the temp file is removed.
Standard library only: the job on the pod writes results.json with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2,
               sort_keys: bool = False, allow_nan: bool = False, fsync: bool = False) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (temp file + rename); returns the path.
    ``allow_nan=False`` refuses NaN/Infinity (ValueError) rather than write what is not JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=indent, sort_keys=sort_keys, allow_nan=allow_nan)
            if indent is not None:
                fh.write("\n")
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path

"""Instance records (instance.json): what tplab created (or was about to create), kept across crashes.

Why: a client killed mid-lab (SIGKILL, power loss) cannot terminate its pod; the pod's watchdog
will, but the next tplab must also be able to *find* it. So the intent is written before the
create call and updated with the pod id the moment it is known; ``tplab status`` and the next
lab read these records beside the provider's own list. No secrets are ever written here.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

from tplab.home.paths import tplab_home
from tplab.util.jsonfile import write_json

#: states a record moves through
INTENT, CREATED, GONE, NOT_CREATED = "intent", "created", "gone", "not-created"


@dataclass
class InstanceRecord:
    lab_id: str
    label: str
    pod_name: str
    provider: str
    gpu_type: str
    gpu_count: int
    spot: bool
    usd_per_hr: float | None
    state: str = INTENT
    pod_id: str | None = None
    intent_at: float = field(default_factory=time.time)
    created_at: float | None = None
    ended_at: float | None = None
    pid: int = field(default_factory=os.getpid)
    host: str | None = field(default_factory=socket.gethostname)  # where ``pid`` runs
    out_dir: str | None = None
    mock: bool = False
    ssh_host: str | None = None
    ssh_port: int | None = None
    auth_id: str | None = None          # the ledger authorization that holds this lab's money
    image: str | None = None            # the pod's container image
    settled: bool = False               # the hold was settled (spend recorded or released)
    note: str = ""
    ended_by: str = ""                  # who sent the terminate from outside the lab, if anyone
    #: its lab has ended without the provider showing the pod gone: the hold waits for that
    #: proof, and whoever proves it gone settles it (the lab's process may still run: a
    #: dashboard that goes on to its next lab)
    lab_ended: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InstanceRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def open(self) -> bool:
        return self.state in (INTENT, CREATED)


def store_dir(mock: bool) -> Path:
    d = tplab_home(mock) / "instances"
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(record: InstanceRecord, copies: Sequence[Path] = ()) -> Path:
    """Write the record to the store (and to each extra path, e.g. the lab's out dir)."""
    path = store_dir(record.mock) / f"{record.lab_id}.json"
    data = record.to_dict()
    write_json(path, data, sort_keys=True, allow_nan=True, fsync=True)
    for extra in copies:
        write_json(Path(extra), data, sort_keys=True, allow_nan=True, fsync=True)
    return path


def load_all(mock: bool) -> list[InstanceRecord]:
    """Every record in the store; an unreadable file is skipped with its name kept in ``note``."""
    out = []
    for path in sorted(store_dir(mock).glob("*.json")):
        try:
            out.append(InstanceRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError) as exc:
            out.append(InstanceRecord(lab_id=path.stem, label="?", pod_name="?", provider="?",
                                      gpu_type="?", gpu_count=0, spot=False, usd_per_hr=None,
                                      state=INTENT, note=f"unreadable record {path}: {exc}"))
    return out


def open_records(mock: bool) -> list[InstanceRecord]:
    return [r for r in load_all(mock) if r.open]


def mark_ended_by(pod_id: str, who: str, mock: bool) -> list[InstanceRecord]:
    """Say on every open record of ``pod_id`` who is terminating it, before the terminate is
    sent (a lab still running reads it there when it sees its pod go: its user stopped it, not
    a spot interruption). Returns the records marked."""
    marked = []
    for rec in load_all(mock):
        if rec.pod_id == pod_id and rec.open and not rec.ended_by:
            rec.ended_by = who
            save(rec)
            marked.append(rec)
    return marked


def ended_by(lab_id: str, mock: bool) -> str:
    """Who terminated lab ``lab_id``'s pod from outside it ("" when nobody did, or unknown)."""
    path = store_dir(mock) / f"{lab_id}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    who = data.get("ended_by") if isinstance(data, dict) else None
    return who if isinstance(who, str) else ""


def mark(pod_id: str, state: str, mock: bool) -> None:
    """Set the state of every stored record for ``pod_id`` (e.g. after `tplab terminate`)."""
    for rec in load_all(mock):
        if rec.pod_id == pod_id and rec.state != state:
            rec.state = state
            rec.ended_at = rec.ended_at or time.time()
            save(rec)

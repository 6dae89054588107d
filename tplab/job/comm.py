"""Which transport carries the job's TP collectives: ``--comm gloo|shm|both``.

Why apart from run.py: the job decodes and sweeps once per transport it was asked for, and this
module is the one place that knows what a choice means, sets the shm transport up (a collective
over the gloo group, ``tplab.tp.shm.ShmComm.create``) and switches the TP collectives between
transports (``tplab.tp.use_transport``), so the job's sequence stays a loop over names.

    gloo  the process group's own backend (gloo on the CPU; on GPUs this is nccl)
    shm   the shared-memory transport for ranks on one host (CPU only)
    both  shm carries the run's figures, and the TP pass and the sweep are repeated over gloo
          alongside, prompt by prompt in the same run, so the two are compared side by side

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tplab.records.job_flags import COMM_CHOICES
from tplab.tp import ShmComm, ShmError, use_transport

from .runtime import JobError, Runtime

CHOICES = COMM_CHOICES


def transports_for(choice: str) -> list[str]:
    """The transports a ``--comm`` choice decodes with, the one carrying the figures first."""
    if choice == "gloo":
        return ["gloo"]
    if choice == "shm":
        return ["shm"]
    if choice == "both":
        return ["shm", "gloo"]
    raise JobError(f"--comm must be one of {', '.join(CHOICES)}, not {choice!r}.")


@dataclass
class Transports:
    """The transports of one run: ``names[0]`` carries the figures; ``shm`` is set up if named."""

    names: list[str]
    backend: str
    shm: ShmComm | None = None
    _labels: dict[str, str] = field(default_factory=dict)

    @property
    def primary(self) -> str:
        return self.names[0]

    def label(self, name: str) -> str:
        """The transport's name in results: "shm", or the process group's backend."""
        return "shm" if name == "shm" else self.backend

    @contextmanager
    def use(self, name: str) -> Iterator[None]:
        """The TP collectives go over ``name`` inside the block."""
        with use_transport(self.shm if name == "shm" else None):
            yield

    def env(self) -> dict[str, Any]:
        """What results.json records about the transports."""
        out: dict[str, Any] = {"transports": [self.label(n) for n in self.names],
                               "carried_figures": self.label(self.primary)}
        if self.shm is not None:
            out["shm"] = {"segment": self.shm.name, "dir": str(self.shm.segment.path.parent),
                          "slot_bytes": self.shm.slot_bytes, "ranks": self.shm.world_size,
                          "unlinked_after_setup": True, "timeout_s": self.shm.timeout_s}
        return out

    def note(self) -> str:
        """How the collectives were carried, for results.json's ``timing``."""
        labels = [self.label(n) for n in self.names]
        note = f"the TP collectives went over {labels[0]}"
        if labels[0] == "shm":
            note += (" (tplab.tp.shm: fp32 sum and all-gather through a shared-memory segment; "
                     "the gloo process group only for setup, barriers and other dtypes)")
        if len(labels) > 1:
            note += (f"; the top-level TP figures and sweep are {labels[0]}'s, and the same TP "
                     f"passes and sweep ran over {', '.join(labels[1:])} in the same run (under "
                     "'transports'), the transport going first alternating prompt by prompt")
        return note

    def close(self) -> None:
        if self.shm is not None:
            self.shm.close()


def setup(choice: str, rt: Runtime, timeout_s: float) -> Transports:
    """The transports for ``--comm choice``; a collective when shm is among them."""
    names = transports_for(choice)
    if "shm" in names and rt.is_cuda:
        raise JobError(f"--comm {choice} carries CPU collectives through shared memory, but this "
                       "run uses nccl on GPUs; drop --comm or pass --device cpu.")
    t = Transports(names=names, backend=rt.backend)
    if "shm" in names:
        try:
            t.shm = ShmComm.create(timeout_s=timeout_s)
        except ShmError as exc:
            raise JobError(str(exc)) from None
    return t


def rotated(names: list[str], i: int) -> list[str]:
    """``names`` starting at position ``i``: which transport goes first alternates per prompt."""
    k = i % len(names)
    return names[k:] + names[:k]

"""What a lab will say at its end: how it ended, the job's results (or the figures streamed before
it stopped), the files in its folder and how the stream travelled.

Why an owner: the lab's outcome has rules of its own — a lab whose pod is not proven gone has
failed at best, whatever its job did; a results.json that is not a JSON object is no result; a
lab stopped before its results keeps the figures its stream carried — and each was a field that
several stages wrote. Here the stages say what happened (``end``, ``not_proven_gone``,
``take_results``, ``took_events``) and the closing artifacts read what it comes to. What the
report says about the figures themselves (the manifest, the proof picture, the lesson notes) is
the report modules' (``artifacts``, ``manifest``, ``lesson_notes``, ``proof_png``); they read
this object.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from tplab.lab.lab_config import COMPLETE, FAILED
from tplab.records.events import Event
from tplab.viewmodel.tokens import TokenFold


@dataclass
class TransportCounts:
    """The event stream from the pod: how much came, how often SSH dropped, what the tail
    dropped as repeated and the gaps it saw."""
    job_events: int = 0
    ssh_drops: int = 0
    duplicates: int = 0
    gaps: int = 0


class LabReport:
    """One lab's outcome, results and files (see the module docstring)."""

    def __init__(self, lab_id: str, out_dir: Path) -> None:
        self.lab_id = lab_id
        self.out_dir = out_dir
        self.status = FAILED
        self.reason = "the lab did not finish"
        #: the job's results.json, once fetched (a JSON object)
        self.results: dict[str, Any] | None = None
        #: the live stream's figures, for a lab that ends without results.json
        self.partial = TokenFold()
        #: file name -> path of every artifact in the out dir
        self.artifacts: dict[str, str] = {}
        self.transport = TransportCounts()

    # ---- how it ended ------------------------------------------------------------------
    def end(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason

    def not_proven_gone(self, sentence: str) -> None:
        """The pod's end could not be proven: a completed lab has failed after all, any other
        keeps its status and its reason gains the sentence."""
        if self.status == COMPLETE:
            self.end(FAILED, f"the lab completed, but {sentence}")
        else:
            self.reason = f"{self.reason.rstrip('. ')}; {sentence}"

    # ---- the job's figures -------------------------------------------------------------
    def took_events(self, batch: Sequence[Event]) -> None:
        """A batch of the job's events arrived: counted, and folded into the partial figures."""
        self.transport.job_events += len(batch)
        self.partial.add(batch)

    def take_results(self, results: dict[str, Any]) -> None:
        self.results = results

    def partial_figures(self) -> dict[str, Any] | None:
        """The streamed figures of a lab without results (None when it has results, or
        measured nothing)."""
        if self.results or not self.partial.measured:
            return None
        return self.partial.partial_figures()

    # ---- the transport -----------------------------------------------------------------
    def ssh_dropped(self) -> int:
        self.transport.ssh_drops += 1
        return self.transport.ssh_drops

    def tail_counts(self, duplicates: int, gaps: int) -> None:
        self.transport.duplicates, self.transport.gaps = duplicates, gaps

    # ---- the lab's folder --------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.out_dir / name

    def add_artifact(self, name: str) -> Path:
        path = self.path(name)
        self.artifacts[name] = str(path)
        return path

    def has(self, name: str) -> bool:
        return name in self.artifacts

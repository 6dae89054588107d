"""What a lab has learned so far, as plain records: its pod, its money, its transport, its results.

Why records and not the ``Lab``: the phases, the teardown and the closing artifacts each read
and fill in part of these facts; handing them this record (never the orchestrator) keeps every
lower layer free of the ``Lab`` class. The money is one typed record (``tplab.money.lab_money``)
under the manifest's names; ``summary()`` flattens the facts for the final table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.cloud.base import GoneProof, PodInfo
from tplab.cloud.image_fit import ImageChoice
from tplab.lab.lab_config import FAILED
from tplab.lab.instances import InstanceRecord
from tplab.money.lab_money import LabMoney
from tplab.viewmodel.tokens import TokenFold


@dataclass
class PodFacts:
    """The lab's pod: its id the moment the provider answers, its price, its life, its end."""
    id: str | None = None
    info: PodInfo | None = None
    usd_per_hr: float | None = None
    created_at: float | None = None     # epoch s, when the create call answered
    gone_at: float | None = None        # epoch s, when verify ended
    record: InstanceRecord | None = None
    proof: GoneProof | None = None
    verified_gone: bool = False
    #: an ambiguous create whose pod list could not be read: whether a pod exists is unknown
    creation_unknown: bool = False
    #: the image the pod gets and why (preflight's choice)
    image: ImageChoice | None = None


@dataclass
class TransportFacts:
    """The event stream from the pod: how much came, how often SSH dropped."""
    job_events: int = 0
    ssh_drops: int = 0
    duplicates: int = 0
    gaps: int = 0


@dataclass
class LabFacts:
    lab_id: str
    out_dir: Path
    status: str = FAILED
    reason: str = "the lab did not finish"
    pod: PodFacts = field(default_factory=PodFacts)
    money: LabMoney = field(default_factory=LabMoney)
    transport: TransportFacts = field(default_factory=TransportFacts)
    results: dict[str, Any] | None = None
    #: the live stream's figures, for a lab that ends without results.json
    partial: TokenFold = field(default_factory=TokenFold)
    #: file name -> path of every artifact in the out dir
    artifacts: dict[str, str] = field(default_factory=dict)

    def add_artifact(self, name: str) -> Path:
        path = self.out_dir / name
        self.artifacts[name] = str(path)
        return path

    def summary(self) -> dict[str, Any]:
        """Figures for the final table (the manifest reads the typed facts themselves)."""
        return {
            "lab_id": self.lab_id, "status": self.status, "reason": self.reason,
            "pod_id": self.pod.id, "verified_gone": self.pod.verified_gone,
            "usd_per_hr": self.pod.usd_per_hr, **self.money.manifest_fields(),
            "start_ts": self.pod.created_at, "end_ts": self.pod.gone_at,
            "job_events": self.transport.job_events, "ssh_drops": self.transport.ssh_drops,
            "duplicates": self.transport.duplicates, "gaps": self.transport.gaps,
            "results": self.results, "artifacts": dict(self.artifacts),
            "partial": None if self.results or not self.partial.measured
            else self.partial.partial_figures(),
        }

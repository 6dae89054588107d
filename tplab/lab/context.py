"""What every phase of a lab works with: its config, its provider, its stream and its facts.

Why a record of its own: the phases (``preflight``, ``provision``, ``ssh_session``, ``cost``,
``teardown``) are functions of these four things plus one way to ask the lab to stop; passing
them together keeps each phase's signature short without handing any of them the ``Lab``.
The two events every phase may need to say (the pod's state, the budget's figures) live here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tplab.cloud.base import PodInfo, Provider
from tplab.lab import instances
from tplab.lab.lab_config import LabConfig
from tplab.lab.facts import LabFacts
from tplab.lab.stream import LabStream


def _never(reason: str) -> None:  # a context built outside a running lab has nobody to ask
    return None


@dataclass
class LabContext:
    config: LabConfig
    provider: Provider | None
    stream: LabStream
    facts: LabFacts
    #: ask the lab to stop now (terminate + verify gone); idempotent
    request_stop: Callable[[str], None] = _never
    #: the same, when the provider took the spot instance back: the lab ends INTERRUPTED
    interrupted: Callable[[str], None] = _never
    #: the same, when the user ended the pod from outside the lab (`tplab terminate` in
    #: another shell): the lab ends STOPPED, as any stop of theirs
    stopped_by_user: Callable[[str], None] = _never

    def ended_from_outside(self, state: str) -> str | None:
        """When the pod went ``state`` because someone terminated it from outside this lab
        (its instance record names who, written before the terminate was sent): the reason
        to give, else None."""
        record = self.facts.pod.record
        if record is None:
            return None
        who = instances.ended_by(record.lab_id, self.config.mock)
        if not who:
            return None
        record.ended_by = who
        return f"the pod {self.facts.pod.id} went {state}: terminated by {who} from outside the lab"

    @property
    def cloud(self) -> Provider:
        """The provider, for the phases that run only once the lab has one (``run()`` sets it
        before the first phase)."""
        if self.provider is None:
            raise RuntimeError("the lab has no provider yet: it is set when the lab runs")
        return self.provider

    @property
    def provider_name(self) -> str:
        return getattr(self.provider, "name", "?")

    def provider_label(self) -> str:
        """What the user calls the provider ("Vast.ai"), else its registry name."""
        return getattr(self.provider, "label", None) or self.provider_name

    def instance_event(self, info: PodInfo | None = None, state: str | None = None) -> None:
        """The pod as the dashboard shows it (state, price, SSH endpoint, uptime)."""
        pod = self.facts.pod
        info = info or pod.info
        ssh = info.ssh if info else None
        cfg = self.config
        self.stream.emit("instance", state=state or (info.state if info else "UNKNOWN"),
                         pod_id=pod.id, provider=self.provider_name, gpu_type=cfg.gpu_type,
                         gpu_count=cfg.gpus, spot=cfg.spot, usd_per_hr=pod.usd_per_hr,
                         ssh_host=ssh.host if ssh else None, ssh_port=ssh.port if ssh else None,
                         uptime_s=info.uptime_s if info else None)

    def budget_event(self, summary: Any = None) -> None:
        """The ledger's figures (cap, spent, held, remaining), how many of its lines are
        damaged (left out of them), and this lab's authorization.
        ``summary``: ``guard.summary()`` read beforehand (in a worker thread: it reads the
        ledger file), so the event itself is emitted on the lab's loop."""
        guard = self.facts.money.guard
        if guard is None:
            return
        s = summary if summary is not None else guard.summary()
        money = self.facts.money
        held_for = ({"held_for": f"pod {money.held_for_pod} not yet proven gone"}
                    if money.held_for_pod else {})
        self.stream.emit("budget", cap_usd=s.cap_usd, spent_usd=s.spent_usd, held_usd=s.held_usd,
                         remaining_usd=s.remaining_usd, damaged_lines=len(s.damaged),
                         authorized_usd=money.authorized_usd,
                         label=self.config.ledger_label(), **held_for)

    def save_record(self) -> bool:
        """Write the instance record to the store and to the out dir's instance.json, with the
        lab's authorization id (so `tplab terminate` can settle a crashed lab's hold). A failed
        write (a full disk) is a warning and False: the caller decides whether that stops it."""
        record = self.facts.pod.record
        if record is None:
            return True
        record.auth_id = record.auth_id or self.facts.money.auth_id
        try:
            instances.save(record, [self.facts.out_dir / "instance.json"])
        except (OSError, ValueError) as exc:
            self.stream.warn(f"the instance record could not be written ({exc})")
            return False
        self.facts.add_artifact("instance.json")
        return True

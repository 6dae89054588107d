"""The lab's pod and its end: from the intent written before the create to the provider's proof
that it is gone.

Why an owner: "no pod outlives its lab" is a handful of rules about one thing — the intent record
is written before the create call and gets the pod id the moment the provider answers; the
create runs as a future that the teardown can still await, so a stop during create still learns
the pod and ends it; every way out terminates and asks the provider until it shows the pod gone
(``tplab.lab.ending``), and only that answer makes it gone; the record stays open, for the next
start to find, until it is. Each rule was written where a stage happened to need it; here the
stages ask the pod (``create``, ``adopt``, ``seen``, ``end``) and the pod keeps its record, its
events and its proof. Which lab outcome a pod's fate means is the stages' (``provision``,
``teardown``); what the hold does meanwhile is the money's (``tplab.money.lab_money``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Callable

from tplab.cloud.base import POD_NAME_PREFIX, BootStep, GoneProof, PodInfo, PodSpec, Provider
from tplab.cloud.image_fit import ImageChoice
from tplab.cloud.registry import gone_routes
from tplab.keys.redact import one_line
from tplab.lab import instances
from tplab.lab.ending import cloud_words, end_pod_within, iso
from tplab.lab.guard_payload import boot_step
from tplab.lab.lab_config import LabConfig
from tplab.lab.report import LabReport
from tplab.lab.stream import LabStream
from tplab.records.self_end_word import encode

#: the provider's own answer for the pod after terminate
PROOF = "proof-terminated.json"


class LabPod:
    """One lab's pod (see the module docstring). Built by the ``Lab`` before it has a cloud;
    ``use`` gives it the provider it will be rented from."""

    def __init__(self, lab_id: str, config: LabConfig, stream: LabStream,
                 report: LabReport) -> None:
        self.lab_id = lab_id
        self.config = config
        self.stream = stream
        self.report = report
        self.provider: Provider | None = None
        #: the pod's id the moment the provider answers, its last known state, its price
        self.id: str | None = None
        self.info: PodInfo | None = None
        self.usd_per_hr: float | None = None
        #: the image the pod gets and why (the pre-flight's choice)
        self.image: ImageChoice | None = None
        self.created_at: float | None = None     # epoch s, when the create call answered
        self.gone_at: float | None = None        # epoch s, when the end proved it gone
        self.record: instances.InstanceRecord | None = None
        self.proof: GoneProof | None = None
        self.verified_gone = False
        #: an ambiguous create whose pod list could not be read: whether a pod exists is unknown
        self.creation_unknown = False
        self._creating: asyncio.Future[PodInfo] | None = None

    # ---- its cloud -----------------------------------------------------------------------
    def use(self, provider: Provider) -> None:
        self.provider = provider

    @property
    def cloud(self) -> Provider:
        """The provider, for what runs only once the lab has one."""
        if self.provider is None:
            raise RuntimeError("the lab has no provider yet: it is set when the lab runs")
        return self.provider

    @property
    def provider_name(self) -> str:
        return getattr(self.provider, "name", "?")

    def provider_label(self) -> str:
        """What the user calls the provider ("Vast.ai"), else its registry name."""
        return getattr(self.provider, "label", None) or self.provider_name

    def self_end_arg(self) -> str:
        """How the pod ends itself (its provider's description, one shell-safe word)."""
        return encode(self.cloud.self_end())

    # ---- before the create ---------------------------------------------------------------
    def take_image(self, choice: ImageChoice) -> None:
        self.image = choice

    def take_price(self, usd_per_hr: float) -> None:
        self.usd_per_hr = usd_per_hr

    @property
    def image_name(self) -> str:
        return self.image.image if self.image else ""

    @property
    def name(self) -> str:
        return f"{POD_NAME_PREFIX}{self.lab_id}"

    def write_intent(self, auth_id: str | None) -> bool:
        """The instance record, written before the create call (a crash mid-call still leaves
        a trace the next start finds), with the ledger authorization that holds the lab's money
        (so `tplab terminate` can settle a crashed lab's hold); False when it could not be
        written."""
        cfg = self.config
        self.record = instances.InstanceRecord(
            lab_id=self.lab_id, label=cfg.ledger_label(), pod_name=self.name,
            provider=self.provider_name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
            spot=cfg.spot, usd_per_hr=self.usd_per_hr, out_dir=str(self.report.out_dir),
            mock=cfg.mock, image=self.image.image if self.image else None, auth_id=auth_id)
        return self.save_record()

    def spec(self, public_key: str) -> PodSpec:
        """What the create call asks for: this pod's name, GPUs, key, bid, image, boot guard."""
        cfg, price = self.config, self.usd_per_hr
        return PodSpec(name=self.name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
                       public_key=public_key, spot=cfg.spot,
                       bid_usd_per_gpu_hr=(price / cfg.gpus) if (cfg.spot and price) else None,
                       image=self.image_name, boot=self._boot_step())

    def _boot_step(self) -> BootStep | None:
        """The pod's boot guard, started with its container by the provider's create
        (``tplab.job.boot_guard``, packed by ``tplab.lab.guard_payload``); None without one."""
        cfg = self.config
        if not cfg.boot_guard:
            return None
        path, payload, command = boot_step(cfg.guard_bound_s(), cfg.wall_cap_s,
                                           cfg.heartbeat_timeout_s, self.self_end_arg())
        return BootStep(path=path, payload_b64=payload, command=command)

    # ---- the create ----------------------------------------------------------------------
    async def create(self, spec: PodSpec) -> PodInfo:
        """The provider's create, as a future the teardown can still await (``find_created``);
        the pod it answers with is adopted. A long create's notes (an offer tried again) are
        logged."""
        cloud = self.cloud
        if hasattr(cloud, "on_note"):
            loop = asyncio.get_running_loop()
            cloud.on_note = lambda note: loop.call_soon_threadsafe(self.stream.log, note,
                                                                   "warning")
        self._creating = asyncio.ensure_future(asyncio.to_thread(cloud.create, spec))
        info = await asyncio.shield(self._creating)
        self.adopt(info)
        return info

    def adopt(self, info: PodInfo) -> None:
        """The provider answered with a pod: it is this lab's from now on (record, event)."""
        self.info = info
        self.id = info.id
        self.created_at = time.time()
        if info.usd_per_hr:
            self.usd_per_hr = float(info.usd_per_hr)
        if self.record is not None:
            self.record.pod_id = info.id
            self.record.state = instances.CREATED
            self.record.created_at = self.created_at
            self.save_record()
        self.instance_event(info)

    def unknown_whether_created(self) -> None:
        """An ambiguous create whose pod list could not be read."""
        self.creation_unknown = True

    async def find_created(self) -> None:
        """A stop during create: wait for the call's answer; a failed create may still have
        made a pod, so look for it by name."""
        if self._creating is not None and self.id is None:
            with contextlib.suppress(Exception):
                self.adopt(await self._creating)
        if self.id is None and self.record is not None and self.provider is not None:
            with contextlib.suppress(Exception):
                for info in await asyncio.to_thread(self.provider.list_pods):
                    if info.name == self.record.pod_name:
                        self.adopt(info)

    # ---- while it lives ------------------------------------------------------------------
    def seen(self, info: PodInfo) -> None:
        """The provider's latest answer about the pod: kept, and shown."""
        self.info = info
        self.instance_event(info)

    def reachable(self, info: PodInfo) -> None:
        """The pod runs with an SSH endpoint: kept, and written into its record."""
        self.info = info
        if self.record is not None and info.ssh is not None:
            self.record.ssh_host, self.record.ssh_port = info.ssh.host, info.ssh.port
            self.save_record()

    def wall_cap_left(self) -> float:
        """The wall cap less the seconds since the pod was created (this client's clock)."""
        spent = (time.time() - self.created_at) if self.created_at else 0.0
        return max(1.0, self.config.wall_cap_s - spent)

    def ended_from_outside(self, state: str) -> str | None:
        """When the pod went ``state`` because someone terminated it from outside this lab
        (its instance record names who, written before the terminate was sent): the reason
        to give, else None."""
        record = self.record
        if record is None:
            return None
        who = instances.ended_by(record.lab_id, self.config.mock)
        if not who:
            return None
        record.ended_by = who
        return f"the pod {self.id} went {state}: terminated by {who} from outside the lab"

    def instance_event(self, info: PodInfo | None = None, state: str | None = None) -> None:
        """The pod as the dashboard shows it (state, price, SSH endpoint, uptime)."""
        info = info or self.info
        ssh = info.ssh if info else None
        cfg = self.config
        self.stream.emit("instance", state=state or (info.state if info else "UNKNOWN"),
                         pod_id=self.id, provider=self.provider_name, gpu_type=cfg.gpu_type,
                         gpu_count=cfg.gpus, spot=cfg.spot, usd_per_hr=self.usd_per_hr,
                         ssh_host=ssh.host if ssh else None, ssh_port=ssh.port if ssh else None,
                         uptime_s=info.uptime_s if info else None)

    # ---- its record ----------------------------------------------------------------------
    def save_record(self) -> bool:
        """Write the instance record to the store and to the out dir's instance.json. A failed
        write (a full disk) is a warning and False: the caller decides whether that stops it."""
        record = self.record
        if record is None:
            return True
        try:
            instances.save(record, [self.report.path("instance.json")])
        except (OSError, ValueError) as exc:
            self.stream.warn(f"the instance record could not be written ({exc})")
            return False
        self.report.add_artifact("instance.json")
        return True

    def never_created(self) -> None:
        """No pod was made: the record says so (or, when that is unknown, stays INTENT: the
        next start looks for the pod by name)."""
        if self.record is None:
            return
        if self.creation_unknown:
            self.record.note = ("creation unknown: the create failed ambiguously and the pod "
                                "list could not be read")
        else:
            self.record.state = instances.NOT_CREATED
            self.record.ended_at = time.time()
        self.save_record()

    def hold_settled(self) -> None:
        """Its lab's hold is settled (so `tplab terminate` does not settle it again)."""
        if self.record is not None:
            self.record.settled = True
            self.save_record()

    def left_running(self) -> str:
        """Detached: the record stays open, saying so; the command that ends the pod."""
        if self.record is not None:
            self.record.note = one_line(f"detached at {iso(time.time())}: left running on "
                                        "request; its watchdog still guards it")
            self.save_record()
        return self.config.terminate_command(self.id)

    # ---- its end -------------------------------------------------------------------------
    async def end(self) -> str | None:
        """End the pod within the lab's bound (``tplab.lab.ending``: a line every few seconds
        while it lasts), then the proof and the record. None once the provider shows it gone;
        else the sentence that says what is known, with the command that tries again (warned
        here), and the record stays open (the next start, `tplab status` and `tplab terminate`
        find it) with its lab marked ended."""
        pod_id, stream, cloud = self.id, self.stream, self.cloud
        assert pod_id is not None
        stream.stage("terminate", pod_id=pod_id)
        report = await end_pod_within(
            cloud, pod_id, self.config.end_bound_s,
            say=lambda line: stream.log(line, headline=True),
            on_accepted=lambda: stream.stage("verify", pod_id=pod_id))
        if not stream.began("verify"):  # no end call was accepted: still, the look is the proof
            stream.stage("verify", pod_id=pod_id)
        self.proof = report.proof
        self.verified_gone = report.gone
        if self.verified_gone:
            self.gone_at = time.time()
        self._reported(PROOF, self.write_proof)
        if self.verified_gone:
            self.instance_event(None, state="GONE")
            if self.record is not None:
                self.record.state = instances.GONE
                self.record.ended_at = self.gone_at
                self.save_record()
            return None
        noun, verb = cloud_words(cloud)
        sentence = report.sentence(self.config.terminate_command(pod_id), noun, verb)
        stream.warn(sentence)
        if self.record is not None:
            self.record.lab_ended = True
            self.record.note = one_line(sentence)
            self.save_record()
        return sentence

    def _reported(self, what: str, write: Callable[[], object]) -> None:
        """A write of the end; a failure (a full disk) is a warning, never an abort."""
        try:
            write()
        except (OSError, ValueError) as exc:
            self.stream.warn(f"{what} could not be written ({one_line(exc)}); the pod was "
                             "handled all the same")

    def write_proof(self) -> None:
        """proof-terminated.json: the provider's own answer for the pod after terminate."""
        proof = self.proof
        data = {
            "pod_id": self.id,
            "provider": self.provider_name,
            "mock": self.config.mock,
            "verified_gone": self.verified_gone,
            "checked_at": proof.checked_at if proof else None,
            "listed": proof.listed if proof else None,
            "answer": proof.answer if proof else None,
            "terminate_requested_at": iso(self.stream.began("terminate")),
            "routes": gone_routes(self.provider_name),
            "note": "the provider's own answer for this pod after terminate, and whether it "
                    "still appeared in the provider's list of pods",
        }
        self.report.path(PROOF).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        self.report.add_artifact(PROOF)

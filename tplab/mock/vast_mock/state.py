"""The mock Vast cloud's account, SSH keys and instances: create, boot, outbid, stop, destroy, billing.

One ``VastState`` per mock process, driven from its asyncio loop (no locks). Modelled on Vast
as it answers (``departures`` lists where that differs from its document, with sources):

- A created instance shows ``actual_status`` null, then ``loading`` after half the boot delay,
  then ``running`` after the boot delay, when its container starts (start.sh: sshd with the
  instance's keys, then the create's ``onstart`` in the background). Only then does it show
  ``public_ipaddr`` (127.0.0.1) and ``ports["22/tcp"][0]["HostPort"]``; sshd answers once the
  start script asked for it. ``intended_status`` is what the renter wants (running/stopped).
- Billing, per second: compute at the instance's rate (the bid for interruptible, the offer's
  on-demand price otherwise) while ``running``; storage (disk GB x storage_cost) from create
  until destroyed, running or stopped. ``/api/v0/charges/`` reports both per instance
  (``instance-<id>``), the account's ``credit`` falls by the same. At zero credit every running
  instance is stopped.
- Stopped (outbid, ``PUT`` state stopped, out of credit): every process paused (SIGSTOP), sshd
  refusing; resumed: continued (SIGCONT), sshd back on the same port.
- Destroyed: every process killed, sshd closed, gone from the API (show: ``instances: null``,
  destroy again: 404 ``no_such_instance``). The sandbox stays until the mock exits.
- Keys: account keys (``POST /api/v0/ssh/``) go into every instance created later; keys attached
  to an instance (``POST /api/v0/instances/{id}/ssh/``) into that one (``.ssh/authorized_keys``
  in its sandbox, read by its sshd at every login).
- Inside: the container (start.sh, ``onstart``) has ``CONTAINER_ID``, ``CONTAINER_API_KEY``
  (the per-instance key: start, stop or destroy this instance only), ``PUBLIC_IPADDR`` (set at
  start, never refreshed), ``VAST_TCP_PORT_22``, the create's ``env`` and ``VAST_API_BASE_URL``
  = this mock (on a real instance it is absent). An **SSH session has none of them**: only a
  login's own variables and what ``<sandbox>/etc/environment`` holds (Vast's
  ``/etc/environment``, where an onstart may export them), read at every login.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import secrets
import signal
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.mock import container
from tplab.mock.procs import CLOUD_MARKER_VAR, MARKER_VAR, kill_pod_processes, pod_pids
from tplab.mock.sshpod import PodSshServer
from tplab.mock.vast_mock.faults import VastFaults
from tplab.mock.vast_mock.limits import RateLimiter
from tplab.mock.vast_mock.catalog import Machine, storage_per_hr

START_SH = Path(__file__).with_name("start.sh")
#: what Vast shows when its host cannot start the container (the ``oci_error`` switch)
OCI_ERROR = ("Error response from daemon: failed to create task for container: failed to "
             "create shim task: OCI runtime create failed: runc create failed: unable to start "
             "container process: error during container init: nvidia-container-cli: "
             "requirement error: unsatisfied condition: cuda>=12.4, please update your driver")
STOPPED_WHILE_LOADING = "Instance is being stopped: the host could not start it"
BASE_URL_VAR = "VAST_API_BASE_URL"



def _state_of(pid: int) -> str:
    """A process's state letter (``/proc/<pid>/stat``), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""

class VastError(Exception):
    """An error answered in Vast's shape: ``{"success": false, "error", "msg"}``."""

    def __init__(self, status: int, error: str, msg: str, **extra: Any) -> None:
        super().__init__(msg)
        self.status, self.error, self.msg, self.extra = status, error, msg, extra


def iso_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SshKey:
    id: int
    key: str
    created_at: str = field(default_factory=iso_now)


@dataclass
class Instance:
    id: int
    label: str | None
    image: str
    machine: Machine
    is_bid: bool
    price: float                         # compute $/h while running (bid or on-demand)
    disk_gb: float
    onstart: str
    runtype: str
    user_env: dict[str, str]
    api_key: str
    sandbox: Path
    faults: VastFaults                   # snapshot at create
    keys: list[SshKey] = field(default_factory=list)
    created_mono: float = field(default_factory=time.monotonic)
    created_epoch: float = field(default_factory=time.time)
    actual_status: str | None = None
    intended_status: str = "running"
    status_msg: str | None = "Creating instance"
    running_since: float | None = None   # monotonic, while running
    compute_s: float = 0.0               # running time before running_since
    destroyed_mono: float | None = None
    linger_reads: int | None = None
    ssh: PodSshServer | None = None
    container_pid: int | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    killed_pids: int = 0
    stopped_by: str | None = None        # outbid / user / credit
    blackhole: socket.socket | None = None  # direct_port_blocked: listens, never answers
    started_epoch: float | None = None   # when its container first started (epoch)

    @property
    def marker(self) -> str:
        """Its processes' mark, unique on this machine: Vast's ids are only unique within one
        mock (two mocks at once could both hand out an id), so the mark also names the mock's
        run (its state directory, ``run-<time>-<pid>``), which a terminate must never reach past."""
        return f"vast-{self.id}-{self.sandbox.parent.parent.name}"

    @property
    def storage_per_hr(self) -> float:
        return storage_per_hr(self.disk_gb)

    def compute_seconds(self, now: float | None = None) -> float:
        live = (now or time.monotonic()) - self.running_since if self.running_since else 0.0
        return self.compute_s + live

    def storage_seconds(self, now: float | None = None) -> float:
        end = self.destroyed_mono if self.destroyed_mono is not None else (now or time.monotonic())
        return max(0.0, end - self.created_mono)

    def charges(self, now: float | None = None) -> tuple[float, float]:
        """(compute, storage) dollars so far, per started second."""
        compute = self.price * math.ceil(self.compute_seconds(now) - 1e-9) / 3600
        storage = self.storage_per_hr * math.ceil(self.storage_seconds(now) - 1e-9) / 3600
        return compute, storage

    @property
    def public_port(self) -> int | None:
        if self.actual_status != "running" or self.ssh is None or self.faults.no_ssh_port:
            return None
        return self.ssh.port


class VastState:
    def __init__(self, api_key: str, balance_usd: float, faults: VastFaults, boot_delay_s: float,
                 state_dir: Path, api_url: str = "", keep_sandboxes: bool = False) -> None:
        self.api_key = api_key
        self.user_id = 100000 + secrets.randbelow(800000)
        self.initial_credit = balance_usd
        self.faults = faults
        self.boot_delay_s = boot_delay_s
        self.state_dir = state_dir
        self.api_url = api_url
        self.keep_sandboxes = keep_sandboxes
        self.instances: dict[int, Instance] = {}  # every one ever created, destroyed too
        self.account_keys: dict[int, SshKey] = {}
        self.calls: Counter[str] = Counter()
        self.rate_limited: Counter[str] = Counter()   # 429s answered, per call
        self.limiter = RateLimiter(lambda: self.faults.rate_scale)
        self.taken: set[int] = set()             # offers someone else rented (offer_taken)
        self.repriced: dict[int, float] = {}     # offers whose quote went stale: price factor
        self.schema_violations: list[str] = []
        self._next_id = 31000000 + secrets.randbelow(1000) * 1000
        self._next_key = 800000

    # ---- account -------------------------------------------------------------------------
    def credit(self) -> float:
        now = time.monotonic()
        return self.initial_credit - sum(sum(i.charges(now)) for i in self.instances.values())

    def key_scope(self, key: str) -> int | None | bool:
        """None: the account key; an instance id: that instance's key; False: unknown."""
        if key and secrets.compare_digest(key.encode(), self.api_key.encode()):
            return None
        for inst in self.instances.values():
            if key and secrets.compare_digest(key.encode(), inst.api_key.encode()):
                return inst.id if inst.destroyed_mono is None else False
        return False

    def new_key_id(self) -> int:
        self._next_key += 1
        return self._next_key

    def live(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.destroyed_mono is None]

    def shown_destroyed(self, inst_id: int | None = None) -> list[Instance]:
        """Destroyed instances still answered as records (``destroyed_records``)."""
        return [i for i in self.instances.values() if i.destroyed_mono is not None
                and i.faults.destroyed_records and (inst_id is None or i.id == inst_id)]

    async def read(self, inst_id: int | None = None) -> list[Instance]:
        """The instances a read shows (one, or all), counting the read against a lingering
        destroy (``destroy_lingers``)."""
        found = [i for i in self.live() if inst_id is None or i.id == inst_id]
        for inst in found:
            if inst.linger_reads is not None and inst.linger_reads > 0:
                inst.linger_reads -= 1
                if inst.linger_reads == 0:
                    await self._destroy_now(inst, "destroyed (after lingering)")
        return [i for i in found if i.destroyed_mono is None]

    def get(self, inst_id: int) -> Instance:
        inst = self.instances.get(inst_id)
        if inst is None or inst.destroyed_mono is not None:
            raise VastError(404, "no_such_instance", f"Instance {inst_id} not found.")
        return inst

    # ---- create --------------------------------------------------------------------------
    def create(self, machine: Machine, *, price: float | None, image: str, label: str | None,
               disk_gb: float, onstart: str, runtype: str, env: dict[str, str],
               stopped: bool = False) -> Instance:
        self._next_id += 1
        inst_id = self._next_id
        sandbox = self.state_dir / "instances" / str(inst_id)
        for sub in ("etc", "tmp", "run", ".ssh"):
            (sandbox / sub).mkdir(parents=True, exist_ok=True)
        inst = Instance(
            id=inst_id, label=label, image=image, machine=machine, is_bid=price is not None,
            price=price if price is not None else machine.ondemand_dph, disk_gb=disk_gb,
            onstart=onstart, runtype=runtype, user_env=dict(env),
            api_key=secrets.token_hex(32), sandbox=sandbox,
            faults=VastFaults.from_dict(self.faults.to_dict()),
            keys=[SshKey(k.id, k.key, k.created_at) for k in self.account_keys.values()])
        self.instances[inst_id] = inst
        self.write_keys(inst)
        (sandbox / "onstart.sh").write_text(onstart or "")
        if stopped:
            inst.actual_status, inst.intended_status = "stopped", "stopped"
            inst.status_msg = "Instance is stopped"
        else:
            inst.tasks.append(asyncio.get_running_loop().create_task(self._boot(inst)))
        return inst

    def write_keys(self, inst: Instance) -> None:
        path = inst.sandbox / ".ssh" / "authorized_keys"
        path.write_text("".join(k.key.strip() + "\n" for k in inst.keys))
        path.chmod(0o600)

    def instance_env(self, inst: Instance) -> dict[str, str]:
        """The container's environment (its start script and ``onstart`` run with it)."""
        port = str(inst.ssh.port) if inst.ssh and inst.ssh.port and not inst.faults.no_ssh_port \
            and not inst.faults.no_direct_ports else ""
        return {
            **container.base_env(inst.sandbox), **inst.user_env,
            "CONTAINER_ID": str(inst.id), "CONTAINER_API_KEY": inst.api_key,
            "PUBLIC_IPADDR": "127.0.0.1", "VAST_TCP_PORT_22": port,
            BASE_URL_VAR: self.api_url,
            **container.container_env(inst.sandbox),
            "TPLAB_VAST_ONSTART": str(inst.sandbox / "onstart.sh"),
            MARKER_VAR: inst.marker, CLOUD_MARKER_VAR: self.state_dir.name,
        }

    def ssh_env(self, inst: Instance) -> dict[str, str]:
        """What an SSH login starts with: a root login's variables and the mock's markers (its
        stand-in for the container's cgroup), none of the container's own."""
        return {**container.base_env(inst.sandbox), MARKER_VAR: inst.marker,
                CLOUD_MARKER_VAR: self.state_dir.name}

    async def _boot(self, inst: Instance) -> None:
        try:
            await asyncio.sleep(self.boot_delay_s / 2)
            if inst.actual_status is not None:
                return
            inst.actual_status, inst.status_msg = "loading", "Pulling image"
            if inst.faults.stopped_while_loading:
                inst.intended_status, inst.status_msg = "stopped", STOPPED_WHILE_LOADING
                return
            await asyncio.sleep(self.boot_delay_s / 2)
            if inst.actual_status != "loading":
                return
            if inst.faults.boot_exited:
                inst.actual_status = "exited"
                inst.status_msg = "Error: the container exited during boot (boot_exited fault)"
                return
            if inst.faults.oci_error:
                inst.actual_status, inst.status_msg = "created", OCI_ERROR
                return
            if inst.faults.restarting_s > 0:
                inst.actual_status, inst.status_msg = "restarting", "Restarting the container"
                await asyncio.sleep(inst.faults.restarting_s)
                if inst.actual_status != "restarting":
                    return
            inst.ssh = PodSshServer(inst.marker, inst.sandbox, self.ssh_env(inst),
                                    env_file=inst.sandbox / "etc" / "environment")
            inst.ssh.reserve()
            if inst.faults.direct_port_blocked:
                inst.blackhole = socket.create_server(("127.0.0.1", 0), backlog=64)
            env = self.instance_env(inst)
            proc = await container.start_container(inst.sandbox, env, f"bash {START_SH}")
            inst.container_pid = proc.pid
            self._set_running(inst, "Instance is running")
            loop = asyncio.get_running_loop()
            inst.tasks.append(loop.create_task(self._watch(inst, proc)))
            if inst.is_bid and inst.faults.outbid_after_s is not None:
                inst.tasks.append(loop.create_task(self._outbid_later(inst)))
            if await container.wait_for_sshd_request(inst.sandbox, proc) \
                    and not inst.faults.no_ssh_port and inst.actual_status == "running" \
                    and inst.stopped_by is None:  # not being stopped meanwhile
                await inst.ssh.listen()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a mock bug or a port problem: recorded, the instance exits
            print(f"mock vast: instance {inst.id} failed to boot: {exc!r}", file=sys.stderr)
            self.schema_violations.append(f"mock vast bug: instance boot failed: {exc!r}")
            inst.actual_status, inst.status_msg = "exited", f"boot failed: {exc!r}"

    def _set_running(self, inst: Instance, msg: str) -> None:
        inst.actual_status, inst.status_msg = "running", msg
        if inst.running_since is None:
            inst.running_since = time.monotonic()
        if inst.started_epoch is None:
            inst.started_epoch = time.time()

    async def _watch(self, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if inst.destroyed_mono is None and inst.actual_status == "running":
            self._stop_clock(inst)
            inst.actual_status, inst.status_msg = "exited", f"container exited ({code})"

    async def _outbid_later(self, inst: Instance) -> None:
        assert inst.faults.outbid_after_s is not None
        await asyncio.sleep(inst.faults.outbid_after_s)
        await self.outbid(inst)

    async def outbid(self, inst: Instance) -> None:
        """A higher bid takes a running bid instance now (``outbid_after_s``'s timer, or a test
        that waits for its moment: ``POST /_mock/outbid``); it resumes after
        ``outbid_resume_s`` unless that is -1."""
        if inst.actual_status != "running":
            return
        await self.pause(inst, "outbid", "Instance stopped: outbid by a higher bid")
        if inst.faults.outbid_as_stopped:
            inst.intended_status = "stopped"
        if inst.faults.outbid_resume_s < 0:
            return
        await asyncio.sleep(inst.faults.outbid_resume_s)
        if inst.destroyed_mono is None and inst.stopped_by == "outbid":
            await self.resume(inst, "Instance resumed: the higher bid ended")

    # ---- stop / resume / destroy ---------------------------------------------------------
    def _stop_clock(self, inst: Instance) -> None:
        if inst.running_since is not None:
            inst.compute_s += time.monotonic() - inst.running_since
            inst.running_since = None

    def _signal_all(self, inst: Instance, sig: int) -> list[int]:
        roots = set(inst.ssh.roots) if inst.ssh else set()
        if inst.container_pid:
            roots.add(inst.container_pid)
        signalled = []
        for pid in pod_pids(inst.marker, roots):
            try:
                os.kill(pid, sig)
                signalled.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        return signalled

    def _stop_all(self, inst: Instance, timeout_s: float = 2.0) -> None:
        """SIGSTOP every process of the instance and wait (bounded) until each is stopped: a
        signal is delivered after ``kill`` returns, and a stopped instance runs nothing."""
        pending = set(self._signal_all(inst, signal.SIGSTOP))
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            pending = {pid for pid in pending if _state_of(pid) not in ("T", "t", "Z", "")}
            if pending:
                time.sleep(0.005)

    async def pause(self, inst: Instance, by: str, msg: str) -> None:
        """Stopped (outbid, asked, out of credit): compute billing ends, processes paused."""
        if inst.actual_status not in ("running", "loading", None):
            return
        self._stop_clock(inst)
        inst.stopped_by = by
        if by != "outbid":
            inst.intended_status = "stopped"
        if inst.ssh is not None:
            await inst.ssh.suspend()
        await asyncio.to_thread(self._stop_all, inst)
        # said once it is so: what reads "stopped" finds every process paused
        inst.actual_status, inst.status_msg = "stopped", msg

    async def resume(self, inst: Instance, msg: str) -> None:
        inst.intended_status = "running"
        if inst.actual_status != "stopped":
            return
        inst.stopped_by = None
        if inst.container_pid is None:  # never booted (created stopped): boot now
            inst.actual_status = None
            inst.tasks.append(asyncio.get_running_loop().create_task(self._boot(inst)))
            return
        await asyncio.to_thread(self._signal_all, inst, signal.SIGCONT)
        self._set_running(inst, msg)
        if inst.ssh is not None and not inst.faults.no_ssh_port:
            await inst.ssh.listen()

    async def destroy(self, inst_id: int) -> None:
        inst = self.get(inst_id)
        lingers = self.faults.destroy_lingers
        if lingers:
            if inst.linger_reads is None:
                inst.linger_reads = lingers
            if self.faults.destroy_intent_shown:  # asked to go, still running and billing
                inst.intended_status = "destroyed"
            return
        await self._destroy_now(inst, "destroyed")

    async def _destroy_now(self, inst: Instance, msg: str) -> None:
        self._stop_clock(inst)
        inst.destroyed_mono = time.monotonic()
        inst.status_msg = msg
        if inst.faults.destroyed_records:
            inst.actual_status = inst.intended_status = "destroyed"
        current = asyncio.current_task()
        for task in inst.tasks:
            if task is not current and not task.done():
                task.cancel()
        ssh, inst.ssh = inst.ssh, None
        if inst.blackhole is not None:
            inst.blackhole.close()
        inst.killed_pids += await container.end_all(inst.marker, ssh, inst.container_pid)

    async def shutdown(self) -> None:
        for inst in list(self.instances.values()):
            if inst.destroyed_mono is None:
                await self._destroy_now(inst, "mock cloud shut down")
            else:
                await asyncio.to_thread(kill_pod_processes, inst.marker, frozenset())

    async def watch_credit(self, interval_s: float = 1.0) -> None:
        """Stop every running instance once the credit is used up (Vast does the same)."""
        while True:
            await asyncio.sleep(interval_s)
            if self.credit() <= 0:
                for inst in self.live():
                    if inst.actual_status == "running":
                        await self.pause(inst, "credit", "Instance stopped: out of credit")

    def admin_view(self, inst: Instance) -> dict[str, Any]:
        """What ``GET /_mock/pods`` shows of an instance (for tests; never its key)."""
        roots = frozenset(inst.ssh.roots) if inst.ssh else frozenset()
        compute, storage = inst.charges()
        return {
            "id": inst.id, "label": inst.label, "actual_status": inst.actual_status,
            "intended_status": inst.intended_status, "destroyed": inst.destroyed_mono is not None,
            "is_bid": inst.is_bid, "price": inst.price, "gpu_name": inst.machine.gpu_name,
            "askId": inst.machine.ask_id,
            "num_gpus": inst.machine.num_gpus, "sshPort": inst.ssh.port if inst.ssh else None,
            "sshListening": bool(inst.ssh and inst.ssh.listening),
            "hostKey": inst.ssh.host_key_openssh if inst.ssh else None,
            "sandbox": str(inst.sandbox), "computeUsd": compute, "storageUsd": storage,
            "computeSeconds": inst.compute_seconds(), "stoppedBy": inst.stopped_by,
            "statusMsg": inst.status_msg, "alivePids": sorted(pod_pids(inst.marker, roots)),
            "containerStartedAt": inst.started_epoch,
            "killedPids": inst.killed_pids,
        }

"""The mock cloud's account and pods: creation, the boot's course, billing, stop, interruption, terminate.

One ``CloudState`` per mock process, driven from its asyncio loop (no locks: only the loop touches
it). Behaviour modelled on RunPod's (REST v2 status names):

- A created pod is ``PROVISIONING`` at once (billing from that moment), ``STARTING`` after half
  the boot delay, and ``RUNNING`` after the boot delay (plus the ``runtime_null_s`` fault), when
  its container starts (container.py: the start script, or the create's ``args``). Only then does
  it have a ``runtime`` with port 22 mapped to a loopback port on ``127.0.0.1`` (reported as a
  public IP, and as ``ssh.direct``); sshd listens there once the start script asks for it (after
  the ``ssh_refuse_s`` fault, if set). RUNNING is not ready: readiness is an SSH handshake.
- Billing: per started second from create until terminate/stop/interruption/error, at the pod's
  ``cost`` (bid x gpuCount for spot, on-demand price x gpuCount otherwise), deducted from the
  balance (GraphQL ``clientBalance``) and reported by ``/v2/billing/pods``. When the balance
  reaches zero every running pod is stopped, as RunPod does.
- Terminate kills every process of the pod (``procs.kill_pod_processes``), closes its SSH server,
  frees the port and removes it from the API (``GET /v2/pods/{id}`` answers 404). The sandbox
  stays on disk for post-mortem until the mock exits (or for good with ``keep_sandboxes``).
- Each pod's commands get ``RUNPOD_POD_ID``, a pod-scoped ``RUNPOD_API_KEY`` (valid only for its
  own pod: ``GET``/``DELETE /v2/pods/{id}`` and GraphQL ``podTerminate``),
  ``RUNPOD_API_BASE_URL`` = this mock, and ``TPLAB_RP_ENV_FILE`` naming
  ``<sandbox>/etc/rp_environment``, where the start script writes them as ``export K=V`` lines
  (a real pod has them in ``/etc/rp_environment``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import secrets
import string
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.mock import container
from tplab.mock.runpod_mock.catalog import GpuOffer, find_offer
from tplab.mock.runpod_mock.faults import Faults
from tplab.mock.procs import CLOUD_MARKER_VAR, MARKER_VAR, kill_pod_processes, pod_pids
from tplab.mock.sshpod import PodSshServer

NO_INSTANCES = ("There are no longer any instances available with the requested specifications. "
                "Please refresh and try again.")
SOMETHING_WRONG = "Something went wrong. Please try again later or contact support."
#: the CUDA version of every mock machine (a create asking for more cannot be placed)
MACHINE_CUDA = "12.8"
LIVE_STATES = ("PROVISIONING", "STARTING", "RUNNING")


class CloudError(Exception):
    """An error the API reports to the caller; ``status`` is the HTTP status v2 answers with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _new_id(n: int = 14) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


def cuda_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass
class MockPod:
    id: str
    name: str
    image: str
    offer: GpuOffer
    gpu_count: int
    cost_per_hr: float
    interruptible: bool
    user_env: dict[str, str]
    sandbox: Path
    pod_key: str
    ports: list[str]
    disk_gb: int
    args: str                            # the container's command ("" = the start script)
    faults: Faults                       # snapshot taken at create
    created_mono: float = field(default_factory=time.monotonic)
    created_at: str = field(default_factory=now_iso)
    created_epoch: float = field(default_factory=time.time)
    started_at: str | None = None
    status: str = "PROVISIONING"          # v2 PodStatus
    runtime_since: float | None = None    # monotonic time the container started
    ended_mono: float | None = None       # billing stopped
    end_reason: str | None = None
    ssh: PodSshServer | None = None
    machine_id: str = field(default_factory=_new_id)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    killed_pids: int = 0
    host_key: str | None = None           # OpenSSH line of the pod's host key, once booted
    container_pid: int | None = None
    #: the ``terminate_lingers`` fault: reads left before an accepted terminate takes effect
    #: (-1: it never does)
    linger_reads: int | None = None
    host_cuda: str = ""                   # the CUDA its host's driver runs (the v2 cudaVersion)
    allowed_cuda: tuple[str, ...] = ()    # the create's allowedCudaVersions (for tests)

    def billed_seconds(self, now: float | None = None) -> int:
        end = self.ended_mono if self.ended_mono is not None else (now or time.monotonic())
        return max(0, math.ceil(end - self.created_mono - 1e-9))

    def accrued_usd(self, now: float | None = None) -> float:
        return self.cost_per_hr * self.billed_seconds(now) / 3600.0

    @property
    def ended_epoch(self) -> float | None:
        if self.ended_mono is None:
            return None
        return self.created_epoch + (self.ended_mono - self.created_mono)


class CloudState:
    def __init__(self, api_key: str, balance_usd: float, faults: Faults, boot_delay_s: float,
                 state_dir: Path, api_url: str = "", keep_sandboxes: bool = False) -> None:
        self.api_key = api_key
        self.user_id = "user_" + _new_id(10)
        self.initial_balance = balance_usd
        self.faults = faults
        self.boot_delay_s = boot_delay_s
        self.state_dir = state_dir
        self.api_url = api_url
        self.keep_sandboxes = keep_sandboxes
        self.pods: dict[str, MockPod] = {}   # every pod ever created, terminated ones too
        self.calls: Counter[str] = Counter()  # requests per route / GraphQL root field
        self.schema_violations: list[str] = []  # answers of ours that broke RunPod's document

    # ---- account -------------------------------------------------------------------------
    def balance(self) -> float:
        now = time.monotonic()
        return self.initial_balance - sum(p.accrued_usd(now) for p in self.pods.values())

    def spend_per_hr(self) -> float:
        return sum(p.cost_per_hr for p in self.live_pods() if p.ended_mono is None)

    def live_pods(self) -> list[MockPod]:
        """Pods the API still shows (not terminated)."""
        return [p for p in self.pods.values() if p.status != "TERMINATED"]

    def get_live(self, pod_id: str) -> MockPod | None:
        pod = self.pods.get(pod_id)
        return pod if pod is not None and pod.status != "TERMINATED" else None

    async def read_pods(self, pod_id: str | None = None) -> list[MockPod]:
        """The live pods a read shows (one, or all), counting the read against any terminate
        that lingers (``terminate_lingers``): one whose count runs out is halted first."""
        pods = [p for p in ([self.get_live(pod_id)] if pod_id else self.live_pods()) if p]
        for pod in pods:
            if pod.linger_reads is not None and pod.linger_reads > 0:
                pod.linger_reads -= 1
                if pod.linger_reads == 0:
                    await self._halt(pod, "TERMINATED", "terminated (after lingering)")
        return [p for p in pods if p.status != "TERMINATED"]

    def key_scope(self, key: str) -> str | None | bool:
        """``None`` for the account key, a pod id for a pod-scoped key, ``False`` if unknown."""
        if secrets.compare_digest(key.encode(), self.api_key.encode()):
            return None
        for pod in self.pods.values():
            if secrets.compare_digest(key.encode(), pod.pod_key.encode()):
                return pod.id if pod.status != "TERMINATED" else False
        return False

    # ---- create --------------------------------------------------------------------------
    def create_pod(self, *, name: str, image: str, gpu_type_id: str | None, gpu_count: int,
                   interruptible: bool, bid_per_gpu: float | None, env: dict[str, str],
                   ports: list[str], disk_gb: int | None, args: str = "",
                   min_cuda: str | None = None, cloud: str = "SECURE",
                   allowed_cuda: list[str] | None = None) -> MockPod:
        offer = find_offer(gpu_type_id)
        if offer is None:
            raise CloudError(f"There are no GPU types matching {gpu_type_id!r}." if gpu_type_id
                             else "A GPU type id is required.")
        if gpu_count < 1 or gpu_count > offer.max_count:
            raise CloudError(f"gpu count must be between 1 and {offer.max_count} for "
                             f"{offer.id}.")
        if not image:
            raise CloudError("image is required.")
        if cloud != "SECURE":
            raise CloudError("The mock cloud has SECURE machines only: " + NO_INSTANCES)
        if min_cuda and allowed_cuda:
            raise CloudError("gpu.minCudaVersion and a non-empty gpu.allowedCudaVersions are "
                             "mutually exclusive.")
        # the pod lands on a host of the GPU type whose CUDA the create allows: the oldest
        # such (a create without a constraint may get a host too old for its image)
        hosts = [v for v in offer.host_cuda
                 if (not allowed_cuda or v in allowed_cuda)
                 and (not min_cuda or cuda_tuple(v) >= cuda_tuple(min_cuda))]
        if not hosts:
            wanted = (f"CUDA in {', '.join(allowed_cuda)}" if allowed_cuda else
                      f"CUDA >= {min_cuda}")
            raise CloudError(f"No machine with {wanted} could be found: " + NO_INSTANCES)
        host_cuda = min(hosts, key=cuda_tuple)
        if interruptible:
            if self.faults.no_spot_capacity:
                raise CloudError(NO_INSTANCES)
            if bid_per_gpu is None or bid_per_gpu < offer.spot_usd - 1e-9:
                raise CloudError(f"Your bid of ${bid_per_gpu}/hr is below the minimum bid of "
                                 f"${offer.spot_usd}/hr for this GPU type.")
            cost = round(bid_per_gpu * gpu_count, 6)
        else:
            if self.faults.no_on_demand_capacity:
                raise CloudError(NO_INSTANCES)
            cost = round(offer.on_demand_usd * gpu_count, 6)
        if self.balance() < cost / 60:  # RunPod wants at least some minutes' worth
            raise CloudError("Your balance is too low to deploy this pod. Please add funds.", 402)
        pod_id = _new_id()
        sandbox = self.state_dir / "pods" / pod_id
        for sub in ("etc", "tmp", "run"):
            (sandbox / sub).mkdir(parents=True, exist_ok=True)
        pod = MockPod(
            id=pod_id, name=name, image=image, offer=offer, gpu_count=gpu_count,
            cost_per_hr=cost, interruptible=interruptible, user_env=dict(env), sandbox=sandbox,
            pod_key="rpa_pod_" + secrets.token_hex(16), ports=list(ports),
            disk_gb=disk_gb or 20, args=args or "",
            faults=Faults.from_dict(self.faults.to_dict()), host_cuda=host_cuda,
            allowed_cuda=tuple(allowed_cuda or ()))
        self.pods[pod_id] = pod
        pod.tasks.append(asyncio.get_running_loop().create_task(self._boot(pod)))
        return pod

    def pod_env(self, pod: MockPod) -> dict[str, str]:
        """The environment every command of the pod gets (the container's and SSH sessions')."""
        return {
            **container.base_env(pod.sandbox),
            **pod.user_env,
            "RUNPOD_POD_ID": pod.id,
            "RUNPOD_API_KEY": pod.pod_key,
            "RUNPOD_API_BASE_URL": self.api_url,
            "RUNPOD_POD_HOSTNAME": f"{pod.id}-{pod.machine_id[:8]}",
            "RUNPOD_GPU_COUNT": str(pod.gpu_count),
            "RUNPOD_PUBLIC_IP": "127.0.0.1",
            "RUNPOD_TCP_PORT_22": str(pod.ssh.port if pod.ssh else ""),
            **container.container_env(pod.sandbox),
            MARKER_VAR: pod.id,
            CLOUD_MARKER_VAR: self.state_dir.name,
        }

    async def _boot(self, pod: MockPod) -> None:
        try:
            await self._boot_steps(pod)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a mock bug or a port problem: the pod never gets SSH
            import traceback

            print(f"mock cloud: pod {pod.id} failed to boot: {exc!r}", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)

    async def _boot_steps(self, pod: MockPod) -> None:
        f = pod.faults
        await asyncio.sleep(self.boot_delay_s / 2)
        if pod.status != "PROVISIONING":
            return
        pod.status = "STARTING"
        await asyncio.sleep(self.boot_delay_s / 2 + max(0.0, f.runtime_null_s))
        if pod.status != "STARTING":
            return
        if f.boot_error:
            await self._halt(pod, "ERROR", "the container could not start (boot_error fault)")
            return
        pod.ssh = PodSshServer(pod.id, pod.sandbox, {})
        pod.ssh.reserve()
        pod.host_key = pod.ssh.host_key_openssh
        env = self.pod_env(pod)
        pod.ssh.env = env
        proc = await container.start_container(pod.sandbox, env, pod.args)
        pod.container_pid = proc.pid
        pod.status, pod.started_at = "RUNNING", now_iso()
        pod.runtime_since = time.monotonic()
        loop = asyncio.get_running_loop()
        pod.tasks.append(loop.create_task(self._watch_container(pod, proc)))
        if pod.interruptible and f.spot_interrupt_after_s is not None:
            pod.tasks.append(loop.create_task(self._interrupt_later(pod, f.spot_interrupt_after_s)))
        if not await container.wait_for_sshd_request(pod.sandbox, proc):
            return  # the container ended, or its command never handed over to the start script
        if f.ssh_refuse_s > 0:
            await asyncio.sleep(f.ssh_refuse_s)
        if pod.status == "RUNNING" and pod.ssh is not None:
            await pod.ssh.listen()

    async def _watch_container(self, pod: MockPod, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if pod.status == "RUNNING":
            await self._halt(pod, "EXITED", f"the container's command exited ({code})")

    async def _interrupt_later(self, pod: MockPod, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if pod.status == "RUNNING":
            await self._halt(pod, "EXITED", "spot interruption")

    # ---- stop / terminate ----------------------------------------------------------------
    async def _halt(self, pod: MockPod, status: str, reason: str) -> None:
        """Stop billing, kill every process, close SSH; status EXITED/ERROR or TERMINATED."""
        if pod.ended_mono is None:
            pod.ended_mono = time.monotonic()
            pod.end_reason = reason
        pod.status = status
        current = asyncio.current_task()
        for task in pod.tasks:
            if task is not current and not task.done():
                task.cancel()
        pod.runtime_since = None
        ssh, pod.ssh = pod.ssh, None
        pod.killed_pids += await container.end_all(pod.id, ssh, pod.container_pid)

    async def terminate_pod(self, pod_id: str) -> None:
        pod = self.get_live(pod_id)
        if pod is None:
            raise CloudError("pod not found", 404)
        if self.faults.take_terminate_failure():
            raise CloudError(SOMETHING_WRONG, 500)
        if self.faults.terminate_lingers:
            if pod.linger_reads is None:  # accepted, but not taking effect yet
                pod.linger_reads = self.faults.terminate_lingers
            return
        await self._halt(pod, "TERMINATED", "terminated")

    async def shutdown(self) -> None:
        """Terminate every pod (the mock is exiting)."""
        for pod in list(self.pods.values()):
            if pod.status != "TERMINATED" or pod.ssh is not None:
                await self._halt(pod, "TERMINATED", "mock cloud shut down")
            else:
                await asyncio.to_thread(kill_pod_processes, pod.id, frozenset())

    async def watch_balance(self, interval_s: float = 1.0) -> None:
        """Stop every running pod once the balance is used up (RunPod does the same)."""
        while True:
            await asyncio.sleep(interval_s)
            if self.balance() <= 0:
                for pod in self.live_pods():
                    if pod.status in LIVE_STATES:
                        await self._halt(pod, "EXITED", "balance exhausted")

    # ---- views ---------------------------------------------------------------------------
    def ssh_port(self, pod: MockPod) -> int | None:
        """The public port of 22/tcp while the pod runs (the mapping shows before sshd answers)."""
        if pod.status != "RUNNING" or pod.runtime_since is None or pod.ssh is None:
            return None
        return pod.ssh.port

    def admin_view(self, pod: MockPod) -> dict[str, Any]:
        """What ``GET /_mock/pods`` shows (for tests; never the pod key)."""
        alive = sorted(pod_pids(pod.id, frozenset(pod.ssh.roots) if pod.ssh else frozenset()))
        return {
            "id": pod.id, "name": pod.name, "status": pod.status,
            "desiredStatus": pod.status, "interruptible": pod.interruptible,
            "gpuTypeId": pod.offer.id, "gpuCount": pod.gpu_count, "costPerHr": pod.cost_per_hr,
            "args": pod.args, "sshPort": pod.ssh.port if pod.ssh else None,
            "sshListening": bool(pod.ssh and pod.ssh.listening),
            "hostKey": pod.host_key,
            "sandbox": str(pod.sandbox), "billedSeconds": pod.billed_seconds(),
            "accruedUsd": pod.accrued_usd(), "endReason": pod.end_reason,
            "alivePids": alive, "killedPids": pod.killed_pids,
            "hostCuda": pod.host_cuda, "allowedCudaVersions": list(pod.allowed_cuda),
        }

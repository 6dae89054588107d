"""The mock cloud's account and pods: creation, the boot timeline, billing, stop, interruption, terminate.

One ``CloudState`` per mock process, driven from its asyncio loop (no locks: only the loop touches
it). Behaviour modelled on RunPod's:

- ``dockerArgs`` replaces the image's start script, so a pod created with non-empty
  ``dockerArgs`` shows its ports but never runs sshd (connections refused), as on RunPod;
  ``terminateAfter``/``stopAfter`` are accepted and ignored, as RunPod did.
- A created pod is ``desiredStatus: RUNNING`` at once, with ``runtime: null`` while it "boots"
  (``boot_delay_s``, plus the ``runtime_null_s`` fault). Then ``runtime.ports`` lists
  ``22 -> <loopback port>`` on ``127.0.0.1`` (reported as a public IP), and the pod's SSH server
  listens there (after the ``ssh_refuse_s`` fault, if set).
- Billing: per started second from create until terminate/stop/interruption, at ``costPerHr``
  (bid x gpuCount for spot, on-demand price x gpuCount otherwise), deducted from ``clientBalance``.
  When the balance reaches zero every running pod is stopped, as RunPod does.
- Terminate kills every process of the pod (``procs.kill_pod_processes``), closes its SSH server,
  frees the port and removes it from the API (``pod`` answers null). The sandbox stays on disk for
  post-mortem until the mock exits (or for good with ``keep_sandboxes``).
- Each pod's commands get ``RUNPOD_POD_ID``, a pod-scoped ``RUNPOD_API_KEY`` (valid only for
  ``pod``/``podStop``/``podTerminate`` of that pod), ``RUNPOD_API_BASE_URL`` = this mock, and
  ``TPLAB_RP_ENV_FILE`` naming ``<sandbox>/etc/rp_environment`` where the same variables are written
  as ``export K=V`` lines (a real pod has them in ``/etc/rp_environment``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import os
import secrets
import shlex
import string
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tplab.mock.catalog import GpuOffer, find_offer
from tplab.mock.faults import Faults
from tplab.mock.procs import CLOUD_MARKER_VAR, MARKER_VAR, kill_pod_processes, pod_pids
from tplab.mock.sshpod import PodSshServer

NO_INSTANCES = ("There are no longer any instances available with the requested specifications. "
                "Please refresh and try again.")
SOMETHING_WRONG = "Something went wrong. Please try again later or contact support."


class CloudError(Exception):
    """An error the API reports to the caller (GraphQL ``errors[].message`` or REST ``error``)."""


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _new_id(n: int = 14) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


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
    public_key: str
    sandbox: Path
    pod_key: str
    ports_spec: str
    container_disk_gb: int
    faults: Faults                       # snapshot taken at create
    created_mono: float = field(default_factory=time.monotonic)
    desired_status: str = "RUNNING"       # RUNNING | EXITED | TERMINATED
    last_status_change: str = field(default_factory=_now_iso)
    runtime_since: float | None = None    # monotonic time runtime appeared
    ended_mono: float | None = None       # billing stopped
    end_reason: str | None = None
    ssh: PodSshServer | None = None
    machine_id: str = field(default_factory=_new_id)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    killed_pids: int = 0
    host_key: str | None = None           # OpenSSH line of the pod's host key, once booted
    docker_args: str = ""                 # non-empty replaces the start script: sshd never starts

    def billed_seconds(self, now: float | None = None) -> int:
        end = self.ended_mono if self.ended_mono is not None else (now or time.monotonic())
        return max(0, math.ceil(end - self.created_mono - 1e-9))

    def accrued_usd(self, now: float | None = None) -> float:
        return self.cost_per_hr * self.billed_seconds(now) / 3600.0

    def set_status(self, status: str) -> None:
        self.desired_status = status
        self.last_status_change = f"{status}: {_now_iso()}"


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

    # ---- account -------------------------------------------------------------------------
    def balance(self) -> float:
        now = time.monotonic()
        return self.initial_balance - sum(p.accrued_usd(now) for p in self.pods.values())

    def spend_per_hr(self) -> float:
        return sum(p.cost_per_hr for p in self.live_pods() if p.ended_mono is None)

    def live_pods(self) -> list[MockPod]:
        """Pods the API still shows (not terminated)."""
        return [p for p in self.pods.values() if p.desired_status != "TERMINATED"]

    def get_live(self, pod_id: str) -> MockPod | None:
        pod = self.pods.get(pod_id)
        return pod if pod is not None and pod.desired_status != "TERMINATED" else None

    def key_scope(self, key: str) -> str | None | bool:
        """``None`` for the account key, a pod id for a pod-scoped key, ``False`` if unknown."""
        if secrets.compare_digest(key.encode(), self.api_key.encode()):
            return None
        for pod in self.pods.values():
            if secrets.compare_digest(key.encode(), pod.pod_key.encode()):
                return pod.id if pod.desired_status != "TERMINATED" else False
        return False

    # ---- create --------------------------------------------------------------------------
    def create_pod(self, *, name: str, image: str, gpu_type_id: str | None, gpu_count: int,
                   interruptible: bool, bid_per_gpu: float | None, env: dict[str, str],
                   ports: str | None, container_disk_gb: int | None,
                   docker_args: str | None = None) -> MockPod:
        offer = find_offer(gpu_type_id)
        if offer is None:
            raise CloudError(f"There are no GPU types matching {gpu_type_id!r}." if gpu_type_id
                             else "gpuTypeId is required.")
        if gpu_count < 1 or gpu_count > offer.max_count:
            raise CloudError(f"gpuCount must be between 1 and {offer.max_count}.")
        if not image:
            raise CloudError("imageName is required.")
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
            raise CloudError("Your balance is too low to deploy this pod. Please add funds.")
        pod_id = _new_id()
        sandbox = self.state_dir / "pods" / pod_id
        (sandbox / "etc").mkdir(parents=True, exist_ok=True)
        (sandbox / "tmp").mkdir(exist_ok=True)
        pod = MockPod(
            id=pod_id, name=name, image=image, offer=offer, gpu_count=gpu_count,
            cost_per_hr=cost, interruptible=interruptible, user_env=dict(env),
            public_key=env.get("PUBLIC_KEY", ""), sandbox=sandbox,
            pod_key="rpa_pod_" + secrets.token_hex(16), ports_spec=ports or "",
            container_disk_gb=container_disk_gb or 20,
            faults=Faults.from_dict(self.faults.to_dict()),
            docker_args=docker_args or "")
        self.pods[pod_id] = pod
        pod.tasks.append(asyncio.get_running_loop().create_task(self._boot(pod)))
        return pod

    def pod_env(self, pod: MockPod) -> dict[str, str]:
        """The environment every command of the pod gets (also written to rp_environment)."""
        bindir = os.path.dirname(sys.executable)
        rp_env = {
            "RUNPOD_POD_ID": pod.id,
            "RUNPOD_API_KEY": pod.pod_key,
            "RUNPOD_API_BASE_URL": self.api_url,
            "RUNPOD_POD_HOSTNAME": f"{pod.id}-{pod.machine_id[:8]}",
            "RUNPOD_GPU_COUNT": str(pod.gpu_count),
            "RUNPOD_PUBLIC_IP": "127.0.0.1",
            "RUNPOD_TCP_PORT_22": str(pod.ssh.port if pod.ssh else ""),
        }
        env = {
            "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(pod.sandbox),
            "TMPDIR": str(pod.sandbox / "tmp"),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
            "USER": "root",
            **pod.user_env,
            **rp_env,
            "TPLAB_RP_ENV_FILE": str(pod.sandbox / "etc" / "rp_environment"),
            MARKER_VAR: pod.id,
            CLOUD_MARKER_VAR: self.state_dir.name,
        }
        return env

    def _write_rp_environment(self, pod: MockPod, env: dict[str, str]) -> None:
        names = [k for k in env if k.startswith("RUNPOD_") or k == "PUBLIC_KEY"]
        path = pod.sandbox / "etc" / "rp_environment"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            for k in names:
                fh.write(f"export {k}={shlex.quote(env[k])}\n")

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
        await asyncio.sleep(self.boot_delay_s + max(0.0, f.runtime_null_s))
        if pod.desired_status != "RUNNING":
            return
        pod.ssh = PodSshServer(pod.id, pod.sandbox, pod.public_key, {})
        pod.ssh.reserve()
        pod.host_key = pod.ssh.host_key_openssh
        env = self.pod_env(pod)
        pod.ssh.env = env
        self._write_rp_environment(pod, env)
        pod.runtime_since = time.monotonic()
        if pod.interruptible and f.spot_interrupt_after_s is not None:
            pod.tasks.append(asyncio.get_running_loop().create_task(
                self._interrupt_later(pod, f.spot_interrupt_after_s)))
        if f.ssh_refuse_s > 0:
            await asyncio.sleep(f.ssh_refuse_s)
        if pod.docker_args.strip():
            return  # as on RunPod: dockerArgs replaced the image's start script, so no sshd
        if pod.desired_status == "RUNNING" and pod.ssh is not None:
            await pod.ssh.listen()

    async def _interrupt_later(self, pod: MockPod, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if pod.desired_status == "RUNNING":
            await self._halt(pod, "EXITED", "spot interruption")

    # ---- stop / terminate ----------------------------------------------------------------
    async def _halt(self, pod: MockPod, status: str, reason: str) -> None:
        """Stop billing, kill every process, close SSH; status EXITED (stopped) or TERMINATED."""
        if pod.ended_mono is None:
            pod.ended_mono = time.monotonic()
            pod.end_reason = reason
        pod.set_status(status)
        current = asyncio.current_task()
        for task in pod.tasks:
            if task is not current and not task.done():
                task.cancel()
        pod.runtime_since = None
        ssh, pod.ssh = pod.ssh, None
        roots = set(ssh.roots) if ssh else set()
        if ssh is not None:
            await ssh.close()
        pod.killed_pids += await asyncio.to_thread(kill_pod_processes, pod.id, roots)

    async def stop_pod(self, pod_id: str) -> MockPod:
        pod = self.get_live(pod_id)
        if pod is None:
            raise CloudError("Pod not found.")
        if pod.desired_status == "RUNNING":
            await self._halt(pod, "EXITED", "stopped")
        return pod

    async def terminate_pod(self, pod_id: str) -> None:
        pod = self.get_live(pod_id)
        if pod is None:
            raise CloudError("Pod not found.")
        if self.faults.take_terminate_failure():
            raise CloudError(SOMETHING_WRONG)
        await self._halt(pod, "TERMINATED", "terminated")

    async def shutdown(self) -> None:
        """Terminate every pod (the mock is exiting)."""
        for pod in list(self.pods.values()):
            if pod.desired_status != "TERMINATED" or pod.ssh is not None:
                await self._halt(pod, "TERMINATED", "mock cloud shut down")
            else:
                await asyncio.to_thread(kill_pod_processes, pod.id, frozenset())

    async def watch_balance(self, interval_s: float = 1.0) -> None:
        """Stop every running pod once the balance is used up (RunPod does the same)."""
        while True:
            await asyncio.sleep(interval_s)
            if self.balance() <= 0:
                for pod in self.live_pods():
                    if pod.desired_status == "RUNNING":
                        await self._halt(pod, "EXITED", "balance exhausted")

    # ---- views ---------------------------------------------------------------------------
    def runtime(self, pod: MockPod) -> dict[str, Any] | None:
        if pod.desired_status != "RUNNING" or pod.runtime_since is None or pod.ssh is None:
            return None
        return {
            "uptimeInSeconds": int(time.monotonic() - pod.runtime_since),
            "ports": [{"ip": "127.0.0.1", "isIpPublic": True, "privatePort": 22,
                       "publicPort": pod.ssh.port, "type": "tcp"}],
            "gpus": [{"id": f"GPU-{pod.machine_id}-{i}", "gpuUtilPercent": 0,
                      "memoryUtilPercent": 0} for i in range(pod.gpu_count)],
            "container": {"cpuPercent": 0, "memoryPercent": 0},
        }

    def admin_view(self, pod: MockPod) -> dict[str, Any]:
        """What ``GET /_mock/pods`` shows (for tests; never the pod key)."""
        alive = sorted(pod_pids(pod.id, frozenset(pod.ssh.roots) if pod.ssh else frozenset()))
        return {
            "id": pod.id, "name": pod.name, "desiredStatus": pod.desired_status,
            "interruptible": pod.interruptible, "gpuTypeId": pod.offer.id,
            "gpuCount": pod.gpu_count, "costPerHr": pod.cost_per_hr,
            "sshPort": pod.ssh.port if pod.ssh else None,
            "sshListening": bool(pod.ssh and pod.ssh.listening),
            "hostKey": pod.host_key,
            "sandbox": str(pod.sandbox), "billedSeconds": pod.billed_seconds(),
            "accruedUsd": pod.accrued_usd(), "endReason": pod.end_reason,
            "alivePids": alive, "killedPids": pod.killed_pids,
        }

"""The Provider protocol: what tplab needs from a GPU cloud, and the records it exchanges.

The orchestrator (tplab/lab.py) talks only to this protocol. The RunPod provider implements it
through the runpod SDK; in mock mode the same RunPod provider is pointed at the local mock cloud
(tplab/mock), so there is one implementation and it is the one tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

#: every pod tplab creates is named with this prefix, so tplab can find its own pods again
POD_NAME_PREFIX = "tplab-"
#: what the lab rents unless told otherwise
DEFAULT_GPU_TYPE = "NVIDIA GeForce RTX 4090"
DEFAULT_GPU_COUNT = 2
#: provider states that mean a pod no longer exists (GONE: the provider has no record of it)
GONE_STATES = frozenset({"GONE", "TERMINATED", "DELETED"})


class ProviderError(RuntimeError):
    """A provider call failed. The message is one sentence for the user and never holds secrets."""


class AuthError(ProviderError):
    """The API key was refused."""


class NoCapacityError(ProviderError):
    """No capacity (spot or on-demand, as asked) for this GPU type and count."""


class UnknownGpuError(ProviderError):
    """The GPU type is not one the provider offers."""


class NotReadyError(ProviderError):
    """The pod did not become reachable over SSH within the bound (it has been terminated)."""


class TransientError(ProviderError):
    """The API failed in a way that may pass (HTTP 5xx, timeout, connection refused)."""


@dataclass(frozen=True)
class Quote:
    gpu_type: str
    gpu_count: int
    spot_usd_per_hr: float | None       # None: no spot offer
    on_demand_usd_per_hr: float | None  # None: no on-demand offer
    spot_available: bool
    on_demand_available: bool


@dataclass(frozen=True)
class PodSpec:
    name: str                   # must start with POD_NAME_PREFIX
    gpu_type: str
    gpu_count: int
    public_key: str             # OpenSSH public key line, passed to the pod as env PUBLIC_KEY
    spot: bool = True
    bid_usd_per_gpu_hr: float | None = None
    image: str = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
    container_disk_gb: int = 20
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SshEndpoint:
    host: str
    port: int
    user: str = "root"
    host_key: str | None = None  # the host key seen at the handshake (OpenSSH line), to pin it


@dataclass(frozen=True)
class PodInfo:
    id: str
    name: str
    state: str                  # provider's desiredStatus, e.g. CREATED, RUNNING, EXITED; GONE if absent
    gpu_type: str | None = None
    gpu_count: int | None = None
    usd_per_hr: float | None = None
    spot: bool | None = None
    ssh: SshEndpoint | None = None
    uptime_s: float | None = None
    raw: dict = field(default_factory=dict)  # the provider's own answer (no secrets)


@dataclass(frozen=True)
class GoneProof:
    """The provider's own answer showing a pod is gone, with the time it was asked."""
    pod_id: str
    checked_at: str             # ISO 8601 UTC
    answer: dict                # provider's raw answer (e.g. {"pod": null}), no secrets
    listed: bool                # whether the pod still appeared in the provider's pod list

    @property
    def gone(self) -> bool:
        """The provider does not list the pod and answers for it with nothing (or a record that
        says TERMINATED, which RunPod may keep showing for a while)."""
        pod = self.answer.get("pod")
        dead = pod is None or str(pod.get("desiredStatus", "")).upper() == "TERMINATED"
        return dead and not self.listed


@dataclass(frozen=True)
class CostReport:
    actual_usd: float           # best figure (balance delta when available)
    balance_delta_usd: float | None
    rate_x_seconds_usd: float | None
    billed_seconds: float | None
    note: str = ""


@runtime_checkable
class Provider(Protocol):
    name: str

    def quote(self, gpu_type: str, gpu_count: int) -> Quote: ...
    def balance(self) -> float | None: ...
    def create(self, spec: PodSpec) -> PodInfo: ...
    def wait_ready(self, pod_id: str, timeout_s: float) -> PodInfo: ...  # terminates on timeout
    def status(self, pod_id: str) -> PodInfo: ...
    def terminate(self, pod_id: str) -> None: ...       # idempotent: not found means gone
    def verify_gone(self, pod_id: str) -> GoneProof: ...
    def list_pods(self) -> list[PodInfo]: ...           # tplab's pods only (name prefix)
    def actual_cost(self, pod_id: str, balance_before: float | None,
                    started_at: float, ended_at: float, usd_per_hr: float) -> CostReport: ...

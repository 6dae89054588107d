"""The Provider protocol: what tplab needs from a GPU cloud, and the records it exchanges.

The orchestrator (tplab/lab/) talks only to this protocol. Each cloud implements it in a package
of its own (``tplab/cloud/<name>/``), found by name through
``tplab.cloud.registry``; in mock mode the same provider is pointed at the local mock cloud
(tplab/mock), so there is one implementation per cloud and it is the one tested. Every error is a
``ProviderError`` whose message is one sentence for the user.
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
#: states of a pod that exists but will not become ready (the container ended, or failed)
DEAD_STATES = frozenset({"EXITED", "ERROR"})
#: a spot pod the provider paused or took back while tplab wanted it running (Vast: outbid)
INTERRUPTED = "INTERRUPTED"


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


class RateLimitedError(TransientError):
    """The provider kept answering HTTP 429 after tplab waited as it asked (or, for a call
    made once, answered one 429: ``retry_after_s`` is how long it asked to wait)."""

    def __init__(self, message: str, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SpotUnavailableError(NoCapacityError):
    """The provider does not offer spot (interruptible) capacity right now; nothing was
    created. The lab never switches to on-demand by itself."""


class ImageMismatchError(ProviderError):
    """No host the provider offers for this GPU can run the pod's image (its driver's CUDA is
    too old, or its GPU has no kernels in the image's torch); nothing was created."""


class BalanceError(ProviderError):
    """HTTP 402: the account's balance is too low."""


class ForbiddenError(ProviderError):
    """HTTP 403: the key is valid but may not do this."""


class RequestRejectedError(ProviderError):
    """HTTP 400: the request breaks one of the provider's rules (its answer says which)."""


class RequestBugError(ProviderError):
    """The request does not match the provider's documented shape: a bug in tplab."""


class AmbiguousCreateError(TransientError):
    """The create call failed in a way that may still have made a (billing) pod: a 5xx, a
    timeout or a lost connection. ``pod_name`` is the name to look for in the pod list;
    ``cause`` says in a few words what came back ("HTTP 500: ...", "no answer in time")."""

    def __init__(self, message: str, pod_name: str, cause: str = "") -> None:
        super().__init__(message)
        self.pod_name = pod_name
        self.cause = cause or message


class RentalMismatchError(ProviderError):
    """The provider made a pod, but not the rental tplab asked for (an interruptible bid came
    back on demand, or at another price). The provider has already tried to end it; ``info`` is
    that pod, so the lab adopts it and its teardown terminates, verifies and settles it."""

    def __init__(self, message: str, info: PodInfo) -> None:
        super().__init__(message)
        self.info = info


class LeftBehindError(SpotUnavailableError):
    """No interruptible rental at the bid, yet the provider made an instance and left it (a
    Vast bid that failed still makes a stopped instance, billing its storage). The provider
    has sent its end; ``info`` is that instance, so the lab adopts it and its teardown proves
    it gone and settles it: never "nothing is left" before that proof."""

    def __init__(self, message: str, info: PodInfo) -> None:
        super().__init__(message)
        self.info = info


@dataclass(frozen=True)
class HostOffer:
    """One place a create could land (a Vast offer; RunPod's hosts of one CUDA version) and
    whether the lab's image runs there (``ok``: True, False, None for "cannot tell")."""
    offer: str                          # "offer 9001002" / "hosts with CUDA 12.4"
    usd_per_hr: float | None            # the whole pod's price there (None: not quoted)
    host_cuda: str | None               # the CUDA its driver runs at most
    ok: bool | None
    why: str                            # one clause
    available: bool = True              # capacity there now
    price_what: str = ""                # what ``usd_per_hr`` is ("minimum bid + storage")


@dataclass(frozen=True)
class Quote:
    """Prices are for the whole pod (per GPU-hour x count), in USD per hour."""
    gpu_type: str
    gpu_count: int
    spot_usd_per_hr: float | None       # None: no spot offer
    on_demand_usd_per_hr: float | None  # None: no on-demand offer
    spot_available: bool
    on_demand_available: bool
    availability: str | None = None     # on-demand stock: NONE, LOW, MEDIUM, HIGH (v2 catalog)
    spot_offered: bool | None = None    # the provider still offers spot at all (None: unknown)
    spot_note: str = ""                 # why spot is not available, one clause (or "")
    provider: str = ""                  # the provider's registry name, when known
    image: str = ""                     # the image the prices are for ("": not judged)
    hosts: tuple[HostOffer, ...] = ()   # where a create could land, judged for ``image``
    #: when no host the provider offers can run ``image``: why, one sentence ("" otherwise);
    #: the prices above are then for hosts that cannot run it
    image_refusal: str = ""
    #: what ``spot_usd_per_hr`` is made of, when it is not simply the provider's minimum bid
    #: (Vast: tplab's bid, from the offer's minimum bid, its storage and a margin)
    spot_price_note: str = ""


@dataclass(frozen=True)
class BootStep:
    """What the pod runs from its container's first second (the boot guard), whatever the cloud:
    unpack ``payload_b64`` to ``path`` and run ``command`` (a POSIX sh line that backgrounds
    itself). Each provider carries it in its own create field (RunPod: the container command,
    before the image's start script; Vast: ``onstart``)."""
    path: str
    payload_b64: str = field(repr=False)
    command: str = field(repr=False)


@dataclass(frozen=True)
class PodSpec:
    name: str                   # must start with POD_NAME_PREFIX
    gpu_type: str
    gpu_count: int
    public_key: str             # OpenSSH public key line, passed to the pod as env PUBLIC_KEY
    spot: bool = True
    bid_usd_per_gpu_hr: float | None = None
    image: str = ""             # "": the default for the GPU (tplab.cloud.image_fit.choose_image)
    container_disk_gb: int = 20
    env: dict[str, str] = field(default_factory=dict)
    #: RunPod only: the container's command (REST v2 ``args``); "" keeps the image's start
    #: script, which is what starts sshd: a command given here must hand over to it
    args: str = ""
    #: the boot guard, started with the container (each provider says how)
    boot: BootStep | None = None


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
    state: str                  # REST v2 status: PROVISIONING, STARTING, RUNNING, EXITED, ERROR,
                                # TERMINATED; GONE when the provider has no such pod (404)
    gpu_type: str | None = None
    gpu_count: int | None = None
    usd_per_hr: float | None = None
    spot: bool | None = None
    ssh: SshEndpoint | None = None
    uptime_s: float | None = None
    raw: dict = field(default_factory=dict)  # the provider's own answer (no secrets)
    note: str = ""              # the provider's reason for a state, one clause ("outbid: paused")
    #: another way to the same sshd (Vast: its SSH proxy), tried when ``ssh`` does not answer
    #: within a bound (some hosts' direct ports never answer); None: ``ssh`` is the only way
    ssh_fallback: SshEndpoint | None = None


@dataclass(frozen=True)
class GoneProof:
    """The provider's own answer showing a pod is gone, with the time it was asked."""
    pod_id: str
    checked_at: str             # ISO 8601 UTC
    answer: dict                # provider's raw answer (e.g. {"pod": null}), no secrets
    listed: bool                # whether the pod still appeared in the provider's pod list

    @property
    def gone(self) -> bool:
        """The provider does not list the pod and answers for it with nothing (404), or with a
        record that says TERMINATED, which RunPod may keep showing for a while."""
        if "pod" not in self.answer:  # no answer about the pod (an error): not gone
            return False
        pod = self.answer.get("pod")
        status = "" if pod is None else str(pod.get("status") or pod.get("desiredStatus") or "")
        dead = pod is None or status.upper() == "TERMINATED"
        return dead and not self.listed


@dataclass(frozen=True)
class CostReport:
    """What a pod cost. ``actual_usd`` is the provider's billing record when it has the pod,
    never less than ``rate_x_seconds_usd`` (the pod's price x its billed seconds); ``source``
    says which figure it is; the balance change is a cross-check only (other pods share it)."""
    actual_usd: float
    balance_delta_usd: float | None
    rate_x_seconds_usd: float | None
    billed_seconds: float | None
    note: str = ""
    billing_usd: float | None = None   # the provider's billing records for the pod, summed
    source: str = "rate_x_seconds"     # "billing" | "rate_x_seconds"


@runtime_checkable
class Provider(Protocol):
    name: str                   # its name in tplab.cloud.registry
    label: str                  # what artifacts and the dashboard call it: "RunPod", "Vast.ai"

    def self_end(self) -> dict: ...  # how its pods end themselves (self_terminate.SelfEnd data)

    #: ``image``: quote only hosts that can run it (their driver's CUDA), judged in ``hosts``
    def quote(self, gpu_type: str, gpu_count: int, image: str = "") -> Quote: ...
    def balance(self) -> float | None: ...
    def create(self, spec: PodSpec) -> PodInfo: ...
    def wait_ready(self, pod_id: str, timeout_s: float) -> PodInfo: ...  # terminates on timeout
    def status(self, pod_id: str) -> PodInfo: ...
    def terminate(self, pod_id: str) -> None: ...       # idempotent: not found means gone
    def end_once(self, pod_id: str) -> None: ...        # one end call: refused raises
    def verify_gone(self, pod_id: str) -> GoneProof: ...
    def list_pods(self) -> list[PodInfo]: ...           # tplab's pods only (name prefix)
    def actual_cost(self, pod_id: str, balance_before: float | None,
                    started_at: float, ended_at: float, usd_per_hr: float) -> CostReport: ...

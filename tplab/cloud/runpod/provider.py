"""The RunPod provider: tplab's Provider protocol on RunPod as it is today.

One implementation for real and mock: in mock mode it is pointed at the local mock cloud
(``api_base_url`` = the mock's URL), and everything below runs unchanged.

- Pods through REST v2 (``<api_base_url>/v2``, Bearer key; http_api.py, shapes.py): create
  ``POST /v2/pods``, get ``GET /v2/pods/{id}`` (404 and TERMINATED mean gone), list
  ``GET /v2/pods`` (tplab's name prefix, filtered here; pagination followed when present),
  terminate ``DELETE /v2/pods/{id}`` (204; 404 means gone), retried with backoff.
- Quote: ``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&count=N&cloud=SECURE``: the
  per-GPU secure price x count and the stock (NONE/LOW/MEDIUM/HIGH), and the hosts' CUDA
  versions judged for the image (host_fit.py); plus what spot RunPod offers right now
  (spot.py: GraphQL, while it lasts).
- Every create first reads the catalog's CUDA versions for the GPU and sends those that run the
  image's CUDA as ``allowedCudaVersions`` (REST v2 and the spot mutation alike); none of them:
  ImageMismatchError, nothing created.
- Spot create only when the spec says ``spot=True``, through ``podRentInterruptable``; spot not
  offered (mutation gone, GraphQL gone, no capacity) raises SpotUnavailableError with nothing
  created. On-demand only when the spec says ``spot=False`` (the caller's explicit flag).
- A create that fails ambiguously (5xx, timeout) raises AmbiguousCreateError: RunPod may have
  made the pod, and the caller (the lab) keeps its intent and looks for the pod by name.
- wait_ready: RUNNING is not ready. Poll until 22/tcp has a public endpoint (``ssh.direct``, else
  ``runtime.ports``), then require a real SSH handshake (the host key is returned, to pin); all
  within ``timeout_s``. ERROR or EXITED meanwhile is a clear failure; either way the pod is
  terminated and NotReadyError raised.
- actual_cost: ``GET /v2/billing/pods?podId=...`` when it has the pod's record, never less than
  ``cost`` x billed seconds, cross-checked against the balance change (spend.py).

Methods are synchronous; the orchestrator calls them through ``asyncio.to_thread``.
Every error is one sentence, what happened and what to do, with no secret in it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any, Callable, Sequence

from tplab.cloud.runpod import host_fit, shapes
from tplab.cloud.runpod import self_end as pod_self_end
from tplab.cloud.base import (DEAD_STATES, GONE_STATES, POD_NAME_PREFIX, AuthError,
                              ImageMismatchError, PodInfo, PodSpec, ProviderError, Quote,
                              SpotUnavailableError, UnknownGpuError)
from tplab.cloud.image_fit import choose_image
from tplab.cloud.pod_lifecycle import PodLifecycle, Words
from tplab.cloud.runpod.http_api import DEFAULT_API_BASE_URL, RestV2
from tplab.cloud.runpod.api_key import NO_KEY, load_api_key
from tplab.cloud.runpod.sdk import RunPodApi
from tplab.cloud.runpod.spot import Spot

MAX_PAGES = 50


class RunPodProvider(PodLifecycle):
    """See the module docstring; waiting, terminating, the gone proof and the cost are
    ``PodLifecycle``'s, in RunPod's words."""

    words = Words(noun="pod", verb="terminate", gerund="terminating", done="terminated",
                  still="running and billing",
                  by_hand="terminate it in the RunPod console or with `tplab terminate`",
                  bill="RunPod's billing", billed_by="RunPod's billing record")

    name = "runpod"
    label = "RunPod"

    def __init__(self, api_key: str | None = None, api_base_url: str | None = None, *,
                 cloud_type: str = "SECURE", poll_interval_s: float = 2.0,
                 ssh_probe_timeout_s: float = 10.0, client_key: Any = None,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 terminate_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 timeout_s: float = 30.0, key_source: str = "",
                 sleep: Callable[[float], None] = time.sleep) -> None:
        key = api_key or load_api_key()
        if not key:
            raise AuthError(NO_KEY)
        base = (api_base_url or DEFAULT_API_BASE_URL).rstrip("/")
        self._rest = RestV2(key, base, timeout_s=timeout_s, retry_delays=retry_delays,
                            key_source=key_source, sleep=sleep)
        self._spot = Spot(RunPodApi(key, base, key_source), retry_delays)
        self.cloud_type = cloud_type
        self.poll_interval_s = poll_interval_s
        self.ssh_probe_timeout_s = ssh_probe_timeout_s
        self.client_key = client_key
        self.terminate_delays = tuple(terminate_delays)
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"RunPodProvider(api={self.api_base_url!r})"

    @property
    def api_base_url(self) -> str:
        return self._rest.base_url

    def self_end(self) -> dict[str, Any]:
        """How this provider's pods end themselves (``self_end.py``), on this API's URL."""
        return pod_self_end.self_end(self.api_base_url)

    # ---- reads ---------------------------------------------------------------------------
    def catalog_gpu(self, gpu_type: str, gpu_count: int) -> dict[str, Any]:
        """The v2 catalog's entry for ``gpu_type``, with its pod stock for ``gpu_count``."""
        ans = self._rest.call("quoting GPU prices", "GET", "/catalog/gpus", params={
            "include": "AVAILABILITY", "product": "POD", "count": int(gpu_count),
            "cloud": self.cloud_type})
        gpus = (ans.body or {}).get("gpus") or []
        match = next((g for g in gpus if isinstance(g, dict) and g.get("id") == gpu_type), None)
        if match is None:
            raise UnknownGpuError(
                f"RunPod offers no GPU type named {gpu_type!r}; use a GPU type id such as "
                f"'NVIDIA GeForce RTX 4090' (`tplab check --gpu-type ...` lists what it finds).")
        return match

    def quote(self, gpu_type: str, gpu_count: int, image: str = "") -> Quote:
        gpu = self.catalog_gpu(gpu_type, gpu_count)
        cloud = "secure" if self.cloud_type == "SECURE" else "community"
        per_gpu = (gpu.get("price") or {}).get(cloud)
        max_count = (gpu.get("maxCount") or {}).get(cloud)
        stock = gpu.get("availability")
        fits = max_count is None or gpu_count <= int(max_count)
        choice = choose_image(self.name, gpu_type, image or None)
        pod_price = round(float(per_gpu) * gpu_count, 6) if per_gpu else None
        hosts = host_fit.judge(gpu, choice, gpu_type, gpu_count, None)
        ond_ok = (bool(per_gpu) and fits and stock not in (None, "NONE") and hosts.capacity
                  and not hosts.refusal)
        offer = self._spot.offer(gpu_type, gpu_count)
        return Quote(
            gpu_type=gpu_type, gpu_count=gpu_count, provider=self.name,
            spot_usd_per_hr=(round(offer.min_bid_per_gpu * gpu_count, 6)
                             if offer.min_bid_per_gpu else None),
            on_demand_usd_per_hr=pod_price,
            spot_available=offer.available and fits and not hosts.refusal,
            on_demand_available=ond_ok,
            availability=stock, spot_offered=offer.offered,
            spot_note=offer.note if not offer.available else "",
            image=choice.image, hosts=hosts.hosts, image_refusal=hosts.refusal)

    def balance(self) -> float | None:
        """The account balance (GraphQL ``myself { clientBalance }``: v2 has none)."""
        return self._spot.balance()

    def _pod(self, pod_id: str) -> dict[str, Any] | None:
        ans = self._rest.call("reading the pod", "GET", f"/pods/{pod_id}")
        return ans.body if ans.found else None

    def status(self, pod_id: str) -> PodInfo:
        raw = self._pod(pod_id)
        if raw is None:
            return PodInfo(id=pod_id, name="", state="GONE")
        return shapes.pod_info(raw)

    def list_pods(self) -> list[PodInfo]:
        pods: list[dict[str, Any]] = []
        params: dict[str, Any] | None = None
        for _ in range(MAX_PAGES):
            body = self._rest.call("listing pods", "GET", "/pods", params=params).body or {}
            pods += [p for p in body.get("pods") or [] if isinstance(p, dict)]
            cursor = body.get("nextCursor") or (body.get("pagination") or {}).get("nextCursor")
            if not cursor:
                break
            params = {"cursor": cursor}
        return [shapes.pod_info(p) for p in pods
                if str(p.get("name") or "").startswith(POD_NAME_PREFIX)]

    # ---- create --------------------------------------------------------------------------
    def create(self, spec: PodSpec) -> PodInfo:
        if not spec.name.startswith(POD_NAME_PREFIX):
            raise ValueError(f"pod names must start with {POD_NAME_PREFIX!r}: {spec.name!r}")
        if not spec.public_key.strip():
            raise ProviderError("The pod needs the lab's SSH public key (PodSpec.public_key); "
                                "without it nobody could log in.")
        choice = choose_image(self.name, spec.gpu_type, spec.image or None)
        spec = dataclasses.replace(spec, image=choice.image)
        hosts = host_fit.judge(self.catalog_gpu(spec.gpu_type, spec.gpu_count), choice,
                                 spec.gpu_type, spec.gpu_count, None)
        if hosts.refusal:
            raise ImageMismatchError(f"{hosts.refusal[0].upper()}{hosts.refusal[1:]}; nothing "
                                     "was created.")
        if not spec.spot:
            ans = self._rest.call(f"creating the pod {spec.name}", "POST", "/pods",
                                  json=shapes.create_body(spec, self.cloud_type, hosts.allowed),
                                  create_name=spec.name)
            return shapes.pod_info(ans.body, spot=False)
        offer = self._spot.offer(spec.gpu_type, spec.gpu_count)
        if not offer.available or offer.min_bid_per_gpu is None:
            if offer.offered is not False:
                self.catalog_gpu(spec.gpu_type, spec.gpu_count)  # an unknown GPU says so
            raise SpotUnavailableError(f"No spot pod: {offer.note}; nothing was created.")
        low = offer.min_bid_per_gpu - 1e-6  # a bid quoted from the minimum may be rounded below it
        if spec.bid_usd_per_gpu_hr is not None and spec.bid_usd_per_gpu_hr < low:
            raise ProviderError(
                f"The bid ${spec.bid_usd_per_gpu_hr}/GPU-hr is below RunPod's minimum bid "
                f"${offer.min_bid_per_gpu}/GPU-hr for {spec.gpu_type}; nothing was created. "
                "Raise the bid.")
        rented = self._spot.rent(spec, offer.min_bid_per_gpu, hosts.allowed)
        pod_id = str(rented["id"])
        for delay in (0.0, 0.5, 1.0, 2.0):  # a new pod may take a moment to show in v2
            if delay:
                self._sleep(delay)
            try:
                raw = self._pod(pod_id)
            except ProviderError:
                raw = None
            if raw is not None:
                return shapes.pod_info(raw, spot=True)
        return PodInfo(id=pod_id, name=str(rented.get("name") or spec.name), state="PROVISIONING",
                       gpu_type=spec.gpu_type, gpu_count=spec.gpu_count,
                       usd_per_hr=rented.get("costPerHr"), spot=True)

    # ---- the lifecycle's RunPod parts (tplab.cloud.pod_lifecycle) ----------------------------
    def _why_dead(self, info: PodInfo) -> str | None:
        if info.state in DEAD_STATES or info.state in GONE_STATES:
            return ("RunPod could not start its container" if info.state == "ERROR" else
                    "a spot interruption, or its container stopped")
        return None

    def _probe_timeout(self, info: PodInfo, remaining: float) -> float | None:
        return min(self.ssh_probe_timeout_s, max(remaining, 0.5)) if remaining > 0 else None

    def _delete(self, pod_id: str, once: bool = False) -> None:
        self._rest.call("terminating the pod", "DELETE", f"/pods/{pod_id}", once=once)
        # 204, or 404: not found means gone

    def _record(self, pod_id: str) -> dict[str, Any] | None:
        raw = self._pod(pod_id)
        return None if raw is None else shapes.pod_info(raw).raw

    # ---- cost ----------------------------------------------------------------------------
    def billing_usd(self, pod_id: str, since: float) -> float | None:
        """The pod's billed amount in RunPod's billing (None: no record of it yet)."""
        day = dt.datetime.fromtimestamp(since, dt.UTC).replace(
            hour=0, minute=0, second=0, microsecond=0)
        ans = self._rest.call("reading the pod's billing", "GET", "/billing/pods", params={
            "podId": pod_id, "bucketSize": "day",
            "startTime": day.strftime("%Y-%m-%dT%H:%M:%SZ")})
        return shapes.billing_total((ans.body or {}).get("records") or [], pod_id)

    def _billed_usd(self, pod_id: str, started_at: float, ended_at: float) -> float | None:
        return self.billing_usd(pod_id, started_at)


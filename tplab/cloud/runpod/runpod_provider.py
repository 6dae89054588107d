"""The RunPod provider: tplab's Provider protocol on RunPod as it is today.

One implementation for real and mock: in mock mode it is pointed at the local mock cloud
(``api_base_url`` = the mock's URL), and everything below runs unchanged.

- Pods through REST v2 (``<api_base_url>/v2``, Bearer key; http_api.py, v2_pods.py): create
  ``POST /v2/pods``, get ``GET /v2/pods/{id}`` (404 and TERMINATED mean gone), list
  ``GET /v2/pods`` (tplab's name prefix, filtered here; pagination followed when present),
  terminate ``DELETE /v2/pods/{id}`` (204; 404 means gone), retried with backoff.
- Quote: ``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&count=N&cloud=SECURE``: the
  per-GPU secure price x count and the stock (NONE/LOW/MEDIUM/HIGH); plus what spot RunPod
  offers right now (spot.py: GraphQL, while it lasts).
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

from tplab.cloud import spend
from tplab.cloud.runpod import pod_self_end
from tplab.cloud.runpod import v2_pods
from tplab.cloud.base import (DEAD_STATES, GONE_STATES, POD_NAME_PREFIX, AuthError, CostReport,
                              GoneProof, NotReadyError, PodInfo, PodSpec, ProviderError, Quote,
                              SpotUnavailableError, SshEndpoint, UnknownGpuError)
from tplab.cloud.runpod.http_api import DEFAULT_API_BASE_URL, RestV2
from tplab.cloud.runpod.runpod_keys import NO_KEY, load_api_key
from tplab.cloud.runpod.sdk import RunPodApi
from tplab.cloud.runpod.spot import Spot
from tplab.home.redact import error_text

MAX_PAGES = 50


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class RunPodProvider:
    """See the module docstring."""

    name = "runpod"
    label = "RunPod"

    def __init__(self, api_key: str | None = None, api_base_url: str | None = None, *,
                 cloud_type: str = "SECURE", poll_interval_s: float = 2.0,
                 ssh_probe_timeout_s: float = 10.0, client_key: Any = None,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 terminate_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 timeout_s: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        key = api_key or load_api_key()
        if not key:
            raise AuthError(NO_KEY)
        base = (api_base_url or DEFAULT_API_BASE_URL).rstrip("/")
        self._rest = RestV2(key, base, timeout_s=timeout_s, retry_delays=retry_delays,
                            sleep=sleep)
        self._spot = Spot(RunPodApi(key, base), retry_delays)
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
        """How this provider's pods end themselves (``pod_self_end.py``), on this API's URL."""
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

    def quote(self, gpu_type: str, gpu_count: int) -> Quote:
        gpu = self.catalog_gpu(gpu_type, gpu_count)
        cloud = "secure" if self.cloud_type == "SECURE" else "community"
        per_gpu = (gpu.get("price") or {}).get(cloud)
        max_count = (gpu.get("maxCount") or {}).get(cloud)
        stock = gpu.get("availability")
        fits = max_count is None or gpu_count <= int(max_count)
        ond_ok = bool(per_gpu) and fits and stock not in (None, "NONE")
        offer = self._spot.offer(gpu_type, gpu_count)
        return Quote(
            gpu_type=gpu_type, gpu_count=gpu_count, provider=self.name,
            spot_usd_per_hr=(round(offer.min_bid_per_gpu * gpu_count, 6)
                             if offer.min_bid_per_gpu else None),
            on_demand_usd_per_hr=round(float(per_gpu) * gpu_count, 6) if per_gpu else None,
            spot_available=offer.available and fits, on_demand_available=ond_ok,
            availability=stock, spot_offered=offer.offered,
            spot_note=offer.note if not offer.available else "")

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
        return v2_pods.pod_info(raw)

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
        return [v2_pods.pod_info(p) for p in pods
                if str(p.get("name") or "").startswith(POD_NAME_PREFIX)]

    # ---- create --------------------------------------------------------------------------
    def create(self, spec: PodSpec) -> PodInfo:
        if not spec.name.startswith(POD_NAME_PREFIX):
            raise ValueError(f"pod names must start with {POD_NAME_PREFIX!r}: {spec.name!r}")
        if not spec.public_key.strip():
            raise ProviderError("The pod needs the lab's SSH public key (PodSpec.public_key); "
                                "without it nobody could log in.")
        if not spec.spot:
            ans = self._rest.call(f"creating the pod {spec.name}", "POST", "/pods",
                                  json=v2_pods.create_body(spec, self.cloud_type),
                                  create_name=spec.name)
            return v2_pods.pod_info(ans.body, spot=False)
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
        rented = self._spot.rent(spec, offer.min_bid_per_gpu)
        pod_id = str(rented["id"])
        for delay in (0.0, 0.5, 1.0, 2.0):  # a new pod may take a moment to show in v2
            if delay:
                self._sleep(delay)
            try:
                raw = self._pod(pod_id)
            except ProviderError:
                raw = None
            if raw is not None:
                return v2_pods.pod_info(raw, spot=True)
        return PodInfo(id=pod_id, name=str(rented.get("name") or spec.name), state="PROVISIONING",
                       gpu_type=spec.gpu_type, gpu_count=spec.gpu_count,
                       usd_per_hr=rented.get("costPerHr"), spot=True)

    # ---- readiness -----------------------------------------------------------------------
    def wait_ready(self, pod_id: str, timeout_s: float, client_key: Any = None) -> PodInfo:
        key = client_key if client_key is not None else self.client_key
        deadline = time.monotonic() + timeout_s
        last = "the pod was never seen"
        while True:
            try:
                info: PodInfo | None = self.status(pod_id)
            except AuthError:
                raise
            except ProviderError as exc:
                info, last = None, f"the API failed ({error_text(exc)})"
            if info is not None:
                if info.state in DEAD_STATES or info.state in GONE_STATES:
                    why = ("RunPod could not start its container" if info.state == "ERROR" else
                           "a spot interruption, or its container stopped")
                    self._give_up(pod_id, f"it went {info.state} before SSH came up ({why})")
                if info.ssh is None:
                    last = (f"the pod is {info.state} and 22/tcp has no public port yet")
                else:
                    remaining = deadline - time.monotonic()
                    if remaining > 0:
                        try:
                            host_key = self._probe(info.ssh, min(self.ssh_probe_timeout_s,
                                                                 max(remaining, 0.5)), key)
                        except Exception as exc:  # noqa: BLE001 - any failure means not yet
                            last = (f"SSH on {info.ssh.host}:{info.ssh.port} did not complete a "
                                    f"handshake ({type(exc).__name__})")
                        else:
                            ssh = SshEndpoint(info.ssh.host, info.ssh.port, info.ssh.user, host_key)
                            return dataclasses.replace(info, ssh=ssh)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._give_up(pod_id, f"it was not reachable over SSH within {timeout_s:.0f} s "
                                      f"({last})")
            self._sleep(min(self.poll_interval_s, max(remaining, 0.05)))

    def _probe(self, ssh: SshEndpoint, timeout_s: float, key: Any) -> str:
        from tplab.cloud.ssh_probe import probe_host_key

        return probe_host_key(ssh.host, ssh.port, timeout_s, client_key=key, username=ssh.user)

    def _give_up(self, pod_id: str, why: str) -> None:
        try:
            self.terminate(pod_id)
        except ProviderError as exc:
            raise NotReadyError(
                f"Pod {pod_id} was not ready: {why}; terminating it failed too ({error_text(exc)})"
                f" — terminate it in the RunPod console or with `tplab terminate`.") from None
        raise NotReadyError(f"Pod {pod_id} was not ready: {why}; it has been terminated.")

    # ---- terminate -----------------------------------------------------------------------
    def terminate(self, pod_id: str) -> None:
        last: ProviderError | None = None
        for attempt in range(len(self.terminate_delays) + 1):
            try:
                self._rest.call("terminating the pod", "DELETE", f"/pods/{pod_id}")
                return  # 204, or 404: not found means gone
            except AuthError:
                raise
            except ProviderError as exc:
                last = exc
                try:
                    if self.status(pod_id).state in GONE_STATES:
                        return
                except AuthError:
                    raise
                except ProviderError:
                    pass
            if attempt < len(self.terminate_delays):
                self._sleep(self.terminate_delays[attempt])
        raise ProviderError(
            f"Could not terminate pod {pod_id} after {len(self.terminate_delays) + 1} attempts "
            f"({error_text(last) if last else 'unknown error'}); it may still be running and "
            "billing: terminate it in the RunPod console or with `tplab terminate`.")

    def verify_gone(self, pod_id: str) -> GoneProof:
        checked = _utc_now()
        raw = self._pod(pod_id)
        answer: dict[str, Any] = {"pod": None if raw is None else v2_pods.pod_info(raw).raw}
        listed = any(p.id == pod_id and p.state not in GONE_STATES for p in self.list_pods())
        return GoneProof(pod_id=pod_id, checked_at=checked, answer=answer, listed=listed)

    # ---- cost ----------------------------------------------------------------------------
    def billing_usd(self, pod_id: str, since: float) -> float | None:
        """The pod's billed amount in RunPod's billing (None: no record of it yet)."""
        day = dt.datetime.fromtimestamp(since, dt.UTC).replace(
            hour=0, minute=0, second=0, microsecond=0)
        ans = self._rest.call("reading the pod's billing", "GET", "/billing/pods", params={
            "podId": pod_id, "bucketSize": "day",
            "startTime": day.strftime("%Y-%m-%dT%H:%M:%SZ")})
        return v2_pods.billing_total((ans.body or {}).get("records") or [], pod_id)

    def actual_cost(self, pod_id: str, balance_before: float | None, started_at: float,
                    ended_at: float, usd_per_hr: float) -> CostReport:
        notes: list[str] = []
        try:
            billed = self.billing_usd(pod_id, started_at)
        except AuthError:
            raise
        except ProviderError as exc:
            billed = None
            notes.append(f"RunPod's billing could not be read ({error_text(exc)})")
        delta: float | None = None
        if balance_before is not None:
            try:
                after = self.balance()
            except ProviderError as exc:
                after = None
                notes.append(f"balance unreadable after the lab ({error_text(exc)})")
            if after is not None:
                delta = round(balance_before - after, 6)
        return spend.settle(pod_id, usd_per_hr, max(0.0, ended_at - started_at), billed, delta,
                            notes, billed_by="RunPod's billing record")

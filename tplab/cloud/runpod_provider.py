"""The RunPod provider: tplab's Provider protocol through the runpod SDK (spot by default).

One implementation for real and mock: in mock mode it is pointed at the local mock cloud
(``api_base_url`` = the mock's URL), and everything below runs unchanged.

- Key: ``api_key`` argument, else ``RUNPOD_API_KEY``, else ``~/.runpod/config.toml`` (keys.py).
- Quote: ``gpuTypes(input:{id}) { lowestPrice(input:{gpuCount}) { minimumBidPrice
  uninterruptablePrice stockStatus } }``; prices are per GPU-hour, the Quote multiplies by count.
- Spot create: ``podRentInterruptable`` sent through the SDK's ``run_graphql_query`` (the SDK has
  no spot function), bid = ``spec.bid_usd_per_gpu_hr`` or the current minimum bid; or REST v1
  ``POST /pods`` with ``interruptible: true`` (``creation_api="rest"``), behind the same method.
  On-demand only when the spec says ``spot=False`` (the caller's explicit flag): no spot capacity
  never falls back to on-demand, it raises NoCapacityError with nothing created. Port ``22/tcp``,
  the lab's public key in env ``PUBLIC_KEY``; no ``dockerArgs`` (it replaces the image's start
  script and sshd never starts); no ``terminateAfter``/``stopAfter`` (RunPod ignored them).
  If the create call fails ambiguously (5xx, timeout), pods with the spec's name are looked up and
  terminated before the error is raised, so a failed create leaves nothing running.
- wait_ready: RUNNING is not ready. Poll ``pod { runtime { ports } }`` until private port 22 is
  mapped on a public IP, then require a real SSH handshake; all within ``timeout_s``. On timeout,
  or if the pod stops meanwhile (spot interruption), the pod is terminated and NotReadyError raised.
- terminate: idempotent ("not found" means gone), retried with backoff; verify_gone asks ``pod``
  and the pod list. actual_cost: change in ``myself { clientBalance }`` cross-checked against
  ``costPerHr`` x billed seconds.

Methods are synchronous (the SDK is); the orchestrator calls them through ``asyncio.to_thread``.
Every error is one sentence, what happened and what to do, with no secret in it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Any, Callable, Sequence

from tplab.cloud import graphql_ops as ops
from tplab.cloud.base import (
    POD_NAME_PREFIX,
    AuthError,
    CostReport,
    GoneProof,
    NoCapacityError,
    NotReadyError,
    PodInfo,
    PodSpec,
    ProviderError,
    Quote,
    SshEndpoint,
    TransientError,
    UnknownGpuError,
)
from tplab.cloud.keys import NO_KEY, load_api_key
from tplab.cloud.sdk import ApiError, RunPodApi, ctl, with_retries
from tplab.redact import error_text

_NO_CAPACITY_HINTS = ("no longer any instances", "no instances", "not enough", "no available",
                      "out of stock", "insufficient capacity")
_NOT_FOUND_HINTS = ("not found", "does not exist", "no pod")
_STOPPED = ("EXITED", "TERMINATED", "STOPPED", "GONE", "DEAD")


def _utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _has(msg: str, hints: Sequence[str]) -> bool:
    low = msg.lower()
    return any(h in low for h in hints)


class RunPodProvider:
    """See the module docstring. ``creation_api``: ``"graphql"`` (default) or ``"rest"``."""

    name = "runpod"

    def __init__(self, api_key: str | None = None, api_base_url: str | None = None, *,
                 rest_base_url: str | None = None, creation_api: str = "graphql",
                 cloud_type: str = "SECURE", poll_interval_s: float = 2.0,
                 ssh_probe_timeout_s: float = 10.0, client_key: Any = None,
                 retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 terminate_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 sleep: Callable[[float], None] = time.sleep) -> None:
        key = api_key or load_api_key()
        if not key:
            raise AuthError(NO_KEY)
        if creation_api not in ("graphql", "rest"):
            raise ValueError("creation_api must be 'graphql' or 'rest'")
        self._api = RunPodApi(key, api_base_url)
        self._key = key
        self._rest_base_url = rest_base_url
        self.creation_api = creation_api
        self.cloud_type = cloud_type
        self.poll_interval_s = poll_interval_s
        self.ssh_probe_timeout_s = ssh_probe_timeout_s
        self.client_key = client_key
        self.retry_delays = tuple(retry_delays)
        self.terminate_delays = tuple(terminate_delays)
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"RunPodProvider(api={self._api.api_base_url!r}, creation={self.creation_api!r})"

    @property
    def api_base_url(self) -> str:
        return self._api.api_base_url

    # ---- reads ---------------------------------------------------------------------------
    def _read(self, what: str, query: str) -> dict[str, Any]:
        return with_retries(lambda: self._api.graphql(what, query), self.retry_delays)

    def _gpu_type(self, gpu_type: str, gpu_count: int) -> dict[str, Any]:
        data = self._read("quoting GPU prices", ops.gpu_quote_query(gpu_type, gpu_count))
        types = data.get("gpuTypes") or []
        match = next((t for t in types if t and t.get("id") == gpu_type), None)
        if match is None:
            raise UnknownGpuError(
                f"RunPod offers no GPU type named {gpu_type!r}; use a GPU type id such as "
                f"'NVIDIA GeForce RTX 4090' (see RunPod's GPU list).")
        return match

    @staticmethod
    def _offers(gpu: dict[str, Any], gpu_count: int) -> tuple[float | None, float | None, bool, bool]:
        """Per-GPU spot minimum bid and on-demand price, and whether each is available now."""
        lp = gpu.get("lowestPrice") or {}
        max_count = gpu.get("maxGpuCount")
        fits = max_count is None or gpu_count <= int(max_count)
        in_stock = lp.get("stockStatus") is not None
        spot = _float_or_none(lp.get("minimumBidPrice")) or None
        ond = _float_or_none(lp.get("uninterruptablePrice")) or None
        return spot, ond, bool(fits and spot and in_stock), bool(fits and ond and in_stock)

    def quote(self, gpu_type: str, gpu_count: int) -> Quote:
        spot, ond, spot_ok, ond_ok = self._offers(self._gpu_type(gpu_type, gpu_count), gpu_count)
        return Quote(
            gpu_type=gpu_type, gpu_count=gpu_count,
            spot_usd_per_hr=round(spot * gpu_count, 6) if spot else None,
            on_demand_usd_per_hr=round(ond * gpu_count, 6) if ond else None,
            spot_available=spot_ok, on_demand_available=ond_ok)

    def balance(self) -> float | None:
        me = self._read("reading the account balance", ops.BALANCE_QUERY).get("myself") or {}
        value = me.get("clientBalance")
        return float(value) if value is not None else None

    def _pod_raw(self, pod_id: str) -> dict[str, Any] | None:
        try:
            data = self._read("reading the pod", ops.pod_query(pod_id))
        except ApiError as exc:
            if _has(exc.api_message, _NOT_FOUND_HINTS):
                return None
            raise
        return data.get("pod")

    def status(self, pod_id: str) -> PodInfo:
        raw = self._pod_raw(pod_id)
        if raw is None:
            return PodInfo(id=pod_id, name="", state="GONE")
        return self._info(raw)

    def list_pods(self) -> list[PodInfo]:
        get_pods = ctl().get_pods
        pods = with_retries(lambda: self._api.call("listing pods", get_pods), self.retry_delays)
        return [self._info(p) for p in pods or []
                if p and str(p.get("name") or "").startswith(POD_NAME_PREFIX)]

    @staticmethod
    def _ssh_of(raw: dict[str, Any]) -> SshEndpoint | None:
        runtime = raw.get("runtime") or {}
        for port in runtime.get("ports") or []:
            if (port and port.get("privatePort") == 22 and port.get("isIpPublic")
                    and port.get("ip") and port.get("publicPort")
                    and (port.get("type") or "tcp") == "tcp"):
                return SshEndpoint(host=str(port["ip"]), port=int(port["publicPort"]))
        return None

    def _info(self, raw: dict[str, Any]) -> PodInfo:
        clean = {k: v for k, v in raw.items() if k not in ("env", "dockerArgs")}
        runtime = raw.get("runtime") or {}
        uptime = runtime.get("uptimeInSeconds", raw.get("uptimeSeconds"))
        pod_type = raw.get("podType")
        return PodInfo(
            id=str(raw.get("id")), name=str(raw.get("name") or ""),
            state=str(raw.get("desiredStatus") or "UNKNOWN"),
            gpu_type=(raw.get("machine") or {}).get("gpuDisplayName"),
            gpu_count=raw.get("gpuCount"), usd_per_hr=_float_or_none(raw.get("costPerHr")),
            spot=(pod_type == "INTERRUPTABLE") if pod_type else None,
            ssh=self._ssh_of(raw), uptime_s=float(uptime) if uptime is not None else None,
            raw=clean)

    # ---- create --------------------------------------------------------------------------
    def create(self, spec: PodSpec) -> PodInfo:
        if not spec.name.startswith(POD_NAME_PREFIX):
            raise ValueError(f"pod names must start with {POD_NAME_PREFIX!r}: {spec.name!r}")
        if not spec.public_key.strip():
            raise ProviderError("The pod needs the lab's SSH public key (PodSpec.public_key); "
                                "without it nobody could log in.")
        min_bid, _, spot_ok, ond_ok = self._offers(
            self._gpu_type(spec.gpu_type, spec.gpu_count), spec.gpu_count)
        env = {"PUBLIC_KEY": spec.public_key.strip(), **spec.env}
        bid: float | None = None
        if spec.spot:
            if not spot_ok or min_bid is None:
                raise NoCapacityError(
                    f"No spot capacity for {spec.gpu_count} x {spec.gpu_type} on RunPod right now; "
                    "nothing was created. Try later, another GPU type, or on-demand explicitly.")
            bid = spec.bid_usd_per_gpu_hr or min_bid
            if bid < min_bid:
                raise ProviderError(
                    f"The bid ${bid}/GPU-hr is below RunPod's minimum bid ${min_bid}/GPU-hr for "
                    f"{spec.gpu_type}; nothing was created. Raise the bid.")
        elif not ond_ok:
            raise NoCapacityError(
                f"No on-demand capacity for {spec.gpu_count} x {spec.gpu_type} on RunPod right "
                "now; nothing was created. Try later or another GPU type.")
        try:
            if self.creation_api == "rest":
                raw = self._create_rest(spec, env)
            elif spec.spot:
                raw = self._api.graphql("creating the spot pod", ops.spot_create_mutation(
                    name=spec.name, image=spec.image, gpu_type=spec.gpu_type,
                    gpu_count=spec.gpu_count, bid_per_gpu=bid, env=env,
                    container_disk_gb=spec.container_disk_gb,
                    cloud_type=self.cloud_type))["podRentInterruptable"]
            else:
                raw = self._create_on_demand_sdk(spec, env)
        except ApiError as exc:
            if _has(exc.api_message, _NO_CAPACITY_HINTS):
                kind = "spot" if spec.spot else "on-demand"
                raise NoCapacityError(
                    f"RunPod has no {kind} capacity for {spec.gpu_count} x {spec.gpu_type} right "
                    "now; nothing was created. Try later or another GPU type.") from None
            raise
        except TransientError as exc:
            left = self._cleanup_by_name(spec.name)
            raise ProviderError(f"{exc} {left}") from None
        if not raw or not raw.get("id"):
            left = self._cleanup_by_name(spec.name)
            raise ProviderError(f"RunPod returned no pod for the create request. {left}")
        info = self._info(raw)
        if self.creation_api == "rest" or info.usd_per_hr is None or info.gpu_count is None:
            try:  # the REST/SDK answers carry fewer fields: fill them from a status read
                info = self.status(info.id)
            except ProviderError:
                pass
        return info

    def _create_rest(self, spec: PodSpec, env: dict[str, str]) -> dict[str, Any]:
        from tplab.cloud.rest import RunPodRest, rest_base_for

        rest = RunPodRest(self._key, rest_base_for(self._api.api_base_url, self._rest_base_url))
        data = rest.create_pod(name=spec.name, image=spec.image, gpu_type=spec.gpu_type,
                               gpu_count=spec.gpu_count, interruptible=spec.spot, env=env,
                               container_disk_gb=spec.container_disk_gb,
                               cloud_type=self.cloud_type)
        return {"id": data.get("id"), "name": data.get("name", spec.name),
                "desiredStatus": data.get("desiredStatus"),
                "costPerHr": _float_or_none(data.get("costPerHr")),
                "gpuCount": data.get("gpuCount") or (data.get("gpu") or {}).get("count"),
                "podType": "INTERRUPTABLE" if data.get("interruptible") else "RESERVED"}

    def _create_on_demand_sdk(self, spec: PodSpec, env: dict[str, str]) -> dict[str, Any]:
        unsafe = any(c in v for v in (*env.values(), *env.keys()) for c in '"\\\n')
        if unsafe:  # the SDK inlines env values unescaped: send our own escaped mutation instead
            return self._api.graphql("creating the on-demand pod", ops.on_demand_create_mutation(
                name=spec.name, image=spec.image, gpu_type=spec.gpu_type,
                gpu_count=spec.gpu_count, env=env, container_disk_gb=spec.container_disk_gb,
                cloud_type=self.cloud_type))["podFindAndDeployOnDemand"]
        create_pod = ctl().create_pod
        try:
            return self._api.call(
                "creating the on-demand pod", create_pod, spec.name, spec.image, spec.gpu_type,
                cloud_type=self.cloud_type, support_public_ip=True, start_ssh=True,
                gpu_count=spec.gpu_count, volume_in_gb=0,
                container_disk_in_gb=spec.container_disk_gb, docker_args=None,
                ports="22/tcp", env=env)
        except ValueError:  # the SDK's own GPU check
            raise UnknownGpuError(f"RunPod offers no GPU type named {spec.gpu_type!r}.") from None

    def _cleanup_by_name(self, name: str) -> str:
        """After an ambiguous create failure: terminate any pod that got that name anyway."""
        try:
            found = [p for p in self.list_pods() if p.name == name]
        except ProviderError:
            return ("Check the RunPod console for a pod named " + name +
                    " (the pod list could not be read).")
        for pod in found:
            self.terminate(pod.id)
        return ("A pod it had created anyway was terminated." if found
                else "Nothing was created.")

    # ---- readiness -----------------------------------------------------------------------
    def wait_ready(self, pod_id: str, timeout_s: float, client_key: Any = None) -> PodInfo:
        key = client_key if client_key is not None else self.client_key
        deadline = time.monotonic() + timeout_s
        last = "the pod was never seen"
        while True:
            try:
                info = self.status(pod_id)
            except AuthError:
                raise
            except ProviderError as exc:
                info, last = None, f"the API failed ({error_text(exc)})"
            if info is not None:
                if info.state in _STOPPED:
                    self._give_up(pod_id, f"it went {info.state} before SSH came up "
                                          "(a spot interruption, or the pod stopped)")
                if info.ssh is None:
                    last = ("the pod is RUNNING but its runtime is not up yet" if
                            info.raw.get("runtime") is None else
                            "port 22 is not mapped on a public IP yet")
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
        terminate_pod = ctl().terminate_pod
        last: ProviderError | None = None
        for attempt in range(len(self.terminate_delays) + 1):
            try:
                self._api.call("terminating the pod", terminate_pod, pod_id)
                return
            except AuthError:
                raise
            except ProviderError as exc:
                last = exc
                if isinstance(exc, ApiError) and _has(exc.api_message, _NOT_FOUND_HINTS):
                    return  # not found means gone
                try:
                    if self._pod_raw(pod_id) is None:
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
        raw = self._pod_raw(pod_id)
        answer: dict[str, Any] = {"pod": None if raw is None else self._info(raw).raw}
        listed = any(p.id == pod_id for p in self.list_pods())
        return GoneProof(pod_id=pod_id, checked_at=checked, answer=answer, listed=listed)

    # ---- cost ----------------------------------------------------------------------------
    def actual_cost(self, pod_id: str, balance_before: float | None, started_at: float,
                    ended_at: float, usd_per_hr: float) -> CostReport:
        seconds = max(0.0, ended_at - started_at)
        rate_x = usd_per_hr * seconds / 3600.0
        delta: float | None = None
        notes: list[str] = []
        if balance_before is not None:
            try:
                after = self.balance()
            except ProviderError as exc:
                after = None
                notes.append(f"balance unreadable after the lab ({error_text(exc)})")
            if after is not None:
                delta = round(balance_before - after, 6)
        if delta is None:
            actual = rate_x
            notes.append("from costPerHr x billed seconds (no balance change available)")
        elif delta < 0:
            actual = rate_x
            notes.append(f"balance rose by ${-delta:.4f} during the lab (a top-up?); using "
                         "costPerHr x billed seconds")
        else:
            actual = delta
            tolerance = max(0.01, 0.1 * rate_x)
            if abs(delta - rate_x) > tolerance:
                notes.append(f"balance change ${delta:.4f} differs from costPerHr x seconds "
                             f"${rate_x:.4f} (other pods on the account, or billing lag)")
            else:
                notes.append("balance change agrees with costPerHr x billed seconds")
        return CostReport(actual_usd=round(actual, 6), balance_delta_usd=delta,
                          rate_x_seconds_usd=round(rate_x, 6), billed_seconds=round(seconds, 3),
                          note="; ".join(notes))

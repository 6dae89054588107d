"""Spot pods and the balance, through the runpod SDK's GraphQL, for as long as RunPod serves them.

Why honest about it: the lab sheet asks for a spot-first lab, but REST v2 has no spot, spot left RunPod's
docs in 2026-05 and RunPod has said ``podRentInterruptable`` is being removed; the GraphQL API
itself is to be retired in early 2027. So before any money is authorized tplab asks (``offer``):

1. does the GraphQL schema still have ``podRentInterruptable``? Introspection first; RunPod
   refuses it in production, so then a document that names the mutation without its required
   argument, which GraphQL validates and never executes: "cannot query field" means it is
   gone, "argument ... required" that it is there (``None``: neither said);
2. the minimum bid on the secure cloud, ``lowestPrice(input: {gpuCount, secureCloud: true})``,
   so the bid and the create are on the same cloud (a null ``minimumBidPrice``: no spot now).

``rent`` creates the spot pod at ``max(bid, minimum)`` written so rounding cannot fall below the
minimum. An unknown mutation, GraphQL gone, or no spot capacity is ``SpotUnavailableError``
(nothing was created); a 5xx page or a timeout during the create is ``AmbiguousCreateError``
(RunPod may have made the pod). Never a silent switch to on-demand: that is the caller's
explicit choice (``--on-demand``). GraphQL itself gone (404, 410, a page that is not JSON:
``GraphqlGoneError``) is spot not offered at all, said so, and the balance unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tplab.cloud.runpod import graphql_ops as ops
from tplab.cloud.runpod import shapes
from tplab.cloud.base import (AmbiguousCreateError, AuthError, PodSpec, ProviderError,
                              SpotUnavailableError, TransientError, UnknownGpuError)
from tplab.cloud.runpod.sdk import ApiError, GraphqlGoneError, RunPodApi, with_retries
from tplab.keys.redact import error_text

_UNKNOWN_FIELD = ("cannot query field", "unknown field", "unknown argument")
_NO_CAPACITY = ("no longer any instances", "no instances", "not enough", "no available",
                "out of stock", "insufficient capacity")


@dataclass(frozen=True)
class SpotOffer:
    offered: bool | None            # the mutation exists (None: RunPod did not say)
    available: bool                 # a spot pod of this shape can be rented now
    min_bid_per_gpu: float | None   # USD per GPU-hour
    on_demand_per_gpu: float | None
    note: str = ""                  # why not available, one clause


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class Spot:
    """Spot and balance for one key and API URL (the SDK, serialized by sdk.RunPodApi)."""

    def __init__(self, api: RunPodApi, retry_delays: Sequence[float] = (1.0, 2.0)) -> None:
        self.api = api
        self.retry_delays = tuple(retry_delays)

    def _read(self, what: str, query: str) -> dict[str, Any]:
        return with_retries(lambda: self.api.graphql(what, query), self.retry_delays)

    def mutation_exists(self) -> bool | None:
        """Whether RunPod's schema still has ``podRentInterruptable`` (None: not said)."""
        try:
            data = self._read("asking whether spot still exists", ops.MUTATIONS_QUERY)
        except ApiError:  # introspection refused (production): ask the validator instead
            return self._mutation_validates()
        fields = ((data.get("__type") or {}).get("fields")) or []
        return any(f and f.get("name") == ops.SPOT_MUTATION for f in fields)

    def _mutation_validates(self) -> bool | None:
        """``ops.SPOT_PROBE`` names the mutation without its required input: invalid either
        way, so nothing runs, and the validation error says whether the field exists."""
        try:
            self._read("asking whether spot still exists", ops.SPOT_PROBE)
        except ApiError as exc:
            low = exc.api_message.lower()
            if any(h in low for h in _UNKNOWN_FIELD):
                return False
            return True if "required" in low and "argument" in low else None
        return None

    def offer(self, gpu_type: str, gpu_count: int) -> SpotOffer:
        """What spot RunPod offers right now for ``gpu_count`` x ``gpu_type`` (never raises for a
        missing spot: the answer says so; AuthError still raises)."""
        try:
            exists = self.mutation_exists()
        except AuthError:
            raise
        except GraphqlGoneError as exc:
            return SpotOffer(False, False, None, None,
                             f"RunPod no longer offers spot pods: its GraphQL API, the only way "
                             f"to rent them, is gone ({exc.why})")
        except ProviderError as exc:
            return SpotOffer(None, False, None, None,
                             f"RunPod's GraphQL API, the only way to rent spot, did not answer "
                             f"({error_text(exc)})")
        if exists is False:
            return SpotOffer(False, False, None, None,
                             "RunPod no longer offers spot pods (its API has no "
                             "podRentInterruptable)")
        try:
            data = self._read("quoting the spot price", ops.spot_quote_query(gpu_type, gpu_count))
        except AuthError:
            raise
        except ProviderError as exc:
            return SpotOffer(exists, False, None, None,
                             f"the spot price could not be read ({error_text(exc)})")
        gpu = next((t for t in data.get("gpuTypes") or [] if t and t.get("id") == gpu_type), None)
        if gpu is None:
            return SpotOffer(exists, False, None, None, f"RunPod quotes no spot for {gpu_type}")
        low = gpu.get("lowestPrice") or {}
        bid, ond = _float(low.get("minimumBidPrice")), _float(low.get("uninterruptablePrice"))
        max_count = gpu.get("maxGpuCount")
        if max_count is not None and gpu_count > int(max_count):
            return SpotOffer(exists, False, None, ond, f"{gpu_type} comes at most {max_count} "
                             "to a pod")
        if not bid or low.get("stockStatus") is None:
            return SpotOffer(exists, False, None, ond,
                             f"no spot capacity for {gpu_count}x {gpu_type} right now")
        return SpotOffer(exists, True, bid, ond)

    def rent(self, spec: PodSpec, min_bid_per_gpu: float,
             allowed_cuda: Sequence[str] = ()) -> dict[str, Any]:
        """Create the spot pod (on a host whose CUDA is in ``allowed_cuda``, when given);
        returns RunPod's answer (``id``, ``costPerHr`` ...)."""
        bid = ops.bid_literal(spec.bid_usd_per_gpu_hr or min_bid_per_gpu, min_bid_per_gpu)
        env = {"PUBLIC_KEY": spec.public_key.strip(), **spec.env}
        mutation = ops.spot_create_mutation(
            name=spec.name, image=shapes.image_of(spec), gpu_type=spec.gpu_type,
            gpu_count=spec.gpu_count, bid=bid, env=env, container_disk_gb=spec.container_disk_gb,
            args=shapes.container_args(spec), allowed_cuda=allowed_cuda)
        try:
            data = self.api.graphql("creating the spot pod", mutation)
        except ApiError as exc:
            low = exc.api_message.lower()
            if any(h in low for h in _UNKNOWN_FIELD):
                raise SpotUnavailableError(
                    "RunPod no longer offers spot pods (it answered the spot create as an unknown "
                    "mutation); nothing was created.") from None
            if any(h in low for h in _NO_CAPACITY):
                raise SpotUnavailableError(
                    f"RunPod has no spot capacity for {spec.gpu_count}x {spec.gpu_type} right "
                    "now; nothing was created.") from None
            if "gpu type" in low and "no" in low:
                raise UnknownGpuError(f"RunPod offers no GPU type named {spec.gpu_type!r}; "
                                      "nothing was created.") from None
            raise
        except AuthError:
            raise
        except TransientError as exc:
            cause = ("no answer in time" if "in time" in str(exc) else
                     "an error page, not GraphQL" if "error page" in str(exc) else
                     "no connection")
            raise AmbiguousCreateError(f"{exc} The spot pod may have been created anyway.",
                                       spec.name, cause) from None
        pod = data.get(ops.SPOT_MUTATION)
        if not isinstance(pod, dict) or not pod.get("id"):
            raise AmbiguousCreateError("RunPod answered the spot create without a pod id.",
                                       spec.name, "an answer without a pod id")
        return pod

    def balance(self) -> float | None:
        me = self._read("reading the account balance", ops.BALANCE_QUERY).get("myself") or {}
        return _float(me.get("clientBalance"))

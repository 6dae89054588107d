"""The Vast.ai provider: tplab's Provider protocol on Vast's interruptible (bid) instances.

One implementation for real and mock: in mock mode it is pointed at the local mock Vast cloud.

- Quote: the cheapest interruptible offer (``type: "bid"``) for the GPU type and count whose
  host can run the image (``host_fit``: the driver's ``cuda_max_good``, the GPU's kernels), its
  minimum bid per machine plus the disk's storage; the cheapest on-demand offer beside it (for
  the EDUCATIONAL_STUB's analysis). No offer of either kind for that GPU name: an unknown GPU.
- Create: search again (offers move), keep the offers whose host can run the image (none:
  ``ImageMismatchError``, nothing rented), bid the cheapest one's minimum (refused when it rose
  above what the lab authorized), ``PUT /api/v0/asks/{offer}`` with ``price`` and ``runtype:
  ssh_direct``; the instance is read back at once and must be the interruptible rental at
  that bid (``is_bid``, ``dph_base``: the answer never says, and a create without ``price``
  rents on demand), else it is destroyed, verified gone and the lab told in one sentence
  (``RentalMismatchError``); then attach the lab's fresh SSH key to *this* instance (``POST
  /api/v0/instances/{id}/ssh``): never to the account, where it would open every later
  instance. An answer ``success: false`` that still names ``new_contract`` (a failed bid leaves
  a stopped instance) is destroyed before the error is raised; an ambiguous create (5xx,
  timeout) is ``AmbiguousCreateError`` and the lab looks for the instance by label.
- status: ``GET /api/v0/instances/{id}`` (``{"instances": null}`` or 404: gone); list:
  ``GET /api/v1/instances`` (``next_token`` followed to the end, 25 a page), tplab's labels
  only: every listing (status, leftovers, terminate --all, the name lookup after an ambiguous
  create, verify_gone) reads it; the v0 list is deprecated and never called.
- wait_ready: poll until running with an SSH endpoint and a real handshake; exited, unknown,
  offline or paused (outbid) never reach running: destroyed, one sentence.
- terminate: ``DELETE /api/v0/instances/{id}`` (404: gone), retried; verify_gone asks show
  and list, never the destroy's answer alone.
- actual_cost: Vast's charges for ``instance-<id>`` when it has them, never below the price x
  the client's window (``tplab.cloud.spend``).

Methods are synchronous; the orchestrator calls them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any, Callable, Sequence

from tplab.cloud.base import (DEAD_STATES, GONE_STATES, INTERRUPTED, POD_NAME_PREFIX,
                              ImageMismatchError, LeftBehindError, NoCapacityError, PodInfo,
                              PodSpec, ProviderError, Quote, RentalMismatchError,
                              SpotUnavailableError, UnknownGpuError)
from tplab.cloud.image_fit import choose_image
from tplab.cloud.pod_lifecycle import PodLifecycle, Words
from tplab.cloud.vast import self_end as pod_self_end
from tplab.cloud.vast import host_fit, shapes
from tplab.cloud.vast.http_api import (DEFAULT_API_BASE_URL, OfferMovedError, VastApi,
                                       invalid_args)
from tplab.keys.redact import error_text

#: the v1 list's page size (its maximum) and how many pages tplab reads before it gives up
PAGE, MAX_PAGES = 25, 200
#: a bid this much over the minimum is not outbid by the next renter's rounding
BID_MARGIN = 1.02
#: reads of a new instance before its rental is called unconfirmable
READBACK_TRIES = 3
#: a destroy answered with one of these errors means the instance is already gone
GONE_ERRORS = ("no_such_instance", "not_found")
#: offers tried when the cheapest moves between search and create (taken, repriced)
OFFER_TRIES = 3
#: the offer search asks in price order and sees this many offers: Vast answers 64 without a
#: limit, in its own order, and the cheapest offer that can run the lab may come far down
SEARCH_LIMIT = 1000


class VastProvider(PodLifecycle):
    """See the module docstring; waiting, destroying, the gone proof and the cost are
    ``PodLifecycle``'s, in Vast's words."""

    words = Words(noun="instance", verb="destroy", gerund="destroying", done="destroyed",
                  still="billing",
                  by_hand=("destroy it in the Vast console or with `tplab terminate {pod_id} "
                           "--provider vast`"),
                  bill="Vast's charges", billed_by="Vast's charges")

    name = "vast"
    label = "Vast.ai"

    def __init__(self, api_key: str, api_base_url: str | None = None, *,
                 poll_interval_s: float = 2.0, ssh_probe_timeout_s: float = 10.0,
                 client_key: Any = None, retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
                 rate_limit_tries: int = 6,
                 terminate_delays: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 timeout_s: float = 30.0, disk_gb: int = 20, key_source: str = "",
                 pace_scale: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._api = VastApi(api_key, (api_base_url or DEFAULT_API_BASE_URL).rstrip("/"),
                            timeout_s=timeout_s, retry_delays=retry_delays,
                            rate_limit_tries=rate_limit_tries, key_source=key_source,
                            pace_scale=pace_scale, sleep=sleep)
        #: where a long call says what it is doing (the lab's log; called from a worker thread)
        self.on_note: Callable[[str], None] = lambda note: None
        self.poll_interval_s = poll_interval_s
        self.ssh_probe_timeout_s = ssh_probe_timeout_s
        self.client_key = client_key
        self.terminate_delays = tuple(terminate_delays)
        self.disk_gb = disk_gb
        self._sleep = sleep

    def __repr__(self) -> str:  # never the key
        return f"VastProvider(api={self.api_base_url!r})"

    @property
    def api_base_url(self) -> str:
        return self._api.base_url

    def self_end(self) -> dict[str, Any]:
        """How this provider's instances end themselves (``self_end.py``), on this API's URL."""
        return pod_self_end.self_end(self.api_base_url)

    # ---- reads ---------------------------------------------------------------------------
    def offers(self, gpu_type: str, gpu_count: int, kind: str = "bid") -> list[dict[str, Any]]:
        """Every offer of this shape, cheapest first (``SEARCH_LIMIT`` of them)."""
        ans = self._api.call(f"searching {kind} offers", "POST", "/api/v0/bundles",
                             json=shapes.search_body(gpu_type, gpu_count, kind, SEARCH_LIMIT))
        return [o for o in (ans.body or {}).get("offers") or [] if isinstance(o, dict)]

    @property
    def rate_limited(self) -> int:
        """The 429s this provider met (it paces its calls: none, unless another client on the
        same key, or a tighter limit, got in the way)."""
        return self._api.rate_limited

    def _unknown_gpu(self, gpu_type: str) -> UnknownGpuError:
        return UnknownGpuError(
            f"Vast.ai has no offer at all for a GPU named {shapes.vast_gpu_name(gpu_type)!r}; "
            "use Vast's name, such as 'RTX 4090' or 'H100 SXM' (`tplab check --provider vast "
            "--gpu-type ...` quotes it).")

    def quote(self, gpu_type: str, gpu_count: int, image: str = "") -> Quote:
        """The cheapest offers that can run ``image`` (default: the catalog's for the GPU):
        ``host_fit`` judges each offer's host (the cheapest in ``hosts``); interruptible offers
        that all cannot run it leave no spot price and say why in ``spot_note``; when no offer
        of either kind can, ``image_refusal`` says why."""
        choice = choose_image(self.name, gpu_type, image or None)
        bid_offers = host_fit.judge(self.offers(gpu_type, gpu_count, "bid"), "bid",
                                     self.disk_gb, choice, gpu_type)
        ond_offers = host_fit.judge(self.offers(gpu_type, gpu_count, "ondemand"), "ondemand",
                                     self.disk_gb, choice, gpu_type)
        if not bid_offers and not ond_offers:
            anyone = self._api.call("searching offers", "POST", "/api/v0/bundles", json={
                "gpu_name": {"in": [shapes.vast_gpu_name(gpu_type)]}, "limit": 1})
            if not (anyone.body or {}).get("offers"):
                raise self._unknown_gpu(gpu_type)
        bid = host_fit.cheapest_runnable(bid_offers)
        ond = host_fit.cheapest_runnable(ond_offers)
        bid_refusal = host_fit.refusal(bid_offers, choice, gpu_count, gpu_type, "interruptible")
        # no offer of either kind can run the image: the lab is refused, not a stub
        refusal = "" if bid or ond else (bid_refusal or host_fit.refusal(
            ond_offers, choice, gpu_count, gpu_type, "on-demand"))
        note = (f"no interruptible offer whose host can run {choice.image}" if refusal else
                bid_refusal or ("" if bid else (f"no interruptible offer for {gpu_count}x "
                                                f"{shapes.vast_gpu_name(gpu_type)} on Vast.ai "
                                                "right now")))
        return Quote(gpu_type=gpu_type, gpu_count=gpu_count,
                     spot_usd_per_hr=round(bid.price * BID_MARGIN, 6) if bid else None,
                     spot_price_note=self._bid_note(bid) if bid else "",
                     on_demand_usd_per_hr=ond.price if ond else None,
                     spot_available=bid is not None, on_demand_available=ond is not None,
                     availability=None, spot_offered=True, spot_note=note, provider=self.name,
                     image=choice.image, hosts=host_fit.host_offers(bid_offers or ond_offers),
                     image_refusal=refusal)

    def _bid_note(self, bid: host_fit.JudgedOffer) -> str:
        """What tplab's bid on ``bid`` is made of: the offer's minimum bid (what Vast's CLI shows
        as its price), its disk's storage, and the margin above them."""
        minimum = shapes._float(bid.offer.get("min_bid")) or 0.0
        return (f"tplab's bid, ${bid.price * BID_MARGIN:.3f}/h: offer {bid.offer['id']}'s minimum "
                f"bid ${minimum:.3f}/h + storage ${bid.price - minimum:.3f}/h ({self.disk_gb} GB), "
                f"+ {BID_MARGIN - 1:.0%} so a bid at the minimum is not outbid at once")

    def balance(self) -> float | None:
        """The account's dollars left: ``credit``, as Vast's own tools read it (its CLI's
        ``show user``, its agent plugin's cost command: a test's spend is the change in
        credit); the documented ``balance`` field is not that (a community script saw it near
        -$4: what the account owes), so it is never read as the balance."""
        me = self._api.call("reading the account balance", "GET", "/api/v0/users/current").body
        return shapes._float((me or {}).get("credit"))

    def _instance(self, pod_id: str) -> dict[str, Any] | None:
        ans = self._api.call("reading the instance", "GET", f"/api/v0/instances/{pod_id}")
        inst = (ans.body or {}).get("instances") if ans.found else None
        return inst if isinstance(inst, dict) and inst else None

    def status(self, pod_id: str) -> PodInfo:
        inst = self._instance(pod_id)
        if inst is None:
            return PodInfo(id=pod_id, name="", state="GONE")
        return shapes.pod_info(inst)

    def list_pods(self) -> list[PodInfo]:
        """tplab's instances, from every page of ``GET /api/v1/instances`` (the one list Vast
        answers: the v0 list is deprecated). An answer without a list of instances, or pages
        that never end, is an error, never "no instances": instances a list misses still bill."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": PAGE}
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            body = self._api.call("listing instances", "GET", "/api/v1/instances",
                                  params=params).body
            page = body.get("instances") if isinstance(body, dict) else None
            if not isinstance(page, list):
                raise ProviderError(
                    "Vast.ai answered the instance list (GET /api/v1/instances) without a list "
                    f"of instances ({shapes_detail(body if isinstance(body, dict) else {})}); "
                    "tplab does not read that as 'no instances'.")
            found += [i for i in page if isinstance(i, dict)]
            token = body.get("next_token")
            if not token:
                break
            if str(token) in seen:
                raise ProviderError(f"Vast.ai's instance list gave the page token {token!r} "
                                    "twice; the list could not be read to its end.")
            seen.add(str(token))
            params = {"limit": PAGE, "after_token": token}
        else:
            raise ProviderError(f"Vast.ai's instance list did not end within {MAX_PAGES} pages "
                                f"of {PAGE}; tplab's instances could not all be read.")
        return [shapes.pod_info(i) for i in found
                if str(i.get("label") or "").startswith(POD_NAME_PREFIX)]

    # ---- create --------------------------------------------------------------------------
    def create(self, spec: PodSpec) -> PodInfo:
        if not spec.name.startswith(POD_NAME_PREFIX):
            raise ValueError(f"pod names must start with {POD_NAME_PREFIX!r}: {spec.name!r}")
        if not spec.public_key.strip():
            raise ProviderError("The instance needs the lab's SSH public key (PodSpec."
                                "public_key); without it nobody could log in.")
        kind = "bid" if spec.spot else "ondemand"   # on-demand only when asked by name
        what = "interruptible" if spec.spot else "on-demand"
        choice = choose_image(self.name, spec.gpu_type, spec.image or None)
        spec = dataclasses.replace(spec, image=choice.image)
        passed: set[str] = set()     # offers that moved under this lab: not tried again
        tries: list[str] = []
        for attempt in range(OFFER_TRIES):
            judged = [j for j in host_fit.judge(
                self.offers(spec.gpu_type, spec.gpu_count, kind), kind, spec.container_disk_gb,
                choice, spec.gpu_type) if str(j.offer["id"]) not in passed]
            refusal = host_fit.refusal(judged, choice, spec.gpu_count, spec.gpu_type, what)
            if refusal:  # offers there are, but none whose host can run the image
                raise ImageMismatchError(f"{refusal[0].upper()}{refusal[1:]}; nothing was "
                                         "created.")
            best = host_fit.cheapest_runnable(judged)
            if best is None:
                error = SpotUnavailableError if spec.spot else NoCapacityError
                raise error(f"Vast.ai has no {what} offer for {spec.gpu_count}x "
                            f"{shapes.vast_gpu_name(spec.gpu_type)} right now"
                            + (f" (tried: {'; '.join(tries)})" if tries else "")
                            + "; nothing was created.")
            try:
                return self._rent(spec, best.offer, best.price)
            except OfferMovedError as exc:
                passed.add(str(best.offer["id"]))
                tries.append(f"offer {best.offer['id']}: HTTP {exc.status} {exc.error}")
                self.on_note(f"Vast.ai would not rent offer {best.offer['id']} as quoted (HTTP "
                             f"{exc.status} {exc.error}: taken, or its price moved); nothing was "
                             f"created; searching again (try {attempt + 2} of {OFFER_TRIES})"
                             if attempt + 1 < OFFER_TRIES else
                             f"Vast.ai would not rent offer {best.offer['id']} as quoted (HTTP "
                             f"{exc.status} {exc.error}); that was the last of {OFFER_TRIES} "
                             "tries")
        raise SpotUnavailableError(
            f"Vast.ai would not rent any of the {OFFER_TRIES} cheapest {what} offers that fit "
            f"as quoted ({'; '.join(tries)}: each taken or repriced between search and "
            "create); nothing was created.")

    def _rent(self, spec: PodSpec, offer: dict[str, Any], price: float) -> PodInfo:
        """Rent ``offer`` (quoted at ``price`` per hour, storage included) for ``spec``; an
        offer that moved is ``OfferMovedError`` with nothing created."""
        bid = round(price * BID_MARGIN, 6) if spec.spot else price
        cap = (spec.bid_usd_per_gpu_hr * spec.gpu_count) if spec.bid_usd_per_gpu_hr else None
        if cap is not None and bid > cap + 1e-6:
            raise SpotUnavailableError(
                f"the cheapest interruptible bid on Vast.ai rose to ${bid:.3f}/h, above the "
                f"${cap:.3f}/h the lab authorized; nothing was created.")
        storage = price - (shapes._float(offer.get("min_bid")) or 0.0)
        machine_bid = max(0.001, round(bid - storage, 6)) if spec.spot else None
        ans = self._api.call(f"renting offer {offer['id']}", "PUT", f"/api/v0/asks/{offer['id']}",
                             json=shapes.create_body(spec, machine_bid), create_label=spec.name)
        body = ans.body if isinstance(ans.body, dict) else {}
        contract = body.get("new_contract")
        if not ans.found:   # a 404 Vast did not explain: the offer is not there
            raise OfferMovedError(f"Vast.ai answered HTTP 404 for offer {offer['id']} "
                                  f"({shapes_detail(body)}).", 404, "not_found")
        if not body.get("success") or not contract:
            why = shapes_detail(body)
            at = f" at ${machine_bid:.3f}/h" if machine_bid is not None else ""
            if str(body.get("error") or "") == "invalid_args" and not contract:
                raise invalid_args(f"renting offer {offer['id']}", why)
            if contract:  # a failed bid still made an instance: ended now, proven by the lab
                with contextlib.suppress(ProviderError):
                    self.end_once(str(contract))
                raise LeftBehindError(
                    f"Vast.ai did not rent offer {offer['id']}{at} ({why}) and left instance "
                    f"{contract} behind, stopped and billing its storage; it is destroyed now",
                    PodInfo(id=str(contract), name=spec.name, state="INTERRUPTED",
                            gpu_type=spec.gpu_type, gpu_count=spec.gpu_count, spot=True,
                            usd_per_hr=bid))
            raise SpotUnavailableError(f"Vast.ai did not rent offer {offer['id']}{at} ({why}); "
                                       "nothing was created.")
        pod_id = str(contract)
        read: dict[str, Any] | None = None
        if machine_bid is not None:
            read = self._check_rental(pod_id, spec, machine_bid)
        try:
            self._api.call("attaching the lab's SSH key to the instance", "POST",
                           f"/api/v0/instances/{pod_id}/ssh",
                           json={"ssh_key": spec.public_key.strip()})
        except ProviderError as exc:
            self._destroy_leftover(pod_id, f"its SSH key could not be attached: {error_text(exc)}")
            raise ProviderError(f"Vast.ai rented instance {pod_id} but would not attach the "
                                f"lab's SSH key ({error_text(exc)}); it has been destroyed.") \
                from None
        try:   # the read-back is the instance as it is now (a show is paced: 2 s apart)
            info = shapes.pod_info(read) if read is not None else self.status(pod_id)
        except ProviderError:
            info = PodInfo(id=pod_id, name=spec.name, state="PROVISIONING")
        return dataclasses.replace(info, name=info.name or spec.name, spot=spec.spot,
                                   gpu_type=info.gpu_type or spec.gpu_type,
                                   gpu_count=info.gpu_count or spec.gpu_count,
                                   usd_per_hr=info.usd_per_hr or bid)

    def _check_rental(self, pod_id: str, spec: PodSpec, bid: float) -> dict[str, Any]:
        """Read the new instance back (and return it): Vast's answer to a create never says
        which rental it made, and an on-demand one bills at the full price. Anything but the
        interruptible rental at the bid is destroyed at once, its end verified, and the lab
        told in one sentence (``RentalMismatchError``, carrying the instance for the lab's
        teardown)."""
        inst: dict[str, Any] | None = None
        for attempt in range(READBACK_TRIES):
            try:
                inst = self._instance(pod_id)
            except ProviderError as exc:
                why = f"it could not be read back ({error_text(exc)})"
                inst = None
            else:
                why = "did not show it when it was read back"
            if inst is not None:
                break
            if attempt + 1 < READBACK_TRIES:
                self._sleep(self.poll_interval_s)
        problem = shapes.rental_problem(inst, bid) if inst is not None else None
        if inst is not None and problem is None:
            return inst
        what = problem or f"made it, but {why}"
        info = shapes.pod_info(inst) if inst is not None else PodInfo(
            id=pod_id, name=spec.name, state="PROVISIONING")
        raise RentalMismatchError(self._ended(pod_id, (
            f"tplab bid ${bid:.3f}/h for an interruptible instance and Vast.ai {what} "
            f"(instance {pod_id})")), dataclasses.replace(info, name=info.name or spec.name))

    def _ended(self, pod_id: str, what: str) -> str:
        """Destroy the instance now and verify it gone; the sentence that says how it ended."""
        started = time.monotonic()
        try:
            self.terminate(pod_id)
            proof = self.verify_gone(pod_id)
        except ProviderError as exc:
            return (f"{what}; destroying it failed ({error_text(exc)}): the lab's teardown "
                    "tries again, or destroy it in the Vast console.")
        took = time.monotonic() - started
        if not proof.gone:
            return (f"{what}; it was destroyed but Vast.ai still shows it: the lab's teardown "
                    "checks again, or destroy it in the Vast console.")
        return (f"{what}; it was destroyed at once and verified gone (in {took:.1f} s), so only "
                "those seconds are billed, and nothing was measured.")

    def _destroy_leftover(self, pod_id: str, why: str) -> None:
        try:
            self.terminate(pod_id)
        except ProviderError as exc:
            raise ProviderError(
                f"Vast.ai left instance {pod_id} behind ({why}) and destroying it failed "
                f"({error_text(exc)}); destroy it in the Vast console or with `tplab terminate "
                f"{pod_id} --provider vast`.") from None

    # ---- the lifecycle's Vast parts (tplab.cloud.pod_lifecycle) ------------------------------
    def _why_dead(self, info: PodInfo) -> str | None:
        if info.state in DEAD_STATES | GONE_STATES | {INTERRUPTED}:
            return info.note or "it will not reach running"
        return None

    def _probe_timeout(self, info: PodInfo, remaining: float) -> float | None:
        if info.state != "RUNNING":
            return None
        return max(0.5, min(self.ssh_probe_timeout_s, remaining))

    def _delete(self, pod_id: str, once: bool = False) -> None:
        """``{"success": true}`` or a 404 (already gone) is accepted; an answer that says
        ``success: false`` is a refusal (Vast's words), unless its error is that there is no
        such instance (dstack reads Vast's destroy the same way)."""
        ans = self._api.call("destroying the instance", "DELETE", f"/api/v0/instances/{pod_id}",
                             once=once)
        body = ans.body if isinstance(ans.body, dict) else {}
        if ans.found and body.get("success") is False \
                and str(body.get("error") or "") not in GONE_ERRORS:
            raise ProviderError(f"Vast.ai refused to destroy instance {pod_id} "
                                f"({shapes_detail(body)}).")

    def _record(self, pod_id: str) -> dict[str, Any] | None:
        inst = self._instance(pod_id)
        if inst is None:
            return None
        info = shapes.pod_info(inst)
        return {**info.raw, "status": info.state}

    # ---- cost ----------------------------------------------------------------------------
    def charges_usd(self, pod_id: str, since: float, until: float) -> float | None:
        """The instance's charges on Vast (None: no record of it yet)."""
        day = int(since // 86400 * 86400)
        filters = {"day": {"gte": day, "lte": int(until) + 86400}, "type": {"in": ["instance"]}}
        ans = self._api.call("reading the instance's charges", "GET", "/api/v0/charges",
                             params={"select_filters": json.dumps(filters)})
        return shapes.charges_total((ans.body or {}).get("results") or [], pod_id)

    def _billed_usd(self, pod_id: str, started_at: float, ended_at: float) -> float | None:
        return self.charges_usd(pod_id, started_at, ended_at)


def shapes_detail(body: dict[str, Any]) -> str:
    from tplab.cloud.vast.http_api import detail
    return detail(body) if body else "no answer"

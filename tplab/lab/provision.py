"""Getting a pod: authorize the spend, create the pod (intent recorded first), boot it until SSH.

Why the order matters: money is authorized in the ledger before any pod exists; the instance
record is written *before* the create call (a crash mid-call still leaves a trace the next start
finds) and gets the pod id the moment the provider answers; the create call runs as a future
that teardown can still await, so a stop during create still learns the pod id and ends it.
A create that fails ambiguously (a 5xx or a timeout) may still have made a billing pod, so it is
looked for by name before anything is called "not created".
"""

from __future__ import annotations

import asyncio
import time

from tplab.cloud.base import (GONE_STATES, INTERRUPTED, POD_NAME_PREFIX, AmbiguousCreateError, AuthError,
                              BootStep, LeftBehindError, NoCapacityError, PodInfo, PodSpec,
                              ProviderError, RentalMismatchError, SpotUnavailableError)
from tplab.lab import instances
from tplab.lab.lab_config import FAILED, STOPPED, STUB, LabStop
from tplab.lab.lab_config import INTERRUPTED as LAB_INTERRUPTED
from tplab.lab.context import LabContext
from tplab.keys.redact import one_line
from tplab.lab.guard_payload import boot_step
from tplab.records.self_end import encode


async def authorize(ctx: LabContext) -> None:
    """Hold the lab cap in the ledger (BudgetGuard.authorize), and note the balance before.

    The ledger write runs in a thread that a stop cannot interrupt; the call is kept as a future
    (``money.pending_auth``) so that teardown learns the id of a hold written while the lab was
    being stopped, and releases it, instead of leaving it open."""
    from tplab.money.budget import BudgetGuardExceeded
    cfg, money = ctx.config, ctx.facts.money
    guard = money.guard
    if guard is None or money.caps is None:  # the pre-flight opens the ledger first; never authorize without it
        raise LabStop(FAILED, "the budget ledger was not opened before authorizing; nothing was "
                              "created")
    lab_cap = money.lab_cap_usd
    ctx.stream.phase("authorize", amount_usd=lab_cap, label=cfg.ledger_label())
    money.pending_amount = lab_cap
    money.pending_auth = asyncio.ensure_future(
        asyncio.to_thread(guard.authorize, cfg.ledger_label(), lab_cap))
    try:
        money.auth_id = await asyncio.shield(money.pending_auth)
    except BudgetGuardExceeded as exc:
        raise LabStop(FAILED, one_line(str(exc))) from None
    money.authorized_usd = lab_cap
    ctx.budget_event()
    try:
        money.balance_before = await asyncio.to_thread(ctx.cloud.balance)
    except ProviderError:
        money.balance_before = None


def adopt_pod(ctx: LabContext, info: PodInfo) -> None:
    """The provider answered with a pod: it is this lab's from now on (record, event)."""
    pod = ctx.facts.pod
    pod.info = info
    pod.id = info.id
    pod.created_at = time.time()
    if info.usd_per_hr:
        pod.usd_per_hr = float(info.usd_per_hr)
    if pod.record is not None:
        pod.record.pod_id = info.id
        pod.record.state = instances.CREATED
        pod.record.created_at = pod.created_at
        ctx.save_record()
    ctx.instance_event(info)


class Creation:
    """The create call in flight, so teardown can wait for its answer (``pending``)."""

    def __init__(self) -> None:
        self.future: asyncio.Future | None = None

    @property
    def pending(self) -> bool:
        return self.future is not None


async def create(ctx: LabContext, creation: Creation, public_key: str) -> PodInfo:
    """Write the intent record, then create the pod. No spot (or no capacity) is a STUB with
    nothing created; an ambiguous answer (a 5xx or a timeout: RunPod may have made the pod
    anyway) keeps the INTENT record and the authorization and looks for the pod by name
    (``find_after_ambiguous_create``): found, it is adopted and the lab stops so that teardown
    terminates it; a failure to list is "unknown", never "not created". A pod made but not the
    rental asked for (an interruptible bid rented on demand: ``RentalMismatchError``, the
    provider has already destroyed it) is adopted too, so teardown verifies it gone and
    settles what it cost."""
    cfg, facts = ctx.config, ctx.facts
    ctx.stream.phase("create")
    name = f"{POD_NAME_PREFIX}{facts.lab_id}"
    facts.pod.record = instances.InstanceRecord(
        lab_id=facts.lab_id, label=cfg.ledger_label(), pod_name=name,
        provider=ctx.provider_name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
        spot=cfg.spot, usd_per_hr=facts.pod.usd_per_hr, out_dir=str(facts.out_dir),
        mock=cfg.mock, image=facts.pod.image.image if facts.pod.image else None)
    if not ctx.save_record():
        raise LabStop(FAILED, "the instance record could not be written (see the warning); "
                      "without it a crash could leave a pod nobody finds, so nothing was created")
    price = facts.pod.usd_per_hr
    spec = PodSpec(name=name, gpu_type=cfg.gpu_type, gpu_count=cfg.gpus,
                   public_key=public_key, spot=cfg.spot,
                   bid_usd_per_gpu_hr=(price / cfg.gpus) if (cfg.spot and price) else None,
                   image=facts.pod.image.image if facts.pod.image else "",
                   boot=_boot_step(ctx))
    if hasattr(ctx.cloud, "on_note"):  # what a long create does (an offer tried again) is logged
        loop = asyncio.get_running_loop()
        ctx.cloud.on_note = lambda note: loop.call_soon_threadsafe(ctx.stream.log, note,
                                                                   "warning")
    creation.future = asyncio.ensure_future(asyncio.to_thread(ctx.cloud.create, spec))
    try:
        info = await asyncio.shield(creation.future)
    except LeftBehindError as exc:  # no spot, yet an instance left: the teardown proves its end
        adopt_pod(ctx, exc.info)
        raise LabStop(STUB, one_line(
            f"{str(exc).rstrip('. ')}; the lab is spot-first and never switches to on-demand "
            "by itself")) from None
    except SpotUnavailableError as exc:
        from tplab.lab.preflight import spot_stub_reason
        assert facts.money.caps is not None  # the pre-flight resolved them before authorize
        raise LabStop(STUB, one_line(spot_stub_reason(cfg, facts.money.quote, str(exc),
                                                      facts.money.caps))) from None
    except NoCapacityError as exc:
        raise LabStop(STUB, one_line(f"{exc} Nothing was created.")) from None
    except RentalMismatchError as exc:  # made, but not the rental asked for: already ended
        adopt_pod(ctx, exc.info)        # by the provider; teardown verifies it and settles
        raise LabStop(FAILED, one_line(exc)) from None
    except AmbiguousCreateError as exc:
        found = await find_after_ambiguous_create(ctx, exc)
        adopt_pod(ctx, found)
        raise LabStop(FAILED, one_line(
            f"{_label(ctx)} answered the create with an error ({exc.cause}), yet it made pod "
            f"{found.id} named {name}: found by its name, the lab stops and terminates "
            "it")) from None
    except (AuthError, ProviderError) as exc:  # refused (400/402/403/422/429 ...): no pod
        msg = str(exc).rstrip(". ")
        if "nothing was created" not in msg.lower():
            msg += "; nothing was created"
        raise LabStop(FAILED, one_line(msg)) from None
    adopt_pod(ctx, info)
    return info


def _label(ctx: LabContext) -> str:
    return getattr(ctx.provider, "label", None) or ctx.provider_name


def self_end_arg(ctx: LabContext) -> str:
    """How the lab's pod ends itself (the provider's description, one shell-safe word)."""
    assert ctx.provider is not None
    return encode(ctx.provider.self_end())


def _boot_step(ctx: LabContext) -> BootStep | None:
    """The pod's boot guard, started with its container by the provider's create
    (``tplab.job.boot_guard``, packed by ``tplab.lab.guard_payload``); None without a guard."""
    cfg = ctx.config
    if not cfg.boot_guard:
        return None
    path, payload, command = boot_step(cfg.guard_bound_s(), cfg.wall_cap_s,
                                       cfg.heartbeat_timeout_s, self_end_arg(ctx))
    return BootStep(path=path, payload_b64=payload, command=command)


async def find_after_ambiguous_create(ctx: LabContext, exc: AmbiguousCreateError) -> PodInfo:
    """Look for the pod named ``exc.pod_name`` for ``create_lookup_s`` (new pods can take a while
    to show in RunPod's list). Returns it when found; else a LabStop: "not created" when the
    list was read and never showed it, "unknown" when it could not be read (then the INTENT
    record and the authorization stay open: settle keeps them)."""
    cfg, pod = ctx.config, ctx.facts.pod
    name = exc.pod_name
    who = _label(ctx)
    ctx.stream.warn(one_line(f"{who} answered the create with an error ({exc.cause}); looking "
                             f"for a pod named {name} for {cfg.create_lookup_s:.0f} s before "
                             "calling it not created"))
    deadline = time.monotonic() + cfg.create_lookup_s
    listed_once = False
    last_error = ""
    while True:
        try:
            pods = await asyncio.to_thread(ctx.cloud.list_pods)
            listed_once = True
            match = next((p for p in pods if p.name == name and
                          p.state.upper() not in GONE_STATES), None)
            if match is not None:
                return match
        except AuthError:
            raise
        except ProviderError as err:
            last_error = one_line(err)
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(min(2.0, max(0.2, cfg.create_lookup_s / 20)))
    if listed_once and not last_error:
        raise LabStop(FAILED, one_line(
            f"{who} answered the create with an error ({exc.cause}); no pod named {name} "
            f"appeared in its pod list within {cfg.create_lookup_s:.0f} s, so none was created"))
    pod.creation_unknown = True
    raise LabStop(FAILED, one_line(
        f"{who} answered the create with an error ({exc.cause}) and its pod list could not "
        f"be read ({last_error or 'no answer'}): whether a pod named {name} exists is UNKNOWN; run "
        f"`tplab status{' --mock' if cfg.mock else ''}` (or look in the {who} console) and "
        "terminate it if it is there; the instance record and the authorization stay open"))


async def boot(ctx: LabContext) -> PodInfo:
    """Poll the pod until it is RUNNING with an SSH endpoint (within the boot timeout); a stop
    request is honoured at once because this is a plain loop of short awaits."""
    cfg, pod = ctx.config, ctx.facts.pod
    assert ctx.provider is not None and pod.id is not None
    ctx.stream.phase("boot")
    started = time.monotonic()
    deadline = started + cfg.boot_timeout_s
    last_state, last_ssh = None, None
    while True:
        try:
            info = await asyncio.to_thread(ctx.provider.status, pod.id)
        except AuthError:
            raise
        except ProviderError as exc:  # a passing API error: keep waiting, within the bound
            ctx.stream.log(f"reading the pod's status failed ({exc}); retrying", "warning")
            if time.monotonic() > deadline:
                raise LabStop(FAILED, f"the pod {pod.id} could not be read within "
                              f"{cfg.boot_timeout_s:.0f} s ({exc})") from None
            await asyncio.sleep(1.0)
            continue
        if info.state != last_state or info.ssh != last_ssh:
            # on every state change, and once more when SSH appears: the `ready` event
            # carries ssh_host, ssh_port and uptime_s
            last_state, last_ssh = info.state, info.ssh
            pod.info = info
            ctx.instance_event(info)
        if info.state.upper() == "ERROR":
            raise LabStop(FAILED, f"the pod {pod.id} went ERROR while booting "
                          f"({info.note or _label(ctx) + ' could not start its container'}); "
                          "the lab terminates it")
        if info.state.upper() == INTERRUPTED:
            raise LabStop(LAB_INTERRUPTED, f"spot interruption while booting: the pod {pod.id} went "
                          f"{info.state} ({info.note or 'its provider took it back'}); the lab "
                          "terminates it")
        if info.state.upper() in GONE_STATES or info.state.upper() == "EXITED":
            outside = await asyncio.to_thread(ctx.ended_from_outside, info.state)
            if outside:  # `tplab terminate` from another shell: the user's own stop
                raise LabStop(STOPPED, f"stopped by the user ({outside})")
            raise LabStop(FAILED, f"the pod {pod.id} went {info.state} while booting "
                          f"({info.note or 'spot interruption?'})")
        if info.state.upper() == "RUNNING" and info.ssh is not None:
            pod.info = info
            if pod.record is not None:
                pod.record.ssh_host, pod.record.ssh_port = info.ssh.host, info.ssh.port
                ctx.save_record()
            return info
        if time.monotonic() > deadline:
            if info.state.upper() == "RUNNING" and info.ssh is None:
                raise LabStop(FAILED, f"the pod {pod.id} was running but never got a public SSH "
                              f"port within {cfg.boot_timeout_s:.0f} s, so the lab cannot reach "
                              "it; the lab terminates it (try another GPU type or region)")
            raise LabStop(FAILED, f"the pod {pod.id} was not ready within "
                          f"{cfg.boot_timeout_s:.0f} s")
        # quick at first (the mock boots in a second), then every 2 s: a real pod pulls its
        # image for minutes, and RunPod's API rate-limits a client that asks four times a second
        await asyncio.sleep(min(2.0, 0.25 + (time.monotonic() - started) / 20))

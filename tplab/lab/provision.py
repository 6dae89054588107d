"""Getting a pod: authorize the spend, create the pod (intent recorded first), boot it until SSH.

Why the order matters: money is authorized in the ledger before any pod exists (the lab's money,
``LabMoney.authorize``); the instance record is written *before* the create call and gets the
pod id the moment the provider answers, and the create runs as a future the teardown can still
await (the lab's pod, ``LabPod``). A create that fails ambiguously (a 5xx or a timeout) may
still have made a billing pod, so it is looked for by name before anything is called "not
created". What each of the provider's answers means for the lab (a STUB, a FAILED lab, a pod to
adopt and end) is this module's.
"""

from __future__ import annotations

import asyncio
import time

from tplab.cloud.base import (GONE_STATES, INTERRUPTED, AmbiguousCreateError, AuthError,
                              LeftBehindError, NoCapacityError, PodInfo, Provider, ProviderError,
                              RentalMismatchError, SpotUnavailableError)
from tplab.keys.redact import one_line
from tplab.lab.lab_config import FAILED, STOPPED, STUB, LabConfig, LabStop
from tplab.lab.lab_config import INTERRUPTED as LAB_INTERRUPTED
from tplab.lab.pod import LabPod
from tplab.lab.stream import LabStream
from tplab.money.lab_money import LabMoney


async def authorize(config: LabConfig, provider: Provider, money: LabMoney,
                    stream: LabStream) -> None:
    """Hold the lab cap in the ledger (``LabMoney.authorize``: a stop meanwhile loses no hold),
    and note the provider's balance before."""
    from tplab.money.budget import BudgetGuardExceeded
    label = config.ledger_label()
    if money.guard is None or money.caps is None:  # the pre-flight opens the ledger first; never authorize without it
        raise LabStop(FAILED, "the budget ledger was not opened before authorizing; nothing was "
                              "created")
    stream.stage("authorize", amount_usd=money.lab_cap_usd, label=label)
    try:
        await money.authorize(label)
    except BudgetGuardExceeded as exc:
        raise LabStop(FAILED, one_line(str(exc))) from None
    stream.emit(money.budget_event(await asyncio.to_thread(money.guard.summary), label))
    try:
        money.note_balance(await asyncio.to_thread(provider.balance))
    except ProviderError:
        money.note_balance(None)


async def create(config: LabConfig, pod: LabPod, money: LabMoney, stream: LabStream,
                 public_key: str) -> PodInfo:
    """Write the intent record, then create the pod. No spot (or no capacity) is a STUB with
    nothing created; an ambiguous answer (a 5xx or a timeout: RunPod may have made the pod
    anyway) keeps the INTENT record and the authorization and looks for the pod by name
    (``find_after_ambiguous_create``): found, it is adopted and the lab stops so that teardown
    terminates it; a failure to list is "unknown", never "not created". A pod made but not the
    rental asked for (an interruptible bid rented on demand: ``RentalMismatchError``, the
    provider has already destroyed it) is adopted too, so teardown verifies it gone and
    settles what it cost."""
    cfg = config
    stream.stage("create")
    name = pod.name
    if not pod.write_intent(money.auth_id):
        raise LabStop(FAILED, "the instance record could not be written (see the warning); "
                      "without it a crash could leave a pod nobody finds, so nothing was created")
    spec = pod.spec(public_key)
    try:
        return await pod.create(spec)
    except LeftBehindError as exc:  # no spot, yet an instance left: the teardown proves its end
        pod.adopt(exc.info)
        raise LabStop(STUB, one_line(
            f"{str(exc).rstrip('. ')}; the lab is spot-first and never switches to on-demand "
            "by itself")) from None
    except SpotUnavailableError as exc:
        from tplab.lab.preflight import spot_stub_reason
        assert money.caps is not None  # the pre-flight resolved them before authorize
        raise LabStop(STUB, one_line(spot_stub_reason(cfg, money.quote, str(exc),
                                                      money.caps))) from None
    except NoCapacityError as exc:
        raise LabStop(STUB, one_line(f"{exc} Nothing was created.")) from None
    except RentalMismatchError as exc:  # made, but not the rental asked for: already ended
        pod.adopt(exc.info)             # by the provider; teardown verifies it and settles
        raise LabStop(FAILED, one_line(exc)) from None
    except AmbiguousCreateError as exc:
        found = await find_after_ambiguous_create(cfg, pod, stream, exc)
        pod.adopt(found)
        raise LabStop(FAILED, one_line(
            f"{pod.provider_label()} answered the create with an error ({exc.cause}), yet it made pod "
            f"{found.id} named {name}: found by its name, the lab stops and terminates "
            "it")) from None
    except (AuthError, ProviderError) as exc:  # refused (400/402/403/422/429 ...): no pod
        msg = str(exc).rstrip(". ")
        if "nothing was created" not in msg.lower():
            msg += "; nothing was created"
        raise LabStop(FAILED, one_line(msg)) from None


async def find_after_ambiguous_create(config: LabConfig, pod: LabPod, stream: LabStream,
                                      exc: AmbiguousCreateError) -> PodInfo:
    """Look for the pod named ``exc.pod_name`` for ``create_lookup_s`` (new pods can take a while
    to show in RunPod's list). Returns it when found; else a LabStop: "not created" when the
    list was read and never showed it, "unknown" when it could not be read (then the INTENT
    record and the authorization stay open: settle keeps them)."""
    cfg = config
    name = exc.pod_name
    who = pod.provider_label()
    stream.warn(one_line(f"{who} answered the create with an error ({exc.cause}); looking "
                             f"for a pod named {name} for {cfg.create_lookup_s:.0f} s before "
                             "calling it not created"))
    deadline = time.monotonic() + cfg.create_lookup_s
    listed_once = False
    last_error = ""
    while True:
        try:
            pods = await asyncio.to_thread(pod.cloud.list_pods)
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
    pod.unknown_whether_created()
    raise LabStop(FAILED, one_line(
        f"{who} answered the create with an error ({exc.cause}) and its pod list could not "
        f"be read ({last_error or 'no answer'}): whether a pod named {name} exists is UNKNOWN; run "
        f"`tplab status{' --mock' if cfg.mock else ''}` (or look in the {who} console) and "
        "terminate it if it is there; the instance record and the authorization stay open"))


async def boot(config: LabConfig, pod: LabPod, stream: LabStream) -> PodInfo:
    """Poll the pod until it is RUNNING with an SSH endpoint (within the boot timeout); a stop
    request is honoured at once because this is a plain loop of short awaits."""
    cfg, cloud = config, pod.cloud
    assert pod.id is not None
    stream.stage("boot")
    started = time.monotonic()
    deadline = started + cfg.boot_timeout_s
    last_state, last_ssh = None, None
    while True:
        try:
            info = await asyncio.to_thread(cloud.status, pod.id)
        except AuthError:
            raise
        except ProviderError as exc:  # a passing API error: keep waiting, within the bound
            stream.log(f"reading the pod's status failed ({exc}); retrying", "warning")
            if time.monotonic() > deadline:
                raise LabStop(FAILED, f"the pod {pod.id} could not be read within "
                              f"{cfg.boot_timeout_s:.0f} s ({exc})") from None
            await asyncio.sleep(1.0)
            continue
        if info.state != last_state or info.ssh != last_ssh:
            # on every state change, and once more when SSH appears: the `ready` event
            # carries ssh_host, ssh_port and uptime_s
            last_state, last_ssh = info.state, info.ssh
            pod.seen(info)
        if info.state.upper() == "ERROR":
            raise LabStop(FAILED, f"the pod {pod.id} went ERROR while booting "
                          f"({info.note or pod.provider_label() + ' could not start its container'}); "
                          "the lab terminates it")
        if info.state.upper() == INTERRUPTED:
            raise LabStop(LAB_INTERRUPTED, f"spot interruption while booting: the pod {pod.id} went "
                          f"{info.state} ({info.note or 'its provider took it back'}); the lab "
                          "terminates it")
        if info.state.upper() in GONE_STATES or info.state.upper() == "EXITED":
            outside = await asyncio.to_thread(pod.ended_from_outside, info.state)
            if outside:  # `tplab terminate` from another shell: the user's own stop
                raise LabStop(STOPPED, f"stopped by the user ({outside})")
            raise LabStop(FAILED, f"the pod {pod.id} went {info.state} while booting "
                          f"({info.note or 'spot interruption?'})")
        if info.state.upper() == "RUNNING" and info.ssh is not None:
            pod.reachable(info)
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

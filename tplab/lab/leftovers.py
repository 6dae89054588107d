"""tplab's pods that are still alive, and ending them: terminate, verify gone, settle their hold.

Why both sources: a client killed mid-lab leaves an instance record (written before the create
call) and, maybe, a pod; the provider's list finds pods whose record is gone, the records find
pods the list does not show yet. A record whose pod the provider says is gone is closed here; a
record whose pod the provider could not be asked about stays open, hold and all, and is shown
as UNKNOWN (never taken for gone). Used by the lab's preflight (refuse to start beside a
leftover), the dashboard's TERMINATE when no lab runs, and `tplab status` / `tplab terminate`.

Ending a leftover also settles the money its lab left held: the instance record carries the
ledger authorization id, and the spend recorded is the provider's figure when it has one, else
the pod's price × its life (created → verified gone), never $0 for a pod that ran.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from tplab.cloud.base import GONE_STATES, AuthError, GoneProof, PodInfo, Provider, ProviderError
from tplab.lab import instances
from tplab.lab.instances import InstanceRecord
from tplab.lab.ending import END_BOUND_S, EndReport, end_pod_within
from tplab.keys.redact import one_line

UNKNOWN = "UNKNOWN"
#: how long after an unanswered create a pod of its name may still appear in the provider's list
INTENT_GRACE_S = 600.0
#: ... when the client that sent it has died on this machine: nothing will look for the pod again,
#: and a create RunPod completed is listed within seconds (a pod that appears later still has the
#: boot guard from its create, and is listed as a tplab pod without a record)
DEAD_CLIENT_INTENT_GRACE_S = 15.0


@dataclass(frozen=True)
class LivePod:
    info: PodInfo
    record: InstanceRecord | None   # the instance record that names it, if any
    found_in: str                   # "provider" (its pod list) or "instance.json"
    problem: str = ""               # why its state is UNKNOWN (the provider could not say)


def live_pods(provider: Provider, mock: bool, *, exclude_pod: str | None = None,
              exclude_lab: str | None = None,
              settled: list[str] | None = None) -> list[LivePod]:
    """Every live tplab pod (not ``exclude_pod``, not a record of ``exclude_lab``). A record
    whose pod the provider now shows gone is closed, and the hold its ended lab kept for it is
    settled with what the pod billed (one sentence each into ``settled``). Sync: the provider
    is; call it from a worker thread in async code."""
    name = getattr(provider, "name", None)
    open_recs = [r for r in instances.open_records(mock) if r.lab_id != exclude_lab
                 and (name is None or r.provider in (name, "?"))]  # this cloud's records
    records = {r.pod_id: r for r in open_recs if r.pod_id}
    # intents whose create never answered (a crash, an ambiguous create): found by pod name
    intents = {r.pod_name: r for r in open_recs if not r.pod_id}
    found: dict[str, LivePod] = {}
    listed = provider.list_pods()
    for pod in listed:
        if pod.id != exclude_pod and pod.state.upper() not in GONE_STATES:
            rec = records.get(pod.id) or intents.pop(pod.name, None)
            if rec is not None and not rec.pod_id:
                rec.pod_id, rec.state = pod.id, instances.CREATED
                rec.note = "found by its name after its create went unanswered"
                instances.save(rec)
            found[pod.id] = LivePod(pod, rec, "provider")
    now = time.time()
    for rec in intents.values():
        if now - rec.intent_at >= _intent_grace(rec):  # the list has had time to show it
            _close_never_created(rec, mock)
        else:  # new pods can take a while to appear in the list: not gone, not known yet
            found[rec.pod_name] = LivePod(
                PodInfo(id=rec.pod_name, name=rec.pod_name, state=UNKNOWN,
                        usd_per_hr=rec.usd_per_hr), rec, "instance.json",
                problem="its create went unanswered and no pod of that name is listed yet")
    for pod_id, rec in records.items():
        if pod_id in found or pod_id == exclude_pod:
            continue
        try:
            info = provider.status(pod_id)
        except AuthError:  # a refused key is the user's to fix: said, never UNKNOWN or GONE
            raise
        except ProviderError as exc:  # unknown is not gone: keep the record and its hold
            found[pod_id] = LivePod(PodInfo(id=pod_id, name=rec.pod_name, state=UNKNOWN,
                                            usd_per_hr=rec.usd_per_hr), rec, "instance.json",
                                    problem="the provider could not be asked about it: "
                                    + one_line(exc))
            continue
        if info.state.upper() in GONE_STATES:  # not listed, and its record says gone
            notes = _close_records(provider, pod_id, mock, only_ended=True)
            if settled is not None:
                settled.extend(notes)
        else:
            found[pod_id] = LivePod(info, rec, "instance.json")
    return list(found.values())


def _intent_grace(rec: InstanceRecord) -> float:
    """How long an unanswered create's pod may take to show in the provider's list."""
    import socket

    from tplab.util.pids import pid_alive
    if rec.host == socket.gethostname() and rec.pid and not pid_alive(rec.pid):
        return DEAD_CLIENT_INTENT_GRACE_S
    return INTENT_GRACE_S


def describe(pods: list[LivePod]) -> str:
    """'id (STATE, $0.70/h), …' for warnings and refusals."""
    out = []
    for p in pods:
        text = f"{p.info.id} ({p.info.state}"
        if p.info.usd_per_hr:
            text += f", ${p.info.usd_per_hr:.2f}/h"
        if p.problem:
            text += f"; {p.problem}"
        out.append(text + ")")
    return ", ".join(out)


def _close_never_created(rec: InstanceRecord, mock: bool) -> None:
    """An intent whose pod never appeared: not created; release the hold its lab left."""
    from tplab.money.budget import BudgetError
    from tplab.money.caps import resolve_caps
    rec.state, rec.ended_at = instances.NOT_CREATED, time.time()
    rec.note = (f"no pod named {rec.pod_name} in the provider's list "
                f"{time.time() - rec.intent_at:.0f} s after its create was sent")
    if rec.auth_id and not rec.settled:
        guard = resolve_caps(mock=mock).guard()
        try:
            guard.release(rec.label, rec.auth_id)
        except BudgetError:
            pass  # already settled
        rec.settled = True
    instances.save(rec)


def reconcile_holds(provider: Provider | None, mock: bool,
                    live_mock_pods: set[str] | None = None) -> list[str]:
    """Settle the holds that clients of this machine left when they died (SIGKILL, a crash), once
    nothing can still be billing against them: no instance record (the client died between
    authorize and its intent: no create was ever sent) -> released; a record whose pod is gone
    or was never created -> its spend recorded, or released. A hold whose process still runs,
    whose pod may live, or from another machine is left alone. One sentence per settled hold.

    ``live_mock_pods`` (mock only): every pod the mock clouds running here list. A mock pod
    lives only as long as its mock cloud, so one of a dead client that none lists is gone (a
    dashboard forced out, its mock cloud with it): its record is closed and its hold settled."""
    import socket

    from tplab.money.budget import BudgetError
    from tplab.money.caps import resolve_caps
    from tplab.util.pids import pid_alive
    guard = resolve_caps(mock=mock).guard()
    host = socket.gethostname()
    by_auth = {r.auth_id: r for r in instances.load_all(mock) if r.auth_id}
    notes: list[str] = []
    for auth in guard.summary().open_authorizations:
        rec = by_auth.get(auth.auth_id)
        ended = rec is not None and rec.lab_ended  # its lab is over, its process may go on
        if auth.host != host or auth.pid is None or (pid_alive(auth.pid) and not ended):
            continue
        try:
            if rec is None:
                guard.release(auth.label, auth.auth_id)
                notes.append(f"released the hold {auth.auth_id} of a lab whose client ended "
                             "before it created anything")
            elif rec.state == instances.NOT_CREATED and not rec.settled:
                guard.release(auth.label, auth.auth_id)
                rec.settled = True
                instances.save(rec)
                notes.append(f"released the hold {auth.auth_id}: its lab created no pod")
            elif rec.state == instances.GONE and not rec.settled and provider is not None:
                notes.append(settle_record(provider, rec, mock))
                instances.save(rec)
            elif (mock and live_mock_pods is not None and rec.open and rec.pod_id
                  and rec.pod_id not in live_mock_pods and not rec.settled):
                rec.state, rec.ended_at = instances.GONE, rec.ended_at or time.time()
                rec.note = rec.note or "its mock cloud stopped, and the mock pod with it"
                notes.append(settle_record(provider, rec, mock))
                instances.save(rec)
        except BudgetError:
            continue  # settled meanwhile by someone else
    return notes


@dataclass(frozen=True)
class Ended:
    """One leftover pod ended (or not): the provider's proof, what the end did, and what
    happened to its money."""
    proof: GoneProof
    settled: list[str]          # one sentence per settled record
    report: EndReport | None = None


async def end_pod(provider: Provider, pod_id: str, mock: bool,
                  timeout_s: float = END_BOUND_S, by: str = "`tplab terminate`",
                  say: Callable[[str], None] | None = None) -> Ended:
    """End a pod within ``timeout_s`` (``tplab.lab.ending``: whatever the provider answers, a
    line to ``say`` every few seconds while it lasts; a refused key: ``AuthError``), close its
    instance records once the provider shows it gone and settle the holds they carry with
    what it billed. Its records say first who ends it (``by``), so a lab still running knows
    its user stopped it; that lab settles its own hold."""
    marked = await asyncio.to_thread(instances.mark_ended_by, pod_id,
                                     f"{by} (pid {os.getpid()})", mock)
    # the labs that were running when their pod was marked: each settles its own hold, maybe
    # before the pod is verified gone here, and the user is told so either way
    running = {rec.lab_id for rec in marked if rec.auth_id and client_alive(rec)}
    report = await end_pod_within(provider, pod_id, timeout_s, say=say,
                                  announce=say is not None)
    if report.key_refused:
        raise AuthError(report.key_refused)
    settled: list[str] = []
    if report.gone:
        settled = await asyncio.to_thread(_close_records, provider, pod_id, mock, running)
    return Ended(report.proof, settled, report)


def close_if_gone(provider: Provider, rec: InstanceRecord, mock: bool) -> list[str] | None:
    """Ask the provider about ``rec``'s pod: shown gone (no record, or one that says gone),
    its records closed and the holds of ended labs settled (the sentences); else None."""
    assert rec.pod_id is not None
    if provider.status(rec.pod_id).state.upper() not in GONE_STATES:
        return None
    return _close_records(provider, rec.pod_id, mock, only_ended=True)


def _close_records(provider: Provider, pod_id: str, mock: bool,
                   running: Collection[str] = (), only_ended: bool = False) -> list[str]:
    """The provider showed ``pod_id`` gone: close its records and settle the holds they carry
    with what it billed, unless the lab that holds one still runs (it settles its own).
    ``only_ended``: settle only the holds of labs that have ended (found gone while listing,
    not ended here)."""
    notes = []
    now = time.time()
    for rec in instances.load_all(mock):
        if rec.pod_id != pod_id:
            continue
        if only_ended and not rec.lab_ended and client_alive(rec):
            if rec.open:
                rec.state, rec.ended_at = instances.GONE, rec.ended_at or now
                instances.save(rec)
            continue
        if rec.open:
            rec.state = instances.GONE
            rec.ended_at = rec.ended_at or now
        if rec.auth_id and not rec.settled and client_alive(rec) and not rec.lab_ended:
            notes.append(f"its lab {rec.lab_id} (pid {rec.pid}) is still running: it ends as "
                         "stopped by you and settles its own hold")
        elif rec.auth_id and rec.settled and rec.lab_id in running:
            notes.append(f"its lab {rec.lab_id} (pid {rec.pid}) was running: it ended as "
                         "stopped by you and settled its own hold")
        elif rec.auth_id and not rec.settled:
            notes.append(settle_record(provider, rec, mock))
        instances.save(rec)
    return notes


def client_alive(rec: InstanceRecord) -> bool:
    """Whether the lab that wrote ``rec`` still runs (another process of this machine)."""
    import socket

    from tplab.util.pids import pid_alive
    return (rec.host == socket.gethostname() and bool(rec.pid) and rec.pid != os.getpid()
            and pid_alive(rec.pid))


def settle_record(provider: Provider | None, rec: InstanceRecord, mock: bool) -> str:
    """Record what a crashed (or detached) lab's pod cost against the hold its record names."""
    from tplab.money.budget import BudgetError
    from tplab.money.budget_config import fmt_usd
    from tplab.money.caps import resolve_caps
    start = rec.created_at or rec.intent_at
    end = rec.ended_at or time.time()
    rate = rec.usd_per_hr or 0.0
    amount, how = rate * max(0.0, end - start) / 3600.0, "price × the pod's life"
    try:
        if provider is None:
            raise LookupError("no provider to ask")
        report = provider.actual_cost(rec.pod_id or "", None, start, end, rate)
        if report.actual_usd >= amount:
            amount, how = report.actual_usd, report.note or "the provider's figure"
    except Exception:  # noqa: BLE001 - the price × life figure stands
        pass
    guard = resolve_caps(mock=mock).guard()
    try:
        guard.record_actual(rec.label, max(0.0, amount), rec.auth_id)
        note = (f"recorded {fmt_usd(amount)} spent by pod {rec.pod_id} ({how}) against its "
                f"lab's hold {rec.auth_id}")
    except BudgetError:
        note = f"the hold {rec.auth_id} of pod {rec.pod_id} was already settled"
    rec.settled = True
    return note

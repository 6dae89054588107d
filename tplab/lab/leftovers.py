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
import time
from dataclasses import dataclass

from tplab.cloud.base import GONE_STATES, GoneProof, PodInfo, Provider, ProviderError
from tplab.lab import instances
from tplab.lab.instances import InstanceRecord
from tplab.lab.ending import terminate_with_retries, verify_gone
from tplab.redact import one_line

UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class LivePod:
    info: PodInfo
    record: InstanceRecord | None   # the instance record that names it, if any
    found_in: str                   # "provider" (its pod list) or "instance.json"
    problem: str = ""               # why its state is UNKNOWN (the provider could not say)


def live_pods(provider: Provider, mock: bool, *, exclude_pod: str | None = None,
              exclude_lab: str | None = None) -> list[LivePod]:
    """Every live tplab pod (not ``exclude_pod``, not a record of ``exclude_lab``). Sync: the
    provider is; call it from a worker thread in async code."""
    records = {r.pod_id: r for r in instances.open_records(mock)
               if r.pod_id and r.lab_id != exclude_lab}
    found: dict[str, LivePod] = {}
    for pod in provider.list_pods():
        if pod.id != exclude_pod and pod.state.upper() not in GONE_STATES:
            found[pod.id] = LivePod(pod, records.get(pod.id), "provider")
    for pod_id, rec in records.items():
        if pod_id in found or pod_id == exclude_pod:
            continue
        try:
            info = provider.status(pod_id)
        except ProviderError as exc:  # unknown is not gone: keep the record and its hold
            found[pod_id] = LivePod(PodInfo(id=pod_id, name=rec.pod_name, state=UNKNOWN,
                                            usd_per_hr=rec.usd_per_hr), rec, "instance.json",
                                    problem=one_line(exc))
            continue
        if info.state.upper() in GONE_STATES:
            instances.mark(pod_id, instances.GONE, mock)
        else:
            found[pod_id] = LivePod(info, rec, "instance.json")
    return list(found.values())


def describe(pods: list[LivePod]) -> str:
    """'id (STATE, $0.70/h), …' for warnings and refusals."""
    out = []
    for p in pods:
        text = f"{p.info.id} ({p.info.state}"
        if p.info.usd_per_hr:
            text += f", ${p.info.usd_per_hr:.2f}/h"
        if p.problem:
            text += f"; the provider could not be asked about it: {p.problem}"
        out.append(text + ")")
    return ", ".join(out)


@dataclass(frozen=True)
class Ended:
    """One leftover pod ended: the provider's proof, and what happened to its money."""
    proof: GoneProof
    settled: list[str]          # one sentence per settled record


async def end_pod(provider: Provider, pod_id: str, mock: bool,
                  timeout_s: float = 60.0) -> Ended:
    """Terminate a pod (retrying whatever goes wrong), verify it gone, close its instance
    records and settle the holds they carry."""
    await terminate_with_retries(provider, pod_id, attempts=3)
    proof = await verify_gone(provider, pod_id, timeout_s)
    settled: list[str] = []
    if proof.gone:
        settled = await asyncio.to_thread(_close_records, provider, pod_id, mock)
    return Ended(proof, settled)


def _close_records(provider: Provider, pod_id: str, mock: bool) -> list[str]:
    notes = []
    now = time.time()
    for rec in instances.load_all(mock):
        if rec.pod_id != pod_id:
            continue
        if rec.open:
            rec.state = instances.GONE
            rec.ended_at = rec.ended_at or now
        if rec.auth_id and not rec.settled:
            notes.append(settle_record(provider, rec, mock))
        instances.save(rec)
    return notes


def settle_record(provider: Provider, rec: InstanceRecord, mock: bool) -> str:
    """Record what a crashed (or detached) lab's pod cost against the hold its record names."""
    from tplab.budget import BudgetConfig, BudgetError, BudgetGuard
    from tplab.budget_config import fmt_usd
    start = rec.created_at or rec.intent_at
    end = rec.ended_at or time.time()
    rate = rec.usd_per_hr or 0.0
    amount, how = rate * max(0.0, end - start) / 3600.0, "price × the pod's life"
    try:
        report = provider.actual_cost(rec.pod_id or "", None, start, end, rate)
        if report.actual_usd >= amount:
            amount, how = report.actual_usd, report.note or "the provider's figure"
    except Exception:  # noqa: BLE001 - the price × life figure stands
        pass
    guard = BudgetGuard.from_config(BudgetConfig.load(mock=mock), mock=mock)
    try:
        guard.record_actual(rec.label, max(0.0, amount), rec.auth_id)
        note = (f"recorded {fmt_usd(amount)} spent by pod {rec.pod_id} ({how}) against its "
                f"lab's hold {rec.auth_id}")
    except BudgetError:
        note = f"the hold {rec.auth_id} of pod {rec.pod_id} was already settled"
    rec.settled = True
    return note

"""tplab's pods that are still alive: the provider's list of tplab pods plus the open instance records.

Why both: a client killed mid-lab leaves an instance record (written before the create call)
and, maybe, a pod; the provider's list finds pods whose record is gone, the records find pods
the list does not show yet. A record whose pod the provider says is gone is closed here.
Used by the lab's preflight (refuse to start beside a leftover), the dashboard's TERMINATE when
no lab runs, and ``tplab status`` / ``tplab terminate --all``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tplab.cloud.base import GONE_STATES, PodInfo, Provider, ProviderError
from tplab.lab import instances
from tplab.lab.instances import InstanceRecord


@dataclass(frozen=True)
class LivePod:
    info: PodInfo
    record: InstanceRecord | None   # the instance record that names it, if any
    found_in: str                   # "provider" (its pod list) or "instance.json"


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
        except ProviderError:
            continue
        if info.state.upper() in GONE_STATES:
            instances.mark(pod_id, instances.GONE, mock)
        else:
            found[pod_id] = LivePod(info, rec, "instance.json")
    return list(found.values())


def describe(pods: list[LivePod]) -> str:
    """'id (STATE, $0.70/h), …' for warnings and refusals."""
    return ", ".join(f"{p.info.id} ({p.info.state}"
                     + (f", ${p.info.usd_per_hr:.2f}/h" if p.info.usd_per_hr else "") + ")"
                     for p in pods)

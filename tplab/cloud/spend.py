"""What a pod cost: RunPod's billing record, never less than its price x its billed seconds.

Why a rule and not a single source: RunPod's ``/v2/billing/pods`` record is the bill itself, but
it may lag behind a pod that just ended (or show nothing yet); the pod's ``cost`` (USD/h) times
the seconds it existed is a floor the bill cannot honestly be under; the account balance's change
counts every pod on the account, so it only cross-checks. ``settle`` says in ``source`` which
figure it recorded and in ``note`` how the others compared.

The seconds ``settle`` is given are the client's window (create sent -> gone verified), which holds
the pod's billed life plus the round trips on both ends; a bill that is short of the floor by no
more than ``WINDOW_SLACK_S`` of the pod's price is that difference, not lag, and is recorded as is.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from tplab.cloud.base import CostReport

#: amounts differing by less than this are the same amount rounded differently
ROUNDING_USD = 1e-6
#: seconds of the client's window a pod need not have billed (the create call before it existed,
#: the terminate and its verification after billing stopped)
WINDOW_SLACK_S = 30.0


def billing_total(records: Iterable[dict[str, Any]], pod_id: str) -> float | None:
    """The pod's billed amount over ``records`` (None when none is the pod's)."""
    amounts = [float(r.get("totalAmount") or 0.0) for r in records
               if isinstance(r, dict) and r.get("podId") == pod_id]
    return round(sum(amounts), 8) if amounts else None


def settle(pod_id: str, usd_per_hr: float, seconds: float, billing_usd: float | None,
           balance_delta_usd: float | None, extra_notes: Iterable[str] = ()) -> CostReport:
    """The figure to record and why (see the module docstring)."""
    billed_s = float(math.ceil(max(0.0, seconds) - 1e-9))
    floor = usd_per_hr * billed_s / 3600.0
    notes = list(extra_notes)
    slack = usd_per_hr * WINDOW_SLACK_S / 3600.0
    if billing_usd is not None and billing_usd >= floor - ROUNDING_USD:
        actual, source = max(billing_usd, floor), "billing"  # never below the floor
        notes.append(f"from RunPod's billing record for pod {pod_id} (${billing_usd:.6f}); "
                     f"cost x billed seconds is ${floor:.6f}")
    elif billing_usd is not None and billing_usd >= floor - slack:
        actual, source = billing_usd, "billing"
        notes.append(f"from RunPod's billing record for pod {pod_id} (${billing_usd:.6f}); "
                     f"cost x the client's {billed_s:.0f} s window is ${floor:.6f}, the "
                     "difference being the create and terminate round trips")
    elif billing_usd is not None:
        actual, source = floor, "rate_x_seconds"
        notes.append(f"RunPod's billing record (${billing_usd:.6f}) is below cost x billed seconds "
                     f"(${floor:.6f}; billing may lag): recorded the latter")
    else:
        actual, source = floor, "rate_x_seconds"
        notes.append(f"from cost x billed seconds (${usd_per_hr:.4f}/h x {billed_s:.0f} s): "
                     "RunPod's billing has no record for the pod yet")
    if balance_delta_usd is not None:
        tolerance = max(0.01, 0.1 * actual)
        if balance_delta_usd < 0:
            notes.append(f"the balance rose by ${-balance_delta_usd:.4f} during the lab (a top-up?)")
        elif abs(balance_delta_usd - actual) > tolerance:
            notes.append(f"the balance changed by ${balance_delta_usd:.4f} (other pods on the "
                         "account, or billing lag)")
        else:
            notes.append("the balance change agrees")
    return CostReport(actual_usd=round(actual, 6), balance_delta_usd=balance_delta_usd,
                      rate_x_seconds_usd=round(floor, 6), billed_seconds=billed_s,
                      note="; ".join(notes), billing_usd=billing_usd, source=source)

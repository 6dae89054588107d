"""What a pod cost: the provider's billing record, never less than its price x its billed seconds.

Why a rule and not a single source, and one rule for every provider: the billing record (RunPod's
``/v2/billing/pods``, Vast's ``/api/v0/charges/``) is the bill itself, but
it may lag behind a pod that just ended (or show nothing yet); the pod's price (USD/h) times
the seconds it existed is a floor the bill cannot honestly be under; the account balance's change
counts every pod on the account, so it only cross-checks. ``settle`` says in ``source`` which
figure it recorded and in ``note`` how the others compared.

The seconds ``settle`` is given are the client's window (create sent -> gone verified), which holds
the pod's billed life plus the round trips on both ends; a bill that is short of the floor by no
more than ``WINDOW_SLACK_S`` of the pod's price is that difference, not lag, and is recorded as is.
"""

from __future__ import annotations

import math
from typing import Iterable

from tplab.cloud.base import CostReport

#: amounts differing by less than this are the same amount rounded differently
ROUNDING_USD = 1e-6
#: seconds of the client's window a pod need not have billed (the create call before it existed,
#: the terminate and its verification after billing stopped)
WINDOW_SLACK_S = 30.0


def settle(pod_id: str, usd_per_hr: float, seconds: float, billing_usd: float | None,
           balance_delta_usd: float | None, extra_notes: Iterable[str] = (),
           billed_by: str = "the provider", unit: str = "pod") -> CostReport:
    """The figure to record and why (see the module docstring); ``billed_by`` names the bill in
    the notes ("RunPod's billing record", "Vast's charges"), ``unit`` what it is for."""
    billed_s = float(math.ceil(max(0.0, seconds) - 1e-9))
    floor = usd_per_hr * billed_s / 3600.0
    notes = list(extra_notes)
    slack = usd_per_hr * WINDOW_SLACK_S / 3600.0
    if billing_usd is not None and billing_usd >= floor - ROUNDING_USD:
        actual, source = max(billing_usd, floor), "billing"  # never below the floor
        notes.append(f"from {billed_by} for {unit} {pod_id} (${billing_usd:.6f}); "
                     f"cost x billed seconds is ${floor:.6f}")
    elif billing_usd is not None and billing_usd >= floor - slack:
        actual, source = billing_usd, "billing"
        notes.append(f"from {billed_by} for {unit} {pod_id} (${billing_usd:.6f}); "
                     f"cost x the client's {billed_s:.0f} s window is ${floor:.6f}, the "
                     "difference being the create and terminate round trips")
    elif billing_usd is not None:
        actual, source = floor, "rate_x_seconds"
        notes.append(f"{billed_by} (${billing_usd:.6f}) is below cost x billed seconds "
                     f"(${floor:.6f}; billing may lag): recorded the latter")
    else:
        actual, source = floor, "rate_x_seconds"
        notes.append(f"from cost x billed seconds (${usd_per_hr:.4f}/h x {billed_s:.0f} s): "
                     f"{billed_by} has no record for the {unit} yet")
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

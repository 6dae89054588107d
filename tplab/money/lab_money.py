"""One lab's money, from authorize to the manifest, as one typed record under the manifest's names.

Why one record: a dollar figure that changed names on its way from the quote to the manifest,
or travelled as an untyped dict, could be read under the wrong name. Here each figure has the
name the manifest gives it, from the moment it is known: the pre-flight fills the quote's
figures (``price_kind``, ``estimated_cost_usd``, ``worst_case_usd``), provisioning the
authorization (``auth_id``, ``authorized_usd``), the cost ticker the running figures, the
teardown what it really cost (``actual_cost_usd`` and where that came from); the manifest reads
``manifest_fields()``. Client side; standard library only at run time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tplab.money.budget import BudgetGuard

if TYPE_CHECKING:
    from tplab.cloud.base import Quote


#: the manifest fields this record fills, in the manifest's order
MANIFEST_FIELDS = ("estimated_cost_usd", "actual_cost_usd", "authorized_usd", "worst_case_usd",
                   "price_kind", "actual_cost_source", "actual_cost_note")


@dataclass
class LabMoney:
    """The ledger side of one lab: what was quoted, authorized, spent so far and in the end."""

    #: the ledger's guard, once the pre-flight opened it
    guard: BudgetGuard | None = None
    #: the provider's quote, from the pre-flight
    quote: Quote | None = None
    #: "spot" | "on-demand"
    price_kind: str | None = None
    #: the quote's expected cost of the planned run (``preflight.ESTIMATE_FORMULA``)
    estimated_cost_usd: float | None = None
    #: the quote's price for the whole wall cap
    worst_case_usd: float | None = None
    #: the authorize call in flight, and the amount it asks for
    pending_auth: asyncio.Future[str] | None = None
    pending_amount: float = 0.0
    #: the ledger's authorization for this lab and what it holds
    auth_id: str | None = None
    authorized_usd: float = 0.0
    #: the provider's balance before the pod was created (None: unknown)
    balance_before: float | None = None
    #: the cost ticker: price x seconds so far, seconds left before the cap, 80 % warned
    accrued_usd: float | None = None
    seconds_left: float | None = None
    warned_80: bool = False
    #: what the lab really cost, recorded when it was settled, where the figure came from
    #: ("billing" | "rate_x_seconds") and a note on how it was read
    actual_cost_usd: float | None = None
    actual_cost_source: str | None = None
    actual_cost_note: str | None = None

    def manifest_fields(self) -> dict[str, Any]:
        """The manifest's money fields, by the manifest's names."""
        return {name: getattr(self, name) for name in MANIFEST_FIELDS}

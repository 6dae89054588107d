"""experiments/35-cloud-budget.md: the phase's spend, one row per lab, from the ledger.

Why from the ledger and nothing else: the phase's definition of done (the phase overview) is "total cloud
spend of phase 35 <= $5, recorded in experiments/35-cloud-budget.md"; the ledger is the budget's
only state, so the table is a fold of the same ``BudgetSummary`` that `tplab budget` prints and
its totals are that summary's figures (a test holds them equal). Each authorization is one lab:
what it was authorized, what it actually spent (or that it was released, or is still held), and
what remained of the phase cap after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tplab.money.budget_config import fmt_usd


@dataclass
class SpendRow:
    """One lab's money: an authorization and how it ended (or a record with no authorization)."""

    label: str
    ts: float
    auth_id: str | None
    authorized: Decimal | None = None
    actual: Decimal | None = None
    released: bool = False
    remaining_after: Decimal = Decimal(0)

    @property
    def outcome(self) -> str:
        if self.actual is not None:
            return "spent"
        return "released (no pod)" if self.released else "HELD (open)"


def _dec(value: float) -> Decimal:
    return Decimal(str(value))


def spend_rows(summary: Any) -> list[SpendRow]:
    """The ledger's entries (a ``BudgetSummary``) as one row per authorization, in ledger order,
    each with the phase cap's remaining after it: cap - spent so far - still held so far."""
    rows: list[SpendRow] = []
    by_auth: dict[str, SpendRow] = {}
    for e in summary.entries:
        row = by_auth.get(e.auth_id) if e.auth_id else None
        if e.kind == "authorize":
            row = SpendRow(e.label, e.ts, e.auth_id, authorized=_dec(e.amount_usd))
            rows.append(row)
            by_auth[e.auth_id] = row
        elif e.kind == "actual":
            if row is None:  # recorded without an open authorization: a row of its own
                row = SpendRow(e.label, e.ts, e.auth_id)
                rows.append(row)
            row.actual = _dec(e.amount_usd)
        elif row is not None:
            row.released = True
    cap = _dec(summary.cap_usd)
    spent = held = Decimal(0)
    for row in rows:
        spent += row.actual or Decimal(0)
        if row.actual is None and not row.released:
            held += row.authorized or Decimal(0)
        row.remaining_after = cap - spent - held
    return rows


def _held_words(summary: Any, mock: bool) -> dict[str, str]:
    """For each open authorization, why it is still held (": $3.00 for pod 4711, not yet
    proven gone ..."), as `tplab budget` says it."""
    from tplab.viewmodel.ledger_view import hold_words
    auths = list(getattr(summary, "open_authorizations", []) or [])
    return {a.auth_id: f": {w}" for a, w in zip(auths, hold_words(auths, mock))}


def render(summary: Any, lab_ids: dict[str, str], mock: bool = False,
           this_auth: str | None = None) -> str:
    """The markdown page: cap, one row per lab, the totals `tplab budget` shows.
    ``lab_ids``: authorization id -> lab id (from each lab's instance.json);
    ``this_auth``: the handed-in lab's authorization (marked in the table)."""
    rows = spend_rows(summary)
    kind = "MOCK ledger (simulated spending on the local mock cloud, not real money)" if mock \
        else "the real ledger"
    out = [f"# Phase 35 cloud spend{' (MOCK)' if mock else ''}", "",
           f"From {kind}: `{summary.ledger_path}`, as `tplab budget{' --mock' if mock else ''}` "
           f"reads it. Phase cap {fmt_usd(summary.cap_usd)}; every lab is authorized by "
           "BudgetGuard before its pod exists and settled with the provider's actual spend.", "",
           "| # | lab | ledger label | authorized (UTC) | authorized | actual | outcome "
           "| remaining of the cap after |",
           "|---|---|---|---|---:|---:|---|---:|"]
    held = _held_words(summary, mock)
    for n, row in enumerate(rows, 1):
        lab = lab_ids.get(row.auth_id or "", "-")
        if this_auth and row.auth_id == this_auth:
            lab += " (this hand-in)"
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(row.ts))
        out.append(f"| {n} | {lab} | `{row.label}` | {when} | "
                   f"{fmt_usd(row.authorized) if row.authorized is not None else '-'} | "
                   f"{fmt_usd(row.actual) if row.actual is not None else '-'} | "
                   f"{row.outcome}{held.get(row.auth_id or '', '')} | "
                   f"{fmt_usd(row.remaining_after)} |")
    if not rows:
        out.append("| - | no lab has been authorized yet | | | | | | |")
    out += ["", f"## Totals (equal to `tplab budget{' --mock' if mock else ''}`, the same ledger)", "",
            "| cap | spent | held | remaining |", "|---:|---:|---:|---:|",
            f"| {fmt_usd(summary.cap_usd)} | {fmt_usd(summary.spent_usd)} | "
            f"{fmt_usd(summary.held_usd)} | {fmt_usd(summary.remaining_usd)} |", ""]
    verdict = ("within" if summary.spent_usd + summary.held_usd <= summary.cap_usd
               else "OVER")
    out.append(f"Phase 35 spend {fmt_usd(summary.spent_usd)} is {verdict} the "
               f"{fmt_usd(summary.cap_usd)} cap.")
    if summary.damaged:
        out.append(f"The ledger has {len(summary.damaged)} damaged line(s), not counted above; "
                   "see `tplab budget`.")
    return "\n".join(out) + "\n"

"""One lab's money, owned in one place: its caps, its hold in the ledger, and its cost figure.

Why an owner and not a record: a lab's money has rules, and each rule written where a stage
happens to need it was a rule applied in some places only. Here:

* the caps come from ``tplab.money.caps.resolve_caps`` once (``open``), and what follows from
  them is asked of this object, never worked out again by a stage: the pre-flight's rule
  (``preflight``), whether an offer's worst case fits (``take_offer``), the hold
  (``authorize``, which a stop cannot lose: ``adopt_pending``), the 80 % alert and the cap stop
  (``tick``);
* the hold follows the proof: the authorization made before the create is settled only when
  the provider has shown the pod gone (``settle_billed``, with the billed amount) or no pod was
  made (``release_unused``); a pod that could not be proven gone keeps the whole authorization
  held (``keep_held``: the pod's worst case to the lab cap stays counted, so the next lab's
  pre-flight sees it), and whoever later proves it gone (`tplab terminate`, `tplab status`, the
  dashboard's leftover sweep, the next lab's pre-flight) settles it with the billed amount
  (``tplab.lab.leftovers``);
* the lab's cost is one figure that says what it is (``cost``): an estimate (price x seconds)
  while the pod may bill, the billed amount once the provider billed it and the ledger recorded
  it. Every face (the strip, the Instance and Budget panels, the log, the manifest, the proof
  pictures, the hand-in's spend table) shows this figure, never its own sum.

Each figure has the name the manifest gives it (``manifest_fields``). Client side; standard
library only at run time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tplab.money.budget import BudgetGuard, BudgetSummary, Preflight
from tplab.money.budget_config import fmt_usd
from tplab.money.caps import ALERT_SHARE
from tplab.records.events import BudgetEvent

if TYPE_CHECKING:
    from tplab.cloud.base import CostReport, Quote
    from tplab.money.caps import Caps
    from tplab.money.worst_case import WorstCase


#: the manifest fields this record fills, in the manifest's order
MANIFEST_FIELDS = ("estimated_cost_usd", "actual_cost_usd", "authorized_usd", "worst_case_usd",
                   "price_kind", "actual_cost_source", "actual_cost_note", "cost_is",
                   "held_for_pod")

#: what a cost figure is
ESTIMATE, BILLED = "estimate", "billed"


@dataclass(frozen=True)
class CostFigure:
    """A lab's cost as every face shows it: the dollars, what they are, what they count."""

    usd: float | None
    what: str                     # ESTIMATE (price x seconds so far) | BILLED (the provider's)
    usd_per_hr: float | None = None
    seconds: float | None = None  # the pod's life the figure counts
    ended_at: float | None = None  # epoch s the provider showed the pod gone (billed only)

    def text(self) -> str:
        """'$0.0109 billed' / '$0.0042 so far (estimate)' (the amount as ``fmt_usd`` shows
        every amount); a dash when there is none."""
        if self.usd is None:
            return "—"
        amount = fmt_usd(self.usd)
        return f"{amount} billed" if self.what == BILLED else f"{amount} so far (estimate)"


@dataclass
class LabMoney:
    """The money of one lab (see the module docstring)."""

    #: the caps, once the pre-flight resolved them, and the ledger's guard under them
    caps: Caps | None = None
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
    #: the estimate: price x seconds so far, seconds left before the cap, 80 % warned
    accrued_usd: float | None = None
    usd_per_hr: float | None = None
    seconds_so_far: float | None = None
    seconds_left: float | None = None
    warned_80: bool = False
    #: what the lab really cost, recorded when it was settled, where the figure came from
    #: ("billing" | "rate_x_seconds") and a note on how it was read
    actual_cost_usd: float | None = None
    actual_cost_source: str | None = None
    actual_cost_note: str | None = None
    billed_seconds: float | None = None
    ended_at: float | None = None
    #: the pod whose end is not proven: its lab's authorization stays held for it
    held_for_pod: str | None = None

    # ---- the caps and the ledger ---------------------------------------------------------
    def open(self, caps: Caps) -> BudgetGuard:
        """Take the lab's caps and open the ledger under them."""
        self.caps = caps
        self.guard = caps.guard()
        return self.guard

    @property
    def lab_cap_usd(self) -> float:
        return self._caps().lab_cap_usd

    def _caps(self) -> Caps:
        if self.caps is None:
            raise RuntimeError("the lab's caps are resolved by its pre-flight first")
        return self.caps

    def preflight(self) -> Preflight:
        """The pre-flight rule under the lab's caps: remaining >= lab cap + buffer."""
        caps = self._caps()
        assert self.guard is not None
        return self.guard.check_preflight(caps.lab_cap_usd, caps.preflight_buffer_usd)

    def take_quote(self, quote: Quote) -> None:
        """The provider's quote for the lab's GPUs (the spot stub's sentence reads it)."""
        self.quote = quote

    def take_offer(self, usd_per_hr: float, kind: str, planned_s: float) -> WorstCase:
        """The offer the lab would rent (``kind``: "spot" | "on-demand") held against the lab
        cap (``Caps.worst_case``). When it fits, its figures are the lab's: the price kind, the
        worst case and the expected cost of the planned ``planned_s``. The caller refuses an
        offer that does not fit."""
        worst = self._caps().worst_case(usd_per_hr)
        if worst.fits:
            self.price_kind = kind
            self.worst_case_usd = round(worst.usd, 6)
            self.estimated_cost_usd = round(usd_per_hr * planned_s / 3600.0, 6)
        return worst

    # ---- the hold ------------------------------------------------------------------------
    async def authorize(self, label: str) -> str:
        """Hold the lab cap in the ledger (``BudgetGuard.authorize``). The ledger write runs in
        a thread that a stop cannot interrupt; the call is kept as a future, so that a stop
        meanwhile still learns the hold it wrote (``adopt_pending``) and settles it, instead of
        leaving it open. ``BudgetGuardExceeded`` when the ledger refuses."""
        if self.guard is None or self.caps is None:
            raise RuntimeError("the ledger is opened under the lab's caps before authorizing")
        amount = self.caps.lab_cap_usd
        self.pending_amount = amount
        self.pending_auth = asyncio.ensure_future(
            asyncio.to_thread(self.guard.authorize, label, amount))
        self.auth_id = await asyncio.shield(self.pending_auth)
        self.authorized_usd = amount
        return self.auth_id

    async def adopt_pending(self) -> None:
        """A stop while ``authorize`` ran in its thread: wait for its answer, so the hold it
        wrote is settled instead of left open in the ledger."""
        pending = self.pending_auth
        if self.auth_id is None and pending is not None:
            try:
                self.auth_id = await pending
                self.authorized_usd = self.pending_amount
            except Exception:  # noqa: BLE001 - refused (BudgetGuardExceeded): nothing is held
                pass

    def note_balance(self, usd: float | None) -> None:
        """The provider's balance before the pod was created (None: unknown)."""
        self.balance_before = usd

    def hold_open(self, summary: BudgetSummary) -> bool:
        """Whether this lab's authorization is still open in the ledger ``summary``."""
        return any(a.auth_id == self.auth_id for a in summary.open_authorizations)

    def budget_event(self, summary: BudgetSummary, label: str) -> BudgetEvent:
        """The ledger's figures (cap, spent, held, remaining), how many of its lines are
        damaged (left out of them), and this lab's authorization, as every face shows them."""
        return BudgetEvent(cap_usd=summary.cap_usd, spent_usd=summary.spent_usd,
                           held_usd=summary.held_usd, remaining_usd=summary.remaining_usd,
                           damaged_lines=len(summary.damaged),
                           authorized_usd=self.authorized_usd, label=label,
                           held_for=(f"pod {self.held_for_pod} not yet proven gone"
                                     if self.held_for_pod else None))

    # ---- the estimate while the pod runs -------------------------------------------------
    def tick(self, usd_per_hr: float, seconds: float, wall_cap_s: float) -> tuple[bool, bool]:
        """The estimate after ``seconds`` of the pod at ``usd_per_hr``, and the seconds left
        before a cap. Returns (alert, cap): alert the first time the estimate reaches the alert
        share of the authorization, cap once it reaches the authorization itself."""
        self.usd_per_hr = usd_per_hr
        self.seconds_so_far = max(0.0, seconds)
        self.accrued_usd = usd_per_hr * self.seconds_so_far / 3600.0
        cap = self.authorized_usd
        left = max(0.0, (cap - self.accrued_usd) / usd_per_hr * 3600.0) \
            if cap and usd_per_hr else 0.0
        self.seconds_left = min(left, max(0.0, wall_cap_s - self.seconds_so_far))
        share = self.caps.alert_share if self.caps is not None else ALERT_SHARE
        alert = bool(cap) and self.accrued_usd >= share * cap and not self.warned_80
        self.warned_80 = self.warned_80 or alert
        return alert, bool(cap) and self.accrued_usd >= cap

    def alert_text(self) -> str:
        share = self.caps.alert_share if self.caps is not None else ALERT_SHARE
        return (f"budget alert: {fmt_usd(self.accrued_usd or 0.0)} accrued, {share:.0%} of the "
                f"lab's {fmt_usd(self.authorized_usd)} authorization")

    # ---- the figure every face shows -----------------------------------------------------
    def cost(self) -> CostFigure:
        """The lab's cost: the billed amount once recorded, else the running estimate."""
        if self.actual_cost_usd is not None:
            return CostFigure(self.actual_cost_usd, BILLED, self.usd_per_hr,
                              self.billed_seconds, self.ended_at)
        return CostFigure(self.accrued_usd, ESTIMATE, self.usd_per_hr, self.seconds_so_far)

    def cost_event_fields(self) -> dict[str, Any]:
        """The ``cost`` event's fields for the figure as it stands."""
        fig = self.cost()
        fields: dict[str, Any] = {
            "accrued_usd": round(fig.usd or 0.0, 6), "usd_per_hr": fig.usd_per_hr or 0.0,
            "seconds_left": round(self.seconds_left or 0.0, 1) if fig.what == ESTIMATE else 0.0,
            "authorized_usd": self.authorized_usd, "cost_is": fig.what}
        if fig.seconds is not None:
            fields["ran_s"] = round(fig.seconds, 1)
        if fig.ended_at is not None:
            fields["ended_at"] = fig.ended_at
        if self.held_for_pod:
            fields["held_for_pod"] = self.held_for_pod
        return fields

    # ---- settling: the hold follows the proof --------------------------------------------
    def release_unused(self, label: str) -> None:
        """No pod was made: the authorization is released (nothing spent)."""
        assert self.guard is not None and self.auth_id is not None
        self.guard.release(label, self.auth_id)

    def settle_billed(self, label: str, report: CostReport, ended_at: float,
                      usd_per_hr: float | None = None) -> None:
        """The provider showed the pod gone: record what it billed against the authorization
        (never below price x the pod's seconds, ``tplab.cloud.spend``), which ends the hold."""
        assert self.guard is not None and self.auth_id is not None
        self.guard.record_actual(label, max(0.0, report.actual_usd), self.auth_id)
        self.actual_cost_usd = report.actual_usd
        self.actual_cost_note = report.note
        self.actual_cost_source = report.source
        self.billed_seconds = report.billed_seconds
        self.ended_at = ended_at
        self.usd_per_hr = usd_per_hr if usd_per_hr is not None else self.usd_per_hr
        self.held_for_pod = None

    def keep_held(self, pod_id: str) -> str:
        """The pod is not proven gone: its authorization stays held in full (the pod's worst
        case to the lab cap), and nothing is recorded as spent yet. The sentence that says so."""
        self.held_for_pod = pod_id
        return (f"the {fmt_usd(self.authorized_usd)} authorization stays held for pod {pod_id}, "
                "not yet proven gone: the next lab's pre-flight counts it, and the command that "
                "proves the pod gone records what it cost")

    @property
    def cost_is(self) -> str:
        return self.cost().what

    def manifest_fields(self) -> dict[str, Any]:
        """The manifest's money fields, by the manifest's names."""
        return {name: getattr(self, name) for name in MANIFEST_FIELDS}

"""BudgetGuard: the hard dollar cap, kept in an append-only ledger (``spend.jsonl``).

Why it exists: tplab rents GPUs with real money. Every lab must ``authorize`` its worst-case cost
before anything is created, and ``record_actual`` what the provider really charged afterwards
(the lab sheet's API: ``BudgetGuard.authorize("lab02-tp-spinup-rtx4090x2", 3.00)`` then
``BudgetGuard.record_actual(label, actual)``). ``BudgetGuardExceeded`` is raised when an
authorization would take spent + held past the cap; tplab never catches it.

The ledger is the only state. Each line is one JSON object::

    {"v": 1, "ts": 1764456000.0, "kind": "authorize", "label": "lab02-tp", "amount_usd": 3.0,
     "auth_id": "5f0c...", "cap_usd": 5.0, "pid": 4242, "host": "laptop"}
    {"v": 1, "ts": 1764459000.0, "kind": "actual", "label": "lab02-tp", "amount_usd": 0.42,
     "auth_id": "5f0c...", "authorized_usd": 3.0}
    {"v": 1, "ts": 1764459100.0, "kind": "release", "label": "lab03", "amount_usd": 3.0,
     "auth_id": "91ab..."}

The figures follow from the ledger by hand:

* **spent** = the sum of ``amount_usd`` over ``actual`` lines;
* **held** = the sum of ``amount_usd`` over ``authorize`` lines whose ``auth_id`` has no later
  ``actual`` or ``release`` line (an *open* authorization: a crash between authorize and record
  leaves it open, counted, and shown by ``tplab budget`` until recorded or released);
* **remaining** = cap - spent - held (negative when the provider charged more than was held).

Decisions:

* ``record_actual`` settles the latest open authorization for the label (or the one named by
  ``auth_id``) and records exactly what was spent, even when that is more than was authorized:
  the ledger says what happened, and the overrun shrinks what later labs may authorize. Spending
  with no open authorization is recorded too (``auth_id`` null), for the same reason.
* A ``release`` line's ``amount_usd`` is the amount it stopped holding; it is never spending.
* Money is summed as :class:`~decimal.Decimal` rounded to micro-dollars, so no float drift; the
  public figures are floats of those exact sums.
* A damaged line (not JSON, wrong types, unknown kind, a release of something not open) is reported
  with its line number and reason and left out of the figures; every other line still counts.

The caps and money helpers are in ``tplab.money.budget_config``. Standard library only.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

from tplab.money.budget_config import (BudgetConfig, BudgetError, default_ledger_path,  # noqa: F401
                                       fmt_usd, to_money)
from tplab.money.ledger import DamagedLine, Ledger, LedgerLine
from tplab.util.pids import pid_alive

LEDGER_VERSION = 1
KINDS = ("authorize", "actual", "release")


class BudgetGuardExceeded(RuntimeError):
    """An authorization (or the pre-flight check) would take the budget past its cap.

    Do not catch it inside tplab: the lab must stop before anything is created.
    """

    def __init__(self, message: str, *, label: str | None = None, amount_usd: float = 0.0,
                 remaining_usd: float = 0.0, cap_usd: float = 0.0) -> None:
        super().__init__(message)
        self.label = label
        self.amount_usd = amount_usd
        self.remaining_usd = remaining_usd
        self.cap_usd = cap_usd


# -------------------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Entry:
    """One counted ledger line."""

    line_no: int
    ts: float
    kind: str
    label: str
    amount_usd: float
    auth_id: str | None


@dataclass(frozen=True)
class Authorization:
    """An open authorization: money held until recorded or released."""

    auth_id: str
    label: str
    amount_usd: float
    ts: float
    line_no: int
    pid: int | None = None
    host: str | None = None
    stale: bool = False
    stale_reason: str | None = None


@dataclass(frozen=True)
class Preflight:
    """The pre-flight budget check: is remaining >= lab cap + buffer?"""

    ok: bool
    remaining_usd: float
    lab_cap_usd: float
    buffer_usd: float
    needed_usd: float
    message: str


@dataclass(frozen=True)
class BudgetSummary:
    """Everything ``tplab budget`` shows, derived from one read of the ledger."""

    ledger_path: str
    cap_usd: float
    spent_usd: float
    held_usd: float
    remaining_usd: float
    entries: list[Entry] = field(default_factory=list)
    open_authorizations: list[Authorization] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def damaged_note(self) -> str | None:
        """One sentence when the ledger has damaged lines (left out of every figure), for each
        command that reads the budget to say, not only `tplab budget`; else None."""
        if not self.damaged:
            return None
        first = self.damaged[0]
        more = f" and {len(self.damaged) - 1} more" if len(self.damaged) > 1 else ""
        return (f"the ledger {self.ledger_path} has {len(self.damaged)} damaged line(s) (line "
                f"{first.line_no}: {first.reason}{more}), left out of the budget's figures: "
                "spend it recorded there is not counted; repair or remove them (`tplab budget` "
                "lists them)")


# ------------------------------------------------------------------------------------- the fold

@dataclass
class _State:
    spent: Decimal = Decimal(0)
    open: dict[str, tuple[Authorization, Decimal]] = field(default_factory=dict)
    seen_ids: set[str] = field(default_factory=set)
    entries: list[Entry] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)

    @property
    def held(self) -> Decimal:
        return sum((amount for _, amount in self.open.values()), Decimal(0))


def _is_finite(value: Any) -> bool:
    """Whether a ledger number is one a float can hold (not 1e309, not a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int past a float's range
        return False


def _is_dollars(amount: Any) -> bool:
    """Whether a ledger amount is a finite, non-negative number of dollars ``to_money`` keeps
    (not ``1e309``, ``NaN``, ``Infinity``, a negative number, a bool or a string)."""
    if isinstance(amount, bool) or not isinstance(amount, (int, Decimal)):
        return False
    try:
        return to_money(amount) >= 0
    except BudgetError:
        return False


def _field_error(data: dict[str, Any]) -> str | None:
    """Why this object is not a valid entry, or None."""
    kind = data.get("kind")
    if "kind" not in data:
        return "missing field 'kind'"
    if kind not in KINDS:
        return f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})"
    for name in ("ts", "label", "amount_usd"):
        if name not in data:
            return f"{kind} entry is missing field {name!r}"
    ts = data["ts"]
    if not _is_finite(ts):
        return f"'ts' must be a finite number, not {ts!r}"
    label = data["label"]
    if not isinstance(label, str) or not label:
        return f"'label' must be a non-empty string, not {label!r}"
    amount = data["amount_usd"]
    if not _is_dollars(amount):
        return f"'amount_usd' must be a finite number of dollars >= 0, not {amount!r}"
    auth_id = data.get("auth_id")
    if kind == "actual":
        if auth_id is not None and not isinstance(auth_id, str):
            return f"'auth_id' must be a string or null, not {auth_id!r}"
    elif not isinstance(auth_id, str) or not auth_id:
        return f"{kind} entry needs a string 'auth_id', not {auth_id!r}"
    return None


def _fold(lines: list[LedgerLine], damaged: list[DamagedLine]) -> _State:
    """Replay the ledger in file order into spent / open authorizations / damaged lines."""
    state = _State()
    state.damaged.extend(damaged)
    for line in lines:
        data = line.data
        problem = _field_error(data)
        if problem is None:
            kind, auth_id = data["kind"], data.get("auth_id")
            if kind == "authorize" and auth_id in state.seen_ids:
                problem = f"authorization {auth_id!r} appears twice"
            elif kind == "release" and auth_id not in state.open:
                problem = f"releases authorization {auth_id!r}, which is not open"
        if problem is not None:
            state.damaged.append(DamagedLine(line.line_no, problem, str(data)[:80]))
            continue
        amount = to_money(data["amount_usd"])
        entry = Entry(line.line_no, float(data["ts"]), kind, data["label"], float(amount), auth_id)
        state.entries.append(entry)
        key = auth_id if isinstance(auth_id, str) else ""  # _field_error: a str where needed
        if kind == "authorize":
            state.seen_ids.add(key)
            pid, host = data.get("pid"), data.get("host")
            auth = Authorization(key, entry.label, entry.amount_usd, entry.ts, line.line_no,
                                 pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                                 host if isinstance(host, str) else None)
            state.open[key] = (auth, amount)
        elif kind == "actual":
            state.spent += amount
            state.open.pop(key, None)
        else:
            state.open.pop(key)
    state.damaged.sort(key=lambda d: d.line_no)
    return state


# ------------------------------------------------------------------------------------ the guard

class BudgetGuard:
    """The dollar cap over one ledger. Safe to use from many processes at once."""

    def __init__(self, ledger_path: str | os.PathLike[str], cap_usd: float = 5.0, *,
                 lab_cap_usd: float | None = None, preflight_buffer_usd: float = 0.5,
                 stale_after_s: float = 3 * 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.ledger = Ledger(ledger_path)
        self._cap = to_money(cap_usd, "cap")
        if self._cap < 0:
            raise BudgetError(f"The cap must be >= 0, not {cap_usd!r}.")
        self._lab_cap = None if lab_cap_usd is None else to_money(lab_cap_usd, "lab cap")
        self._buffer = to_money(preflight_buffer_usd, "pre-flight buffer")
        self.stale_after_s = float(stale_after_s)
        self._clock = clock
        #: called inside the exclusive lock, between reading the ledger and appending to it:
        #: tests park every writer there at once to prove the lock, not luck, keeps the cap
        self.after_read: Callable[[], None] | None = None

    def _read_locked(self, held: Any) -> _State:
        """The ledger's state, read under the lock ``held`` (then the ``after_read`` hook)."""
        state = _fold(*held.read())
        if self.after_read is not None:
            self.after_read()
        return state

    @classmethod
    def from_config(cls, config: BudgetConfig | None = None, mock: bool = False,
                    ledger_path: str | os.PathLike[str] | None = None) -> BudgetGuard:
        """The guard tplab uses: phase cap over the (mock or real) ledger, lab cap per authorization."""
        config = config or BudgetConfig.load(mock=mock)
        return cls(ledger_path or default_ledger_path(mock), config.phase_cap_usd,
                   lab_cap_usd=config.lab_cap_usd,
                   preflight_buffer_usd=config.preflight_buffer_usd,
                   stale_after_s=config.stale_after_s)

    @property
    def ledger_path(self) -> Path:
        return self.ledger.path

    @property
    def cap_usd(self) -> float:
        return float(self._cap)

    # -- figures ---------------------------------------------------------------------------
    def _state(self) -> _State:
        return _fold(*self.ledger.read())

    @property
    def total_spent(self) -> float:
        """Dollars recorded as actually spent."""
        return float(self._state().spent)

    @property
    def held(self) -> float:
        """Dollars held by open authorizations."""
        return float(self._state().held)

    @property
    def remaining(self) -> float:
        """cap - spent - held (negative if spending overran what was authorized)."""
        state = self._state()
        return float(self._cap - state.spent - state.held)

    def summary(self) -> BudgetSummary:
        state = self._state()
        now = self._clock()
        host = socket.gethostname()
        open_auths = []
        for auth, _ in state.open.values():
            reason = None
            if now - auth.ts > self.stale_after_s:
                reason = f"open for {_fmt_age(now - auth.ts)}"
            elif auth.pid is not None and auth.host == host and not pid_alive(auth.pid):
                reason = f"its process {auth.pid} has ended without recording or releasing it"
            open_auths.append(replace(auth, stale=reason is not None, stale_reason=reason))
        return BudgetSummary(str(self.ledger.path), float(self._cap), float(state.spent),
                             float(state.held), float(self._cap - state.spent - state.held),
                             state.entries, open_auths, state.damaged)

    # -- pre-flight --------------------------------------------------------------------------
    def check_preflight(self, lab_cap_usd: float | None = None,
                        buffer_usd: float | None = None) -> Preflight:
        """Whether remaining >= lab cap + buffer (the lab sheet's "remaining reads >= $3.50").

        Without arguments it uses the guard's lab cap (3.00 if it has none) and buffer.
        """
        lab_cap = to_money(lab_cap_usd, "lab cap") if lab_cap_usd is not None \
            else (self._lab_cap if self._lab_cap is not None else to_money(3.0))
        buffer = to_money(buffer_usd, "buffer") if buffer_usd is not None else self._buffer
        needed = lab_cap + buffer
        remaining = self._cap - (state := self._state()).spent - state.held
        ok = remaining >= needed
        if ok:
            message = (f"Budget pre-flight passed: remaining {fmt_usd(remaining)} covers the lab cap "
                       f"{fmt_usd(lab_cap)} + buffer {fmt_usd(buffer)}.")
        else:
            message = (f"Budget pre-flight failed: remaining {fmt_usd(remaining)} is below the "
                       f"{fmt_usd(needed)} needed (lab cap {fmt_usd(lab_cap)} + buffer "
                       f"{fmt_usd(buffer)}); nothing was created — see `tplab budget`.")
        return Preflight(ok, float(remaining), float(lab_cap), float(buffer), float(needed), message)

    def preflight(self, lab_cap_usd: float | None = None,
                  buffer_usd: float | None = None) -> Preflight:
        """:meth:`check_preflight`, raising :class:`BudgetGuardExceeded` when it fails."""
        result = self.check_preflight(lab_cap_usd, buffer_usd)
        if not result.ok:
            raise BudgetGuardExceeded(result.message, amount_usd=result.needed_usd,
                                      remaining_usd=result.remaining_usd, cap_usd=self.cap_usd)
        return result

    # -- the three writes --------------------------------------------------------------------
    def authorize(self, label: str, amount_usd: float) -> str:
        """Hold ``amount_usd`` for ``label``; returns the authorization's id.

        Raises :class:`BudgetGuardExceeded` if spent + held + amount would pass the cap (or the
        amount passes the lab cap). The check and the append happen under one exclusive lock.
        """
        label = _check_label(label)
        amount = to_money(amount_usd)
        if amount <= 0:
            raise BudgetError(f"An authorization must be for more than $0, not {amount_usd!r}.")
        if self._lab_cap is not None and amount > self._lab_cap:
            raise BudgetGuardExceeded(
                f"Authorizing {fmt_usd(amount)} for {label!r} is above the lab cap "
                f"{fmt_usd(self._lab_cap)}; nothing was authorized.",
                label=label, amount_usd=float(amount), cap_usd=float(self._lab_cap))
        auth_id = uuid.uuid4().hex
        with self.ledger.locked() as held:
            state = self._read_locked(held)
            remaining = self._cap - state.spent - state.held
            if amount > remaining:
                raise BudgetGuardExceeded(
                    f"Authorizing {fmt_usd(amount)} for {label!r} would pass the cap: cap "
                    f"{fmt_usd(self._cap)}, spent {fmt_usd(state.spent)}, held "
                    f"{fmt_usd(state.held)}, remaining {fmt_usd(remaining)}; nothing was "
                    f"authorized — see `tplab budget`.",
                    label=label, amount_usd=float(amount), remaining_usd=float(remaining),
                    cap_usd=float(self._cap))
            held.append({"v": LEDGER_VERSION, "ts": self._clock(), "kind": "authorize",
                         "label": label, "amount_usd": amount, "auth_id": auth_id,
                         "cap_usd": self._cap, "pid": os.getpid(), "host": socket.gethostname()})
        return auth_id

    def record_actual(self, label: str, amount_usd: float, auth_id: str | None = None) -> Entry:
        """Record what was really spent, settling the latest open authorization for ``label``.

        Records the true amount even when it is above what was authorized (spent is what was
        spent). With ``auth_id`` the named authorization is settled and must be open.
        """
        label = _check_label(label)
        amount = to_money(amount_usd)
        if amount < 0:
            raise BudgetError(f"Actual spending cannot be negative ({amount_usd!r}).")
        with self.ledger.locked() as held:
            state = self._read_locked(held)
            auth = self._find_open(state, label, auth_id, required=auth_id is not None)
            record: dict[str, Any] = {"v": LEDGER_VERSION, "ts": self._clock(), "kind": "actual",
                                      "label": label, "amount_usd": amount,
                                      "auth_id": auth.auth_id if auth else None}
            if auth is not None:
                record["authorized_usd"] = to_money(auth.amount_usd)
            line_no = held.append(record)
        return Entry(line_no, record["ts"], "actual", label, float(amount), record["auth_id"])

    def release(self, label: str, auth_id: str | None = None) -> Entry:
        """Stop holding the latest open authorization for ``label`` (or the one named), spending nothing."""
        label = _check_label(label)
        with self.ledger.locked() as held:
            state = self._read_locked(held)
            auth = self._find_open(state, label, auth_id, required=True)
            assert auth is not None
            amount = to_money(auth.amount_usd)
            record: dict[str, Any] = {"v": LEDGER_VERSION, "ts": self._clock(), "kind": "release",
                                      "label": auth.label, "amount_usd": amount,
                                      "auth_id": auth.auth_id}
            line_no = held.append(record)
        return Entry(line_no, record["ts"], "release", auth.label, float(amount), auth.auth_id)

    @staticmethod
    def _find_open(state: _State, label: str, auth_id: str | None,
                   required: bool) -> Authorization | None:
        if auth_id is not None:
            found = state.open.get(auth_id)
            if found is None or found[0].label != label:
                raise BudgetError(f"There is no open authorization {auth_id!r} for {label!r}; "
                                  f"see `tplab budget` for the open ones.")
            return found[0]
        matches = [auth for auth, _ in state.open.values() if auth.label == label]
        if not matches:
            if required:
                raise BudgetError(f"There is no open authorization for {label!r}; "
                                  f"see `tplab budget` for the open ones.")
            return None
        return matches[-1]


def _check_label(label: Any) -> str:
    if not isinstance(label, str) or not label.strip():
        raise BudgetError(f"A budget label must be a non-empty string, not {label!r}.")
    return label


def _fmt_age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds % 60:02d}s"

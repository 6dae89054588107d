"""The budget's settings (``budget.toml``) and dollar amounts: the caps, and money as Decimal.

Why apart from ``tplab.money.budget``: the caps are read by commands that never touch the ledger
(``tplab run --help`` defaults, the dashboard's first paint), and money formatting is used
everywhere a dollar figure is shown. ``tplab.money.budget`` (BudgetGuard) builds on these.
Standard library only (``tplab.home.paths`` imports platformdirs lazily).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, fields, replace
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from tplab.home.paths import budget_file, tplab_home

LEDGER_NAME = "spend.jsonl"
_QUANTUM = Decimal("0.000001")
#: the largest dollar figure kept to the micro-dollar (Decimal's default 28 digits)
_LARGEST = "$10^22"


class BudgetError(ValueError):
    """A mistake in how the budget is used or configured (bad amount, bad config, nothing open)."""


# ---------------------------------------------------------------------------------------- money

def to_money(value: Any, what: str = "amount") -> Decimal:
    """A dollar amount as a Decimal rounded to micro-dollars; rejects bools, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        raise BudgetError(f"The {what} must be a number of dollars, not {value!r}.")
    try:
        dec = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise BudgetError(f"The {what} must be a number of dollars, not {value!r}.") from None
    if not dec.is_finite():
        raise BudgetError(f"The {what} must be a finite number of dollars, not {value!r}.")
    try:
        return dec.quantize(_QUANTUM, rounding=ROUND_HALF_UP)
    except InvalidOperation:  # too many digits for a micro-dollar (1e309, 10**40)
        raise BudgetError(f"The {what} must be a number of dollars this side of "
                          f"{_LARGEST}, not {value!r}.") from None


def fmt_usd(value: float | Decimal) -> str:
    """A dollar amount as every face shows it: ``$3.00``, and under a dollar, where cents would
    hide it, four decimals (``$0.0042``, ``$0.0070``)."""
    dec = Decimal(str(value))
    sign = "-" if dec < 0 else ""
    dec = abs(dec)
    if dec == dec.quantize(Decimal("0.01")) or dec >= 1:
        return f"{sign}${dec.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)}"
    return f"{sign}${dec.quantize(Decimal('0.0001'), rounding=ROUND_HALF_UP)}"


# --------------------------------------------------------------------------------------- config

@dataclass(frozen=True)
class BudgetConfig:
    """The caps. Loaded from ``budget.toml`` in the config folder (``tplab.home.paths.budget_file``;
    top-level keys of the same names)."""

    lab_cap_usd: float = 3.0            # most one lab may authorize (the lab sheet's hard $3)
    phase_cap_usd: float = 5.0          # the ledger's cap: spent + held never exceeds it
    preflight_buffer_usd: float = 0.5   # pre-flight wants remaining >= lab cap + this
    stale_after_s: float = 3 * 3600.0   # an open authorization older than this is flagged stale

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise BudgetError(f"Budget setting {f.name} must be a number >= 0, not {value!r}.")
            object.__setattr__(self, f.name, float(value))
        if self.lab_cap_usd > self.phase_cap_usd:
            raise BudgetError(
                f"The lab cap (${self.lab_cap_usd:.2f}) is above the phase cap "
                f"(${self.phase_cap_usd:.2f}); lower lab_cap_usd or raise phase_cap_usd.")

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, mock: bool = False) -> BudgetConfig:
        """Read the config file if there is one (mock mode falls back to the real home's file)."""
        if path is None:
            path = budget_file(mock)  # the config folder's (tplab.home.paths says where)
            if path is None:
                return cls()
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BudgetError(f"Budget config {path} does not exist.") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise BudgetError(f"Budget config {path} is not valid TOML ({exc}); fix it.") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BudgetError(f"Budget config {path} has unknown setting(s) {', '.join(unknown)}; "
                              f"known are {', '.join(sorted(known))}.")
        try:
            config = cls(**data)
        except BudgetError as exc:
            text = str(exc)
            raise BudgetError(f"Budget config {path}: {text[:1].lower()}{text[1:]}") from None
        object.__setattr__(config, "_file", (path, frozenset(data)))
        return config

    def _where(self, key: str) -> str:
        """Where a setting's value came from: the config file's key, or the default."""
        path, keys = getattr(self, "_file", (None, frozenset()))
        return f"{key} in {path}" if key in keys else "the default"

    def with_overrides(self, **overrides: float | None) -> BudgetConfig:
        """A copy with the given settings replaced (``None`` leaves a setting as it is). The
        overrides are command-line flags (``--lab-cap``, ``--phase-cap``): a lab cap above the
        phase cap is said with the flag or the config key each value came from."""
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            return replace(self, **given)
        except BudgetError:
            lab = given.get("lab_cap_usd", self.lab_cap_usd)
            phase = given.get("phase_cap_usd", self.phase_cap_usd)
            if not (0 <= phase < lab and ("lab_cap_usd" in given or "phase_cap_usd" in given)):
                raise  # another setting's own sentence (a negative cap, say)
            said_lab = (f"--lab-cap {fmt_usd(lab)}" if "lab_cap_usd" in given
                        else f"the lab cap {fmt_usd(lab)} ({self._where('lab_cap_usd')})")
            said_phase = (f"--phase-cap {fmt_usd(phase)}" if "phase_cap_usd" in given
                          else f"the phase cap {fmt_usd(phase)} ({self._where('phase_cap_usd')})")
            fix = (f"pass --lab-cap {fmt_usd(phase)} or less" if "lab_cap_usd" in given
                   else f"pass --phase-cap {fmt_usd(lab)} or more")
            raise BudgetError(f"{said_lab} is above {said_phase}: one lab may not authorize more "
                              f"than the whole phase; {fix}.") from None


def default_ledger_path(mock: bool = False) -> Path:
    """``TPLAB_HOME/spend.jsonl``; mock spending has its own ledger under ``mock/``."""
    return tplab_home(mock) / LEDGER_NAME

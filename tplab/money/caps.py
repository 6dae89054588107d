"""A lab's caps, resolved once: ``budget.toml`` with the flags on top, and what follows from them.

Why one function: the caps decide whether money may be spent, and every face that speaks of
them must say the same figures for the same flags. `tplab run` (whatever ``--provider``), the
dashboard's pre-start check and its Budget panel, `tplab check` and `tplab budget` all call
``resolve_caps`` and read the lab cap, the phase cap, the pre-flight buffer, the 80 % alert and
an offer's worst case from the ``Caps`` it returns; none of them reads ``budget.toml`` or
applies a flag of its own (``tests/money/test_caps.py`` holds every face to it).

A flag left out (None) keeps the file's value; a lab cap above the phase cap is refused here,
in one sentence that names the flag or the file each figure came from (``BudgetError``).
Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tplab.money.budget import BudgetGuard
from tplab.money.budget_config import BudgetConfig, default_ledger_path
from tplab.money.worst_case import WorstCase, worst_case

#: the share of a lab's authorization at which the lab warns (the lab sheet's 80 % alert)
ALERT_SHARE = 0.8


@dataclass(frozen=True)
class Caps:
    """The caps one lab (or one face) works under, and the ledger they are held against."""

    config: BudgetConfig        # the file's settings with the flags applied
    mock: bool = False
    ledger_path: Path | None = None
    #: the lab's wall-clock cap: the pod's watchdog ends it there, so price x this is the most
    #: one pod can bill (None: not a lab's, e.g. `tplab budget`)
    wall_cap_s: float | None = None

    @property
    def lab_cap_usd(self) -> float:
        return self.config.lab_cap_usd

    @property
    def phase_cap_usd(self) -> float:
        return self.config.phase_cap_usd

    @property
    def preflight_buffer_usd(self) -> float:
        return self.config.preflight_buffer_usd

    @property
    def needed_usd(self) -> float:
        """What the pre-flight wants left before a lab starts: the lab cap + the buffer."""
        return self.lab_cap_usd + self.preflight_buffer_usd

    @property
    def alert_share(self) -> float:
        return ALERT_SHARE

    def alert_usd(self, authorized_usd: float) -> float:
        """The accrued cost at which a lab holding ``authorized_usd`` warns."""
        return ALERT_SHARE * authorized_usd

    def worst_case(self, usd_per_hr: float, wall_cap_s: float | None = None) -> WorstCase:
        """An offer's price for the whole wall cap, held against the lab cap (the one rule,
        ``tplab.money.worst_case``)."""
        wall = wall_cap_s if wall_cap_s is not None else self.wall_cap_s
        if wall is None:
            raise ValueError("a worst case needs the lab's wall cap")
        return worst_case(usd_per_hr, wall, self.lab_cap_usd)

    def guard(self) -> BudgetGuard:
        """The ledger under these caps: the phase cap over it, the lab cap per authorization."""
        return BudgetGuard.from_config(self.config, mock=self.mock,
                                       ledger_path=self.ledger_path
                                       or default_ledger_path(self.mock))

    def describe(self) -> str:
        """'lab cap $6.00, phase cap $10.00' (what a face says the caps are)."""
        return f"lab cap ${self.lab_cap_usd:.2f}, phase cap ${self.phase_cap_usd:.2f}"


def resolve_caps(*, mock: bool = False, lab_cap_usd: float | None = None,
                 phase_cap_usd: float | None = None,
                 preflight_buffer_usd: float | None = None,
                 config_path: str | os.PathLike[str] | None = None,
                 ledger_path: str | os.PathLike[str] | None = None,
                 wall_cap_s: float | None = None) -> Caps:
    """The one resolution of the caps: ``budget.toml`` (``config_path``, else
    ``TPLAB_HOME[/mock]/budget.toml``, else the defaults) with the flags given on top. A
    ``BudgetError`` (one sentence) when the file or the flags cannot stand together."""
    config = BudgetConfig.load(config_path, mock=mock).with_overrides(
        lab_cap_usd=lab_cap_usd, phase_cap_usd=phase_cap_usd,
        preflight_buffer_usd=preflight_buffer_usd)
    return Caps(config, mock, Path(ledger_path) if ledger_path else None,
                float(wall_cap_s) if wall_cap_s is not None else None)

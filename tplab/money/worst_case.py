"""The lab's one money rule before it rents: the worst case is the hourly price for the whole
wall cap, and it must fit the lab cap.

Why a module of its own: the pre-flight that refuses a lab, ``--provider auto`` choosing a cloud,
the spot stub's on-demand quote and `tplab check` all apply this rule; written in each, a change
to it (a tolerance, the hours) reached some of them only. The watchdog ends a pod at the wall cap
whatever the client does, so price × wall cap bounds what one pod can bill. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: below a tenth of a millicent, a worst case equal to the cap fits it (float rounding)
TOLERANCE_USD = 1e-9


@dataclass(frozen=True, slots=True)
class WorstCase:
    """One price held against one lab cap over one wall cap."""

    usd_per_hr: float
    wall_cap_s: float
    lab_cap_usd: float

    @property
    def hours(self) -> float:
        return self.wall_cap_s / 3600.0

    @property
    def usd(self) -> float:
        """What the pod can bill before its watchdog ends it at the wall cap."""
        return self.usd_per_hr * self.hours

    @property
    def fits(self) -> bool:
        return self.usd <= self.lab_cap_usd + TOLERANCE_USD

    def text(self) -> str:
        """The worst case as every face shows it (``worst_case_text``)."""
        return worst_case_text(self.usd)


def worst_case_text(usd: float) -> str:
    """A worst case in dollars and cents, rounded up: a bound shown below itself could read as
    fitting a cap it does not fit ("$3.00, above the lab cap $3.00")."""
    cents = math.ceil(round(usd * 100, 6))
    return f"${cents / 100:.2f}"


def worst_case(usd_per_hr: float, wall_cap_s: float, lab_cap_usd: float) -> WorstCase:
    return WorstCase(float(usd_per_hr), float(wall_cap_s), float(lab_cap_usd))

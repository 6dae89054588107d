"""The one money rule before a rent: price × wall cap must fit the lab cap (a worst case equal
to the cap fits it)."""

from __future__ import annotations

import pytest

from tplab.money.worst_case import worst_case


def test_the_worst_case_is_the_price_for_the_whole_wall_cap():
    w = worst_case(0.70, 7200, 3.0)
    assert w.hours == 2.0 and w.usd == pytest.approx(1.40) and w.fits
    assert not worst_case(1.60, 7200, 3.0).fits          # $3.20 > $3.00
    assert worst_case(1.50, 7200, 3.0).fits               # exactly the cap: fits
    assert worst_case(0.1 + 0.2, 3600, 0.3).fits          # float rounding is not a refusal
    assert not worst_case(3.0001, 3600, 3.0).fits


def test_a_worst_case_never_shows_below_itself():
    """A worst case a hair over the cap reads as over it ("$3.01, above the lab cap $3.00"),
    never as the cap itself; one at the cap, or a float's hair under, reads as the cap."""
    over = worst_case(3.004, 3600, 3.0)
    assert not over.fits and over.text() == "$3.01"
    assert worst_case(1.50, 7200, 3.0).text() == "$3.00"
    assert worst_case(0.1 + 0.2, 3600, 0.3).text() == "$0.30"
    assert worst_case(0.369, 7200, 3.0).text() == "$0.74"

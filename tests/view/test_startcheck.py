"""A start is refused before anything exists only for what the lab's own pre-flight would
refuse: a hold that a killed client left is settled by that pre-flight first, so it is not a
reason to refuse; a hold of a client still running is."""

from __future__ import annotations

import subprocess
import sys

from tplab.money.budget import BudgetGuard
from tplab.lab.lab_config import LabConfig
from tplab.view.startcheck import refusal

LABEL = "lab02-tp-spinup-rtx4090x2"


def test_a_killed_clients_hold_does_not_refuse_the_next_start():
    code = ("from tplab.money.budget import BudgetGuard; "
            f"print(BudgetGuard.from_config(mock=True).authorize({LABEL!r}, 3.0))")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
    assert refusal(LabConfig(mock=True)) is None  # $2 remaining, but the $3 hold is a dead one's


def test_a_running_clients_hold_refuses_with_one_sentence():
    BudgetGuard.from_config(mock=True).authorize(LABEL, 3.0)  # this process: alive
    sentence = refusal(LabConfig(mock=True))
    assert sentence and "Budget pre-flight would fail: remaining $2.00" in sentence

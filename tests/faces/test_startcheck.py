"""A start is refused before anything exists only for what the lab's own pre-flight would
refuse: a hold that a killed client left is settled by that pre-flight first, so it is not a
reason to refuse; a hold of a client still running is."""

from __future__ import annotations

import subprocess
import sys

from tplab.money.budget import BudgetGuard
from tplab.lab.lab_config import LabConfig
from tplab.faces.startcheck import refusal

LABEL = "lab02-tp-spinup-rtx4090x2"


def test_a_killed_clients_hold_does_not_refuse_the_next_start():
    code = ("from tplab.money.budget import BudgetGuard; "
            f"print(BudgetGuard.from_config(mock=True).authorize({LABEL!r}, 3.0))")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
    assert refusal(LabConfig(mock=True)) is None  # $2 remaining, but the $3 hold is a dead one's


def test_a_running_clients_hold_refuses_with_one_sentence_naming_that_lab():
    """A second lab while one runs: the sentence says the running lab holds the money, which
    comes back when it ends (not only that $2.00 remains)."""
    import os

    from tplab.lab import instances
    auth = BudgetGuard.from_config(mock=True).authorize(LABEL, 3.0)  # this process: alive
    instances.save(instances.InstanceRecord(
        lab_id="20261203-134012-ab12cd", label=LABEL, pod_name="tplab-x", provider="runpod",
        gpu_type="NVIDIA GeForce RTX 4090", gpu_count=2, spot=True, usd_per_hr=0.7,
        state=instances.CREATED, pod_id="p1", mock=True, auth_id=auth))
    sentence = refusal(LabConfig(mock=True))
    assert sentence and "Budget pre-flight would fail: remaining $2.00" in sentence
    assert (f"held: $3.00 by lab 20261203-134012-ab12cd (still running here, pid {os.getpid()}: "
            "its hold is settled when it ends); nothing was created") in sentence


def test_an_image_that_cannot_drive_the_gpu_is_refused_before_the_lab_exists():
    image = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
    sentence = refusal(LabConfig(mock=True, provider="vast", gpu_type="RTX 5090", image=image))
    assert sentence == (
        f"The image {image} (torch 2.4.0, CUDA 12.4) has no kernels for RTX 5090 (Blackwell, "
        "sm_120), which needs a torch built for CUDA 12.8 or newer: drop --image for the "
        "default pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime, or name another image built for "
        "CUDA 12.8 or newer. Nothing was created.")
    # the default for that GPU, an image tplab cannot read, and auto with one cloud that can
    assert refusal(LabConfig(mock=True, provider="vast", gpu_type="RTX 5090")) is None
    assert refusal(LabConfig(mock=True, provider="vast", gpu_type="RTX 5090",
                             image="me/private:1")) is None
    assert refusal(LabConfig(mock=True, provider="runpod", image=image)) is not None  # /start.sh
    assert refusal(LabConfig(mock=True, provider="auto", image=image)) is None  # Vast can

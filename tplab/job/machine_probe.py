"""A fixed reference workload timed all through the run: how steady was the machine itself?

Why: on a shared machine the speed of one core can change by a third for seconds at a time with
nothing of ours running. On the 2-core development VM (docs/measurement.md) a one-thread matmul
loop ran 30-45 % slower in stretches of several seconds, 36 % of a 40 s window, while both of the
guest's CPUs were otherwise idle: another tenant on the host. No measurement design makes a figure
steadier than the machine under it. This probe says how steady that was, so that a flagged
figure can be told apart from a flaw of the lab's measurement, and a student comparing two runs
knows whether they are comparable.

The workload is fixed: a 64x256 by 256x256 fp32 matmul on the CPU, 20 times (about a millisecond
here), repeated 3 times and the fastest kept (a timer tick or an interrupt inside one repetition
is not the machine's speed). Rank 0 times it before every single-device pass of the lab and in
every round of the d_model sweep, while the other ranks wait at a barrier: ~3 ms a sample.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from tplab.stats.harness import figure

REPS, BEST_OF = 20, 3
DESCRIPTION = (f"a fixed 64x256 @ 256x256 fp32 matmul on rank 0's CPU, {REPS} times, best of "
               f"{BEST_OF}, timed before every single-device pass and every d_model sweep round "
               "(the other ranks at a barrier); its spread is the machine's own, not the lab's")


class MachineProbe:
    """Collects one reference timing per call; ``section()`` summarizes them for results.json."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1234)
        self._a = torch.randn(64, 256, generator=g)
        self._w = torch.randn(256, 256, generator=g)
        self.samples_ms: list[float] = []

    def sample(self) -> None:
        best = float("inf")
        for _ in range(BEST_OF):
            t = time.perf_counter()
            for _ in range(REPS):
                torch.mm(self._a, self._w)
            best = min(best, (time.perf_counter() - t) * 1e3)
        self.samples_ms.append(best)

    def section(self) -> dict[str, Any] | None:
        """results.json's ``machine`` block: the probe's figure (median, spread, n, flag)."""
        if not self.samples_ms:
            return None
        return {"reference": DESCRIPTION, "ms": figure(self.samples_ms).to_dict(),
                "samples_ms": [round(x, 4) for x in self.samples_ms]}

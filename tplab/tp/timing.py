"""Comm instrumentation: how long the TP collectives take, how often, and how many bytes they move.

Why this module exists: the lab reports "all-reduce ms inside each token". On a GPU a collective is
asynchronous, so the time is only meaningful between two device syncs; this module brackets each
collective with the caller's ``sync`` (e.g. ``torch.cuda.synchronize``) and ``time.perf_counter``
while a ``comm_timing`` block is active. With no block active, a collective pays one check of a
module-level list, so the plain (timed-per-token) decode pass is not perturbed.

This module travels to the pod: it imports only torch and the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

__all__ = ["ACTIVE", "CommTiming", "comm_timing", "run_timed"]


@dataclass
class CommTiming:
    """What the collectives did while a ``comm_timing`` block was active.

    ``ms`` is wall time inside collectives (bracketed by ``sync()``), ``calls`` the number of
    collectives that communicated, ``bytes`` the payload each rank contributed or received:
    the tensor's size for an all-reduce, the gathered tensor's size for an all-gather.
    """

    sync: Callable[[], None] | None = None
    ms: float = 0.0
    calls: int = 0
    bytes: int = 0
    by_op: dict[str, int] = field(default_factory=dict)


ACTIVE: list[CommTiming] = []


@contextmanager
def comm_timing(sync: Callable[[], None] | None = None) -> Iterator[CommTiming]:
    """Measure every collective issued inside the block.

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called before and after each collective so the
    measured interval covers the communication itself and not queued compute. Blocks may nest;
    every active timer sees every collective.
    """
    timer = CommTiming(sync=sync)
    ACTIVE.append(timer)
    try:
        yield timer
    finally:
        ACTIVE.remove(timer)


def run_timed(op: str, nbytes: int, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Run the collective ``fn`` between syncs and add it to every active timer."""
    syncs = {id(t.sync): t.sync for t in ACTIVE if t.sync is not None}
    for s in syncs.values():
        s()
    start = time.perf_counter()
    out = fn()
    for s in syncs.values():
        s()
    ms = (time.perf_counter() - start) * 1e3
    for t in ACTIVE:
        t.ms += ms
        t.calls += 1
        t.bytes += nbytes
        t.by_op[op] = t.by_op.get(op, 0) + 1
    return out

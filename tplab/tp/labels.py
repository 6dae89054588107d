"""Labels for the profiler: each collective's span named by what it is, only while asked for.

Why this module exists: the lab's profiled pass (``tplab.job.profiled_pass``) shows a token as
time, rank by rank, in torch's profiler (a Chrome/Perfetto trace); for that every collective
must be a span named by its layer and place ("L3 attn-out all-reduce", see
``tplab.records.trace_names``). A ``torch.profiler.record_function`` costs a few microseconds
even with no profiler running, and a TP token makes 14 collectives, so the collectives open one
only inside a ``labelled()`` block: outside it each pays one check of a module-level list (the
same fast path as ``timing.py``'s "no timer active"), which ``benchmarks/bench_labels.py``
measures against no labels at all.

This module travels to the pod: it imports only torch and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch

__all__ = ["ON", "labelled", "span"]

#: non-empty while a ``labelled()`` block is active (the collectives check it)
ON: list[bool] = []


@contextmanager
def labelled() -> Iterator[None]:
    """Inside the block every collective (and whatever calls ``span``) is a named span in a
    running profiler's trace. Blocks may nest."""
    ON.append(True)
    try:
        yield
    finally:
        ON.pop()


def span(name: str) -> AbstractContextManager[Any]:
    """A span named ``name`` in the trace of the profiler running now (torch 2.4 and 2.13 alike:
    ``torch.profiler.record_function``)."""
    return torch.profiler.record_function(name)

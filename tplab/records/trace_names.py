"""The names the profiled pass gives its spans in the trace: each token step, each collective.

Why here: the pod writes these names (``tplab.tp`` labels each collective, the job each token
step) and both the pod (``timeline``: the wait / wire split) and the client (the dashboard, the
text timeline) read them back out of the trace; one spelling, one parser. The names are what a
student sees in Perfetto, so they say what the span is in words:

    "tp token 7"                  the 7th step of a TP decode (step 0 is the prefill)
    "single token 7"              the same step decoded on one device
    "embedding all-reduce"        the sharded embedding's all-reduce
    "L3 attn-out all-reduce"      layer 3's attention output projection (RowParallelLinear)
    "L3 mlp-down all-reduce"      layer 3's MLP down projection (RowParallelLinear)
    "logits all-gather"           the LM head's gather of the vocabulary shards

Standard library only: travels to the pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: where a collective sits in the model, in the order a forward meets them
PLACES = ("embedding", "attn-out", "mlp-down", "logits")
#: the collective ops, as spelled in the names
OPS = ("all-reduce", "all-gather")

_TOKEN = re.compile(r"^(single|tp) token (\d+)$")
_COLLECTIVE = re.compile(r"^(?:L(\d+) )?(embedding|attn-out|mlp-down|logits|collective) "
                         r"(all-reduce|all-gather)$")
#: the name a collective gets when nothing labelled it (a layer used outside MiniGPT)
UNNAMED = {"all_reduce": "collective all-reduce", "all_gather": "collective all-gather"}


def token_name(mode: str, pos: int) -> str:
    """The span of one decode step: ``"tp token 7"``."""
    return f"{mode} token {pos}"


def step_name(pos: int) -> str:
    """torch.profiler's own name for a step (``"ProfilerStep#7"``), which the pass puts around
    each token's span: the field's tools (HTA, TensorBoard's profiler view) find iterations by it."""
    return f"ProfilerStep#{pos}"


def collective_name(place: str, op: str, layer: int | None = None) -> str:
    """A collective's span: ``collective_name("attn-out", "all-reduce", 3)`` is
    ``"L3 attn-out all-reduce"``."""
    if place not in PLACES or op not in OPS:
        raise ValueError(f"unknown collective {place!r} {op!r}")
    return (f"L{layer} " if layer is not None else "") + f"{place} {op}"


def parse_token(name: str) -> tuple[str, int] | None:
    """(mode, position) of a token step's span, or None."""
    m = _TOKEN.match(name)
    return (m.group(1), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Collective:
    """What a collective span's name says: its layer (None outside the blocks), its place in
    the model and its op."""

    layer: int | None
    place: str
    op: str

    @property
    def short(self) -> str:
        """A lane's label: "E" (embedding), "3a" (layer 3 attn-out), "3m", "G" (the gather)."""
        if self.place == "embedding":
            return "E"
        if self.place == "logits":
            return "G"
        if self.layer is None:
            return "C"
        return f"{self.layer}{self.place[0]}"


def parse_collective(name: str) -> Collective | None:
    """The collective a span's name describes, or None when it is not one of ours."""
    m = _COLLECTIVE.match(name)
    if m is None:
        return None
    return Collective(int(m.group(1)) if m.group(1) is not None else None, m.group(2), m.group(3))

"""What each distributed pattern would communicate for this model, computed from its real shapes.

``DISTRIBUTED.md`` argues from these numbers, so every one of them is derived from a
``ModelShapes`` (parameter shapes, dtype and TP collectives read from the checkpoint), never from a
constant. "Payload" is the size of the tensor a collective works on; what one rank puts on the wire
in a ring is a fraction of it: 2(p-1)/p of the payload for an all-reduce, (p-1)/p for an all-gather
or a reduce-scatter.

- DDP: every gradient is all-reduced once per step (payload = all parameters × dtype bytes).
- FSDP (FULL_SHARD, one unit per transformer block, the rest in the root unit): per block and step an
  all-gather of its weights before the forward, another before the backward (they were freed after
  the forward), and a reduce-scatter of its gradients; the root unit is not freed after the forward
  (``_post_forward_reshard`` in FSDP1, the root heuristic in FSDP2), so it is gathered once.
- TP: per decoded token, each collective in ``ModelShapes.tp_collectives`` once, on one token's
  row (a prefill of T tokens multiplies each payload by T).
- PP: per micro-batch, each stage boundary sends the residual stream forward and receives its
  gradient back, [micro-batch, tokens, d_model] each way.

Standard library and ``tplab.scaling.latency`` only (no torch).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from tplab.sidelabs import strategy
from tplab.scaling import latency
from tplab.scaling.calibration import calibrate
from tplab.sidelabs.model_shapes import ModelShapes, numel

WORLD_SIZE = 2                  # the lab's world size: 2 ranks (2 GPUs, or 2 gloo processes here)
TRAIN_SEQUENCES = 16            # sequences per rank per step: `tplab ddp`'s default --batch-size
PP_MICRO_BATCHES = 4            # that batch cut into 4 micro-batches for the pipeline
DEVICE_MEMORY_BYTES = 80 * 10**9  # an 80 GB device: the A100/H100 80GB of tplab's hardware profiles
TRAIN_STATE_COPIES = 4          # AdamW in the model's dtype: weights, gradients, two moments
CROSSOVER_PROFILES = ("h100x2-nvlink", "a100x2-nvlink", "rtx4090x2-pcie", "cpu-gloo")
_BLOCK = re.compile(r"^blocks\.(\d+)\.")


def ring_share(op: str, p: int = WORLD_SIZE) -> float:
    """Fraction of a collective's payload one rank sends in a ring of ``p`` ranks."""
    return 2 * (p - 1) / p if op == "all_reduce" else (p - 1) / p


@dataclass(frozen=True)
class DDPCost:
    params: int
    grad_bytes: int              # all-reduce payload per step
    wire_bytes_per_rank: float   # ring, WORLD_SIZE ranks


@dataclass(frozen=True)
class FSDPUnit:
    name: str
    params: int
    bytes: int                   # the unit's full weights (= its gradients) in the model's dtype
    all_gathers: int             # per step
    reduce_scatters: int         # per step


@dataclass(frozen=True)
class FSDPCost:
    units: tuple[FSDPUnit, ...]
    all_gather_bytes: int        # payload per step, all units
    reduce_scatter_bytes: int
    wire_bytes_per_rank: float
    state_bytes: int             # weights + grads + AdamW moments, whole model
    state_bytes_per_rank: float  # the same, sharded over WORLD_SIZE ranks

    @property
    def blocks(self) -> tuple[FSDPUnit, ...]:
        return tuple(u for u in self.units if u.name != "root")

    @property
    def root(self) -> FSDPUnit:
        return next(u for u in self.units if u.name == "root")


@dataclass(frozen=True)
class TPCost:
    all_reduces: int             # per token
    all_reduce_bytes: tuple[int, ...]   # payload of each, per token
    all_gathers: int
    all_gather_bytes: tuple[int, ...]   # gathered (whole) tensor of each, per token
    not_divisible: tuple[str, ...]      # dimensions WORLD_SIZE does not divide

    @property
    def bytes_per_token(self) -> int:
        return sum(self.all_reduce_bytes) + sum(self.all_gather_bytes)

    @property
    def collectives(self) -> int:
        return self.all_reduces + self.all_gathers


@dataclass(frozen=True)
class PPCost:
    stages: int
    layers_per_stage: tuple[int, ...]
    d_model: int
    tokens: int                  # per sequence: block_size, the longest the model takes
    micro_batch: int             # sequences per micro-batch
    micro_batches: int
    bytes_per_token: int         # one token's residual stream crossing one boundary
    bytes_per_micro_batch: int   # forward send (and the same backward) per boundary
    bytes_per_step: int          # both directions, every boundary, every micro-batch
    bubble: float                # GPipe-style idle fraction (p-1)/(m+p-1)


def ddp_cost(m: ModelShapes) -> DDPCost:
    grad = m.n_params * m.bytes_per_elem
    return DDPCost(m.n_params, grad, grad * ring_share("all_reduce"))


def fsdp_cost(m: ModelShapes) -> FSDPCost:
    groups: dict[str, int] = {}
    for name, shape in m.params.items():
        hit = _BLOCK.match(name)
        key = f"blocks.{hit.group(1)}" if hit else "root"
        groups[key] = groups.get(key, 0) + numel(shape)
    units = tuple(FSDPUnit(k, n, n * m.bytes_per_elem, 1 if k == "root" else 2, 1)
                  for k, n in sorted(groups.items(), key=lambda kv: (kv[0] != "root", _order(kv[0]))))
    ag = sum(u.bytes * u.all_gathers for u in units)
    rs = sum(u.bytes * u.reduce_scatters for u in units)
    state = TRAIN_STATE_COPIES * m.n_params * m.bytes_per_elem
    return FSDPCost(units, ag, rs, (ag + rs) * ring_share("all_gather"), state, state / WORLD_SIZE)


def _order(name: str) -> int:
    return int(name.split(".")[1]) if name.startswith("blocks.") else -1


def tp_cost(m: ModelShapes) -> TPCost:
    b = m.bytes_per_elem
    ar = tuple(c.elems_per_token * b for c in m.tp_collectives if c.op == "all_reduce")
    ag = tuple(c.elems_per_token * b for c in m.tp_collectives if c.op == "all_gather")
    nd = tuple(k for k in ("n_head", "d_ff", "vocab_size") if m.config[k] % WORLD_SIZE)
    return TPCost(len(ar), ar, len(ag), ag, nd)


def pp_cost(m: ModelShapes, stages: int = WORLD_SIZE, sequences: int = TRAIN_SEQUENCES,
            micro_batches: int = PP_MICRO_BATCHES) -> PPCost:
    n_layer = len({hit.group(1) for k in m.params if (hit := _BLOCK.match(k))})
    block_size, d = m.params["pos_emb.weight"]  # the residual stream's width and the longest sequence
    per = tuple(n_layer // stages + (1 if i < n_layer % stages else 0) for i in range(stages))
    mb = max(1, sequences // micro_batches)
    tok = d * m.bytes_per_elem
    per_mb = mb * block_size * tok
    return PPCost(stages, per, d, block_size, mb, micro_batches, tok, per_mb,
                  2 * per_mb * micro_batches * (stages - 1),
                  (stages - 1) / (micro_batches + stages - 1))


# ---------------------------------------------------------------- when the answer changes

def pattern_params(m: ModelShapes, d: float) -> float:
    """Parameters of this model's pattern at width ``d`` (n_layer, vocab, block_size fixed,
    d_ff = 4·d, as in ``tplab.scaling.latency``): per block 12d² + 13d, plus both embeddings, ln_f, head."""
    c = m.config
    return c["n_layer"] * (12 * d * d + 13 * d) + (2 * c["vocab_size"] + c["block_size"] + 2) * d


def _solve_d(a: float, b: float, target: float) -> float:
    """The positive d with a·d² + b·d = target."""
    return (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a)


@dataclass(frozen=True)
class Thresholds:
    """Where the answer would change, for this model's pattern grown in d_model."""

    device_bytes: int
    state_copies: int
    fsdp_d_model: float          # whole-model training state no longer fits one device
    fsdp_params: float
    tp_memory_d_model: float     # one block's training state no longer fits (FSDP cannot help)
    tp_crossover: dict[str, float | None]  # profile -> d_model where TP=2 decodes faster than 1 device
    crossover_sources: dict[str, str]
    pattern_matches: bool        # the pattern's formula gives this checkpoint's parameter count


def thresholds(m: ModelShapes, calibration: dict[str, Any] | None = None) -> Thresholds:
    """FSDP's and TP's memory thresholds and TP's latency crossover (``latency.crossover_d_model``).

    ``calibration`` (a TP run's results, as ``TPMeasured.calibration``) calibrates the cpu-gloo
    profile the way ``tplab local`` does; the GPU profiles are used as the assets file has them.
    """
    c, bpe = m.config, m.bytes_per_elem
    per_param = TRAIN_STATE_COPIES * bpe
    lin = 13 * c["n_layer"] + 2 * c["vocab_size"] + c["block_size"] + 2
    fsdp_d = _solve_d(12 * c["n_layer"], lin, DEVICE_MEMORY_BYTES / per_param)
    tp_d = _solve_d(12, 13, DEVICE_MEMORY_BYTES / per_param)
    shape = dataclasses.replace(latency.load_shape(), n_layer=c["n_layer"], vocab_size=c["vocab_size"],
                                head_dim=c["d_model"] // c["n_head"], bytes_per_elem=bpe)
    cross: dict[str, float | None] = {}
    sources: dict[str, str] = {}
    for name in CROSSOVER_PROFILES:
        try:
            prof = latency.load_profile(name)
        except latency.ScalingError:
            continue
        src = "profile as stored in tplab/assets/hardware_profiles.json"
        if name == "cpu-gloo" and calibration:
            try:
                prof = calibrate(prof, calibration, shape)
                src = "calibrated from the TP run quoted above"
            except latency.ScalingError:
                pass
        cross[name] = latency.crossover_d_model(prof, WORLD_SIZE, shape)
        sources[name] = src
    matches = c["d_ff"] == 4 * c["d_model"] and round(pattern_params(m, c["d_model"])) == m.n_params
    return Thresholds(DEVICE_MEMORY_BYTES, TRAIN_STATE_COPIES, fsdp_d, pattern_params(m, fsdp_d), tp_d,
                      cross, sources, matches)


def model_spec(m: ModelShapes) -> strategy.ModelSpec:
    """This checkpoint as the strategy chooser sees it: its parameters, its largest block, and
    `tplab ddp`'s step (TRAIN_SEQUENCES sequences of block_size tokens), AdamW in its dtype."""
    bpe = m.bytes_per_elem
    f = fsdp_cost(m)
    block = max((u.params for u in f.blocks), default=None)
    return strategy.ModelSpec("MiniGPT-grammar", m.n_params, m.config["n_layer"], m.config["d_model"],
                              TRAIN_SEQUENCES * m.config["block_size"], bpe, bpe,
                              (TRAIN_STATE_COPIES - 2) * bpe, block, f.root.params)


#: the lab's cluster as the chooser sees it: WORLD_SIZE devices of DEVICE_MEMORY_BYTES, NVLink
LAB_CLUSTER = strategy.Cluster(DEVICE_MEMORY_BYTES / strategy.GB, WORLD_SIZE, 1, "nvlink")


def choose(m: ModelShapes, cluster: strategy.Cluster = LAB_CLUSTER) -> str:
    """The strategy this model needs on ``cluster`` (``tplab.sidelabs.strategy.choose``)."""
    return strategy.choose(model_spec(m), cluster).strategy

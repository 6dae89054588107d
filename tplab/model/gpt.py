"""MiniGPT-grammar: a small decoder-only transformer, single-device and tensor-parallel, in one file.

In the spirit of nanoGPT's ``model.py``: pre-LayerNorm blocks, GELU MLP, learned position
embeddings, an untied LM head. ``MiniGPT`` is the single-device model (it is what we train and what
the checkpoint stores). ``MiniGPTTP`` is the same network sharded the Megatron way with the layers
of ``tplab.tp``, and it has the *same parameter names*, so a full state dict maps key for key onto
it and ``shard_state_dict`` only has to slice:

    tok_emb              ShardedEmbedding         rows (vocab) split across ranks, one all-reduce
    pos_emb, ln_*, ln_f  replicated
    attn.qkv             ColumnParallelLinear     each rank gets whole heads of q, k and v
    attn.proj            RowParallelLinear        one all-reduce per block
    mlp.up               ColumnParallelLinear
    mlp.down             RowParallelLinear        one all-reduce per block
    lm_head              ColumnParallelLinear over the vocabulary, gather_output=True (all-gather),
                         so every rank holds the full logits and takes the same argmax.

A forward therefore costs 2 all-reduces per layer + 1 for the embedding + 1 all-gather for the logits.
Each of those collectives carries its name for a profiler trace ("L3 attn-out all-reduce",
``tplab.records.trace_names``), shown only while ``tplab.tp.labels.labelled()`` is on.

Incremental decoding uses a ``KVCache`` preallocated to ``block_size`` per layer: a forward with a
cache writes the new keys/values after the cached prefix, attends over prefix + new tokens, and
takes positions from the cache length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tplab.model.config import GPTConfig
from tplab.records.trace_names import collective_name
from tplab.tp import ColumnParallelLinear, RowParallelLinear, ShardedEmbedding, get_rank, get_world_size
from tplab.tp.collectives import ProcessGroup


@dataclass
class KVCache:
    """Keys and values of the tokens seen so far: per layer ``[B, local_heads, block_size, head_dim]``.

    ``length`` is the number of cached positions; the model advances it after each forward.
    """

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    length: int = 0

    @classmethod
    def allocate(cls, n_layer: int, batch_size: int, n_heads: int, block_size: int, head_dim: int,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> KVCache:
        shape = (batch_size, n_heads, block_size, head_dim)
        return cls(k=[torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)],
                   v=[torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)])

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k, v`` ([B, H, T, hd]) after the prefix; return keys/values of prefix + new."""
        end = self.length + k.shape[2]
        self.k[layer][:, :, self.length:end] = k
        self.v[layer][:, :, self.length:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def reset(self) -> None:
        self.length = 0


def _tp_world(group: ProcessGroup, parallel: bool) -> int:
    return get_world_size(group) if parallel else 1


def _divide(config: GPTConfig, dimension: str, world_size: int) -> int:
    size = getattr(config, dimension)
    if size % world_size:
        raise ValueError(f"MiniGPT cannot be split over {world_size} ranks: {dimension}={size} is not "
                         f"divisible by the world size; use a world size that divides {dimension}.")
    return size // world_size


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig, parallel: bool = False,
                 group: ProcessGroup = None) -> None:
        super().__init__()
        ws = _tp_world(group, parallel)
        self.qkv: ColumnParallelLinear | nn.Linear
        self.proj: RowParallelLinear | nn.Linear
        self.n_head = _divide(config, "n_head", ws)  # heads on this rank
        self.head_dim = config.head_dim
        d = config.d_model
        if parallel:
            self.qkv = ColumnParallelLinear(d, 3 * d, group=group)
            self.proj = RowParallelLinear(d, d, input_is_parallel=True, group=group)
        else:
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        B, T, _ = x.shape
        local = self.n_head * self.head_dim
        q, k, v = self.qkv(x).split(local, dim=-1)  # each rank's qkv rows are [q_r; k_r; v_r]
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        start = 0
        if cache is not None:
            start = cache.length
            k, v = cache.append(layer, k, v)
        if start == 0:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
        elif T == 1:
            y = F.scaled_dot_product_attention(q, k, v)  # one new query sees the whole prefix
        else:
            keys = torch.arange(start + T, device=x.device)
            mask = keys[None, :] <= (start + torch.arange(T, device=x.device))[:, None]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, local))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig, parallel: bool = False,
                 group: ProcessGroup = None) -> None:
        super().__init__()
        self.up: ColumnParallelLinear | nn.Linear
        self.down: RowParallelLinear | nn.Linear
        if parallel:
            _divide(config, "d_ff", _tp_world(group, parallel))
            self.up = ColumnParallelLinear(config.d_model, config.d_ff, group=group)
            self.down = RowParallelLinear(config.d_ff, config.d_model, input_is_parallel=True, group=group)
        else:
            self.up = nn.Linear(config.d_model, config.d_ff)
            self.down = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig, parallel: bool = False,
                 group: ProcessGroup = None) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config, parallel, group)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config, parallel, group)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


class MiniGPT(nn.Module):
    """The single-device model. ``forward(idx[B,T], cache=None) -> logits[B,T,vocab]``."""

    parallel = False
    config: GPTConfig
    tok_emb: ShardedEmbedding | nn.Embedding
    pos_emb: nn.Embedding
    blocks: nn.ModuleList
    ln_f: nn.LayerNorm
    lm_head: ColumnParallelLinear | nn.Linear

    def __init__(self, config: GPTConfig, group: ProcessGroup = None) -> None:
        super().__init__()
        self.config = config
        self.group = group
        p, ws = self.parallel, _tp_world(group, self.parallel)
        if p:
            _divide(config, "vocab_size", ws)
            self.tok_emb = ShardedEmbedding(config.vocab_size, config.d_model, group=group)
        else:
            self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, p, group) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        if p:
            self.lm_head = ColumnParallelLinear(config.d_model, config.vocab_size, bias=False,
                                                gather_output=True, group=group)
        else:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.world_size, self.rank = ws, (get_rank(group) if p else 0)
        if p:
            self._name_collectives()
        else:
            self._init_weights()

    def _name_collectives(self) -> None:
        """Each TP layer's collective gets the name a profiler trace shows it by."""
        assert isinstance(self.tok_emb, ShardedEmbedding)
        assert isinstance(self.lm_head, ColumnParallelLinear)
        self.tok_emb.label = collective_name("embedding", "all-reduce")
        for i, block in enumerate(self.blocks):
            assert isinstance(block, Block)
            assert isinstance(block.attn.proj, RowParallelLinear)
            assert isinstance(block.mlp.down, RowParallelLinear)
            block.attn.proj.label = collective_name("attn-out", "all-reduce", i)
            block.mlp.down.label = collective_name("mlp-down", "all-reduce", i)
        self.lm_head.label = collective_name("logits", "all-gather")

    def _init_weights(self) -> None:
        """nanoGPT's init: N(0, 0.02), residual projections scaled by 1/sqrt(2·n_layer)."""
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif param.dim() >= 2:
                std = 0.02 / math.sqrt(2 * self.config.n_layer) if name.endswith(("proj.weight", "down.weight")) else 0.02
                nn.init.normal_(param, mean=0.0, std=std)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch_size: int = 1, device: torch.device | str | None = None) -> KVCache:
        """An empty KV cache for this model (local heads only in the TP build)."""
        if device is None:
            device = self.pos_emb.weight.device
        c = self.config
        return KVCache.allocate(c.n_layer, batch_size, c.n_head // self.world_size, c.block_size,
                                c.head_dim, device=device, dtype=self.pos_emb.weight.dtype)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        return self.lm_head(self.hidden(idx, cache))

    def hidden(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """The final hidden states ``[B, T, d_model]`` (after ``ln_f``): ``forward`` without the LM
        head, so training can compute logits only where there is a target."""
        B, T = idx.shape
        start = cache.length if cache is not None else 0
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} tokens exceeds the model's block_size "
                             f"{self.config.block_size}; use fewer new tokens or a shorter prompt.")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        if cache is not None:
            cache.length = start + T
        return self.ln_f(x)


class MiniGPTTP(MiniGPT):
    """The tensor-parallel build: same parameter names as ``MiniGPT``, each rank holds its shard.

    Fill it with ``load_state_dict(shard_state_dict(full_sd, config, rank, world_size))`` (what
    ``checkpoint.build_tp`` does). Without a process group it is world size 1, i.e. ``MiniGPT``.
    """

    parallel = True


# ---- slicing a full state dict into one rank's shard --------------------------------------------

#: how each (full) parameter is split: "rows"/"cols" = contiguous chunk of dim 0/1, "qkv" = whole heads
#: of q, k and v, anything not listed is replicated.
_SPLIT_RULES: tuple[tuple[str, str], ...] = (
    ("tok_emb.weight", "rows"),
    ("attn.qkv.weight", "qkv"), ("attn.qkv.bias", "qkv"),
    ("attn.proj.weight", "cols"),
    ("mlp.up.weight", "rows"), ("mlp.up.bias", "rows"),
    ("mlp.down.weight", "cols"),
    ("lm_head.weight", "rows"),
)


def split_rule(key: str) -> str:
    for suffix, rule in _SPLIT_RULES:
        if key.endswith(suffix):
            return rule
    return "replicated"


def shard_tensor(full: torch.Tensor, rule: str, rank: int, world_size: int) -> torch.Tensor:
    """This rank's piece of ``full`` under ``rule`` (a copy, contiguous)."""
    if rule == "replicated" or world_size == 1:
        return full.clone()
    if rule == "qkv":  # [3d(, d)]: slice q, k and v separately so the rank gets whole heads of each
        return torch.cat([part.chunk(world_size, dim=0)[rank] for part in full.chunk(3, dim=0)], dim=0).clone()
    dim = 0 if rule == "rows" else 1
    return full.chunk(world_size, dim=dim)[rank].clone()


def shard_state_dict(state_dict: dict[str, torch.Tensor], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """Slice a full (single-device) state dict into rank ``rank``'s shard for ``MiniGPTTP``."""
    return {k: shard_tensor(v, split_rule(k), rank, world_size) for k, v in state_dict.items()}

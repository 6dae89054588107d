"""A ``torch.compile``-friendly greedy decode for MiniGPT: one fixed-shape step over a static KV cache.

Why: the eager decode step is ~100 small ops, so on a CPU (and for a model this small on a GPU) its
time is Python and dispatcher overhead, not arithmetic. Compiling removes that overhead, but only if
the step has *fixed shapes*: the model's own ``KVCache`` slices ``[:length]`` (a growing shape) and
keeps ``length`` as a Python int (a new guard value every token), which would recompile each step.

So this step keeps a cache of the full ``block_size`` for every layer, writes the new key/value at
``pos`` with ``index_copy_`` and masks the positions after ``pos`` -- ``pos`` is a 0-d *tensor*, so
one compiled graph serves every position. It reuses the loaded model's own submodules (and therefore
its weights), for ``MiniGPT`` and -- without ``fullgraph`` -- for ``MiniGPTTP``. The prompt is fed
through the same step one token at a time, so there is one graph, not a prefill graph per length.

On a GPU ``mode="reduce-overhead"`` replays the step as a CUDA graph; on the CPU the default mode is
used (CUDA graphs do not exist there). Pod-side code: torch and the standard library only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, cast

import torch
import torch.nn.functional as F
from torch import nn

from tplab.model.gpt import Block, MiniGPT


class StaticDecodeStep(nn.Module):
    """``forward(token[B,1], pos[]) -> logits[B,vocab]`` for the token at position ``pos``."""

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    key_pos: torch.Tensor

    def __init__(self, model: MiniGPT, batch_size: int = 1) -> None:
        super().__init__()
        self.model = model
        #: the model's blocks, typed (an ``nn.ModuleList`` indexes as a plain ``Module``)
        self.blocks = cast("list[Block]", list(model.blocks))
        cfg = model.config
        p = model.pos_emb.weight
        heads = self.blocks[0].attn.n_head  # heads on this rank
        shape = (cfg.n_layer, batch_size, heads, cfg.block_size, cfg.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, device=p.device, dtype=p.dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, device=p.device, dtype=p.dtype), persistent=False)
        self.register_buffer("key_pos", torch.arange(cfg.block_size, device=p.device), persistent=False)

    def forward(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        m = self.model
        B = token.shape[0]
        at = pos.reshape(1)
        x = m.tok_emb(token) + m.pos_emb(at)  # [B, 1, d]
        visible = (self.key_pos <= pos).view(1, 1, 1, -1)  # keys 0..pos; later slots hold stale data
        for i, block in enumerate(self.blocks):
            attn = block.attn
            local = attn.n_head * attn.head_dim
            q, k, v = attn.qkv(block.ln_1(x)).split(local, dim=-1)
            q, k, v = (t.view(B, 1, attn.n_head, attn.head_dim).transpose(1, 2) for t in (q, k, v))
            self.k_cache[i].index_copy_(2, at, k)
            self.v_cache[i].index_copy_(2, at, v)
            y = F.scaled_dot_product_attention(q, self.k_cache[i], self.v_cache[i], attn_mask=visible)
            x = x + attn.proj(y.transpose(1, 2).reshape(B, 1, local))
            x = x + block.mlp(block.ln_2(x))
        return m.lm_head(m.ln_f(x))[:, -1]

    def greedy(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The argmax next token ``[B, 1]`` (choosing it inside the graph saves a dispatch per token)."""
        return self.forward(token, pos).argmax(dim=-1, keepdim=True)


def default_mode(device: torch.device | str) -> str:
    """``reduce-overhead`` (CUDA graphs) on a GPU, Inductor's ``default`` elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else "default"


@dataclass
class CompiledDecoder:
    """A greedy decoder around one (compiled or eager) ``StaticDecodeStep``."""

    step: StaticDecodeStep
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    device: torch.device
    mode: str  # "eager" when not compiled
    positions: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.positions = torch.arange(self.step.key_pos.numel(), device=self.device)

    def next_token(self, token: torch.Tensor, t: int) -> torch.Tensor:
        """The greedy token ``[B, 1]`` after feeding ``token`` ``[B, 1]`` at position ``t`` (advances the cache)."""
        return self._call(token, t)

    def _call(self, token: torch.Tensor, t: int) -> torch.Tensor:
        if self.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        # the next token is chosen inside this call; clone so a CUDA-graph replay cannot overwrite it
        return self.fn(token, self.positions[t]).clone()

    @torch.no_grad()
    def decode(self, prompt_ids: Sequence[int], max_new_tokens: int, eos_id: int | None = None,
               on_token: Callable[[int], None] | None = None) -> list[int]:
        """Same contract as ``tplab.model.decode.greedy_decode`` (batch of one)."""
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}.")
        if not prompt_ids:
            raise ValueError("greedy decoding needs a non-empty prompt.")
        limit = self.positions.numel()
        if len(prompt_ids) + max_new_tokens - 1 > limit:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens plus {max_new_tokens} new tokens exceeds the "
                             f"model's block_size {limit}; use fewer new tokens or a shorter prompt.")
        out: list[int] = []
        if max_new_tokens == 0:
            return out
        nxt = None
        for t, tok in enumerate(prompt_ids):  # prefill through the same fixed-shape step
            nxt = self._call(torch.tensor([[tok]], device=self.device), t)
        assert nxt is not None  # the prompt is not empty (checked above)
        t = len(prompt_ids)
        while True:
            token = int(nxt.item())
            out.append(token)
            if on_token is not None:
                on_token(token)
            if len(out) == max_new_tokens or (eos_id is not None and token == eos_id):
                return out
            nxt = self._call(nxt, t)
            t += 1


def build_decoder(model: MiniGPT, compile: bool = True, mode: str | None = None,
                  fullgraph: bool | None = None, cpp_wrapper: bool | None = None) -> CompiledDecoder:
    """Wrap a loaded (eval) MiniGPT in a static-cache greedy decoder, compiled unless ``compile=False``.

    ``mode`` defaults to :func:`default_mode` for the model's device. ``fullgraph`` defaults to True
    for a single-device model and False for a TP build (its collectives may break the graph).
    ``cpp_wrapper=True`` (CPU, default mode only) has Inductor emit the per-call wrapper in C++ instead
    of Python: less per-token overhead for about the same compile time here (measured side by side by
    ``benchmarks/bench_compile.py``). ``None`` turns it on for a single-device model on the CPU; a TP
    build keeps the Python wrapper (its collectives break the graph, untested with the C++ wrapper).
    """
    model.eval()
    step = StaticDecodeStep(model)
    device = model.pos_emb.weight.device
    if not compile:
        return CompiledDecoder(step, step.greedy, device, "eager")
    from tplab.tp.collectives import prepare_compile
    prepare_compile()  # the shm collectives' graph break, made before tracing starts
    mode = mode or default_mode(device)
    if fullgraph is None:
        fullgraph = not getattr(model, "parallel", False) or getattr(model, "world_size", 1) == 1
    if cpp_wrapper is None:
        cpp_wrapper = device.type == "cpu" and mode == "default" and fullgraph
    if cpp_wrapper and mode == "default":
        fn = torch.compile(step.greedy, options={"cpp_wrapper": True}, fullgraph=fullgraph, dynamic=False)
        return CompiledDecoder(step, fn, device, "default+cpp_wrapper")
    fn = torch.compile(step.greedy, mode=mode, fullgraph=fullgraph, dynamic=False)
    return CompiledDecoder(step, fn, device, mode)


def warm_up(decoder: CompiledDecoder, prompt_ids: Sequence[int], tokens: int = 3) -> float:
    """Run one short decode so the compile (and CUDA-graph capture) happens now; returns its seconds."""
    t0 = time.perf_counter()
    decoder.decode(prompt_ids, tokens)
    if decoder.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0

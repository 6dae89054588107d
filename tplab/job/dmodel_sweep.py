"""The d_model sweep: MiniGPT-grammar's architecture with random weights at several widths, decoded
single-device and with TP on the same ranks, so the crossover is measured and not only predicted.

Why: the lab's checkpoint is one point (d_model 64) on the scaling curve; where TP starts to pay
is a property of the curve. Each size keeps the checkpoint's n_layer, vocab, block size and head
size (n_head = d_model / head_dim, d_ff = 4·d_model) and draws its weights from a seeded generator,
the same on every rank, so the TP shards are slices of the very model rank 0 decodes alone and
greedy decoding must give the same tokens (checked at every size). Per size, timed as the main
lab times: rank 0 decodes alone (the others wait at a barrier) after a warm-up decode; then every
rank decodes in TP, a warm-up, an uninstrumented pass (latency) and an instrumented pass (the
collective time per token that the decode loop really pays, waiting for the slower rank included).
On CUDA the per-step clock is a pair of CUDA events (``timing.decode_timed``).

A size is skipped, with the reason, when TP cannot split it (heads, d_ff or vocab not divisible),
when its weights would not fit the device's free memory, or when, extrapolated from the previous
size's wall time by the parameter count, it would overrun the sweep's time budget.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

from tplab.records.dmodel import DModelPoint, SkippedSize
from .decode_timing import DecodeRun, decode_timed

#: the weights' generator seed (the same on every rank: the shards are slices of one model)
SEED = 1234
_CODES = ("", "split", "memory", "time")


@dataclass(frozen=True, slots=True)
class SweepSettings:
    d_models: list[int]
    tokens: int = 32            # timed new tokens per decode
    warmup_tokens: int = 8      # new tokens of the untimed warm-up decode per mode
    budget_s: float = 180.0     # wall-time budget of the whole sweep


def sweep_config(base: Any, d_model: int) -> Any:
    """The checkpoint's GPTConfig at width ``d_model`` (same n_layer, vocab, block, head size)."""
    head_dim = base.d_model // base.n_head
    if d_model % head_dim:
        raise ValueError(f"d_model {d_model} is not a multiple of the head size {head_dim}")
    return type(base)(vocab_size=base.vocab_size, block_size=base.block_size,
                      n_layer=base.n_layer, n_head=d_model // head_dim, d_model=d_model,
                      d_ff=4 * d_model)


def count_params(config: Any) -> int:
    from tplab.model.checkpoint import expected_shapes
    return sum(math.prod(s) for s in expected_shapes(config).values())


def random_state_dict(config: Any, seed: int = SEED,
                      keep: Callable[[str, torch.Tensor], torch.Tensor] | None = None
                      ) -> dict[str, torch.Tensor]:
    """Random weights for ``config`` (nanoGPT's init: N(0, 0.02), zero biases, unit LayerNorm
    scales), drawn tensor by tensor from one CPU generator so every rank draws the same model.
    ``keep(name, full)`` may cut each full tensor down (to a rank's shard) before the next one is
    drawn, so a rank never holds more than its shard plus one full tensor."""
    from tplab.model.checkpoint import expected_shapes
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, torch.Tensor] = {}
    for name, shape in sorted(expected_shapes(config).items()):
        if name.endswith("bias"):
            t = torch.zeros(shape)
        elif len(shape) == 1:
            t = torch.ones(shape)
        else:
            t = torch.empty(shape).normal_(0.0, 0.02, generator=gen)
        out[name] = keep(name, t) if keep is not None else t
    return out


def _free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62  # unknown: do not refuse on a guess


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


class DModelSweep:
    """Runs the sweep on every rank (a collective); rank 0 gets the records."""

    def __init__(self, settings: SweepSettings, base_config: Any, prompt_ids: list[int],
                 device: torch.device, rank: int, world_size: int,
                 barrier: Callable[[], None], sync: Callable[[], None] | None,
                 emit: Callable[..., None], log: Callable[..., None]) -> None:
        self.s = settings
        self.base = base_config
        self.device = device
        self.rank, self.world = rank, world_size
        self.barrier, self.sync = barrier, sync
        self.emit, self.log = emit, log
        room = base_config.block_size - settings.tokens
        if room < 1:
            raise ValueError(f"--sweep-tokens {settings.tokens} leaves no room for a prompt in "
                             f"the model's block_size {base_config.block_size}")
        self.prompt = prompt_ids[:room]
        self.points: list[DModelPoint] = []
        self.skipped: list[SkippedSize] = []

    # ------------------------------------------------------------------ decisions (rank 0)
    def _decide(self, d: int, started: float, last: tuple[int, float] | None) -> tuple[int, str]:
        """(skip code, reason) for size ``d``; 0 = run it. Rank 0 decides, every rank obeys."""
        try:
            cfg = sweep_config(self.base, d)
        except ValueError as exc:
            return 1, str(exc)
        for dim in ("n_head", "d_ff", "vocab_size"):
            if getattr(cfg, dim) % self.world:
                return 1, (f"TP over {self.world} ranks cannot split {dim}={getattr(cfg, dim)} "
                           f"at d_model {d}")
        params = count_params(cfg)
        # rank 0 holds the full model and its shard; on one host every rank's shard shares RAM
        on_host = self.device.type != "cuda"
        need = params * 4 * (2.0 if on_host else 1.0 + 1.0 / self.world) * 1.2
        free = _free_bytes(self.device)
        if need > free:
            return 2, (f"d_model {d} needs ~{need / 2**30:.1f} GiB for its weights, "
                       f"{free / 2**30:.1f} GiB are free on {self.device.type}")
        if last is not None:
            prev_params, prev_s = last
            projected = prev_s * params / prev_params
            spent = time.monotonic() - started
            if spent + projected > self.s.budget_s:
                return 3, (f"d_model {d} would take ~{projected:.0f} s (the previous size's "
                           f"{prev_s:.1f} s scaled by parameters) past the sweep's "
                           f"{self.s.budget_s:.0f} s budget ({spent:.0f} s spent; "
                           "--sweep-budget-s)")
        return 0, ""

    def _agree(self, code: int) -> int:
        flag = torch.tensor([float(code)], dtype=torch.float64, device=self.device)
        dist.broadcast(flag, src=0)
        return int(flag.item())

    # ------------------------------------------------------------------ the sweep
    def run(self) -> tuple[list[DModelPoint], list[SkippedSize]]:
        started = time.monotonic()
        last: tuple[int, float] | None = None
        for d in self.s.d_models:
            code, reason = self._decide(d, started, last) if self.rank == 0 else (0, "")
            code = self._agree(code)
            if code:
                if self.rank == 0:
                    self.skipped.append(SkippedSize(d, reason))
                    self.emit("sweep_point", d_model=d, skipped=True, reason=reason)
                    self.log(f"d_model sweep: skipped {d}: {reason}")
                continue
            t0 = time.monotonic()
            point = self._one(d)
            seconds = time.monotonic() - t0
            last = (count_params(sweep_config(self.base, d)), seconds)
            if point is not None:
                point = _with_seconds(point, seconds)
                self.points.append(point)
                self.emit("sweep_point", skipped=False, **point.to_dict())
                if not point.outputs_match:
                    self.emit("error", fatal=False,
                              msg=f"d_model sweep: TP output differs from the single-device "
                                  f"output at d_model {d}.")
        return self.points, self.skipped

    def _decode(self, model: Any, tokens: int, instrument: bool = False) -> DecodeRun:
        return decode_timed(model, self.prompt, tokens, self.device, instrument=instrument,
                            sync=self.sync if instrument else None)

    def _one(self, d: int) -> DModelPoint | None:
        from tplab.model.gpt import MiniGPT, MiniGPTTP, shard_tensor, split_rule
        cfg = sweep_config(self.base, d)
        single: DecodeRun | None = None
        params = 0
        if self.rank == 0:
            with torch.device("meta"):  # no init pass: the weights are drawn below
                model = MiniGPT(cfg)
            model.load_state_dict(random_state_dict(cfg), strict=True, assign=True)
            model = model.to(self.device).eval()
            params = sum(p.numel() for p in model.parameters())
            self._decode(model, self.s.warmup_tokens)
            single = self._decode(model, self.s.tokens)
            del model
            self._free()
        self.barrier()
        with torch.device("meta"):
            tp = MiniGPTTP(cfg)
        rank, world = self.rank, self.world
        tp.load_state_dict(random_state_dict(
            cfg, keep=lambda name, t: shard_tensor(t, split_rule(name), rank, world)),
            strict=True, assign=True)
        tp = tp.to(self.device).eval()
        self._decode(tp, self.s.warmup_tokens)
        plain = self._decode(tp, self.s.tokens)
        instr = self._decode(tp, self.s.tokens, instrument=True)
        del tp
        self._free()
        self.barrier()
        if single is None:
            return None
        calls = instr.ar_calls[1:]
        return DModelPoint(
            d_model=d, n_head=cfg.n_head, params=params, tokens=self.s.tokens,
            single_ms=_mean(single.decode_ms), tp_ms=_mean(plain.decode_ms),
            allreduce_ms=_mean(instr.ar_ms[1:]), allreduce_calls=_mean([float(c) for c in calls]),
            tp_instrumented_ms=_mean(instr.decode_ms), single_p50_ms=_median(single.decode_ms),
            tp_p50_ms=_median(plain.decode_ms),
            outputs_match=single.tokens == plain.tokens == instr.tokens, seconds=0.0)

    def _free(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _with_seconds(p: DModelPoint, seconds: float) -> DModelPoint:
    from dataclasses import replace
    return replace(p, seconds=seconds)


def method_note(settings: SweepSettings, device_type: str, world: int, transport: str) -> str:
    clock = ("CUDA events around each step" if device_type == "cuda"
             else "time.perf_counter around each step")
    return (f"MiniGPT-grammar's architecture with random weights (seed {SEED}, N(0, 0.02)) at each "
            f"d_model, d_ff = 4*d_model, head size and n_layer and vocab of the checkpoint; per "
            f"size one warm-up decode of {settings.warmup_tokens} tokens per mode, then "
            f"{settings.tokens} timed new tokens: single on rank 0 alone, TP on {world} ranks "
            f"over {transport}, uninstrumented (tp_ms) then instrumented (allreduce_ms, the "
            f"collective time per token inside the decode loop); ms are per-token means of the "
            f"one-token steps (prefill excluded), {clock}; sizes that TP cannot split, that do "
            f"not fit free memory or that would overrun the {settings.budget_s:.0f} s budget are "
            "skipped with the reason")

"""The d_model sweep: MiniGPT-grammar's architecture with random weights at several widths, decoded
single-device and with TP on the same ranks, so the crossover is measured and not only predicted.

Why: the lab's checkpoint is one point (d_model 64) on the scaling curve; where TP starts to pay
is a property of the curve. Each size keeps the checkpoint's n_layer, vocab, block size and head
size (n_head = d_model / head_dim, d_ff = 4·d_model) and draws its weights from a seeded generator,
the same on every rank, so the TP shards are slices of the very model rank 0 decodes alone and
greedy decoding must give the same tokens (checked at every size and visit).

Measured as a benchmark harness measures (docs/measurement.md): every size is built once and
warmed up in both modes (``warmup_tokens``), and its models stay in memory; then ``rounds``
rounds, each with a block of single-device visits (rank 0 alone, the others at a barrier) and a
block of TP visits, single first on even rounds and TP first on odd ones
(``harness.mode_order``), the sizes in a different order every round (``harness.round_order``).
Every visit decodes ``visit_warmup_tokens`` untimed, then ``tokens / rounds`` timed tokens (TP:
an uninstrumented pass, the latency, and an instrumented one, the collective time per token the
decode loop really pays). A round gives one sample per figure (the median per-token ms of the
visit); a point's figure is the median over the rounds, with the per-round samples kept so the
spread, the interval and the flag (``tplab.records.dmodel``) can be computed. On CUDA the per-step
clock is a pair of CUDA events (``decode_timing.decode_timed``); the rounds are the same.

After the rounds, with ``--profile-tokens``, every size decodes a few TP tokens under the profiler
(``profiled_pass.ProfiledPass.split``): the medians of a token's compute, wire, wait and rest
from that one pass, which the calibration fits TP's compute and comm terms to.

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
from tplab.records.events import ErrorEvent, Event, SweepPointEvent
from tplab.stats.harness import mode_order, round_order

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
    rounds: int = 4             # rounds over every size and mode; the timed tokens split over them
    visit_warmup_tokens: int = 3  # untimed new tokens before every timed visit of a size and mode


def rounds_for(settings: SweepSettings) -> tuple[int, int]:
    """(rounds, timed new tokens per visit): ``tokens`` split over the rounds, at least two per
    visit (the prefill and one decode step), so the total stays about ``tokens`` per mode."""
    rounds = max(1, min(settings.rounds, settings.tokens // 2))
    return rounds, max(2, math.ceil(settings.tokens / rounds))


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
                 emit: Callable[[Event], None], log: Callable[..., None],
                 probe: Callable[[], None] | None = None, profile_tokens: int = 0) -> None:
        self.s = settings
        self.profile_tokens = profile_tokens  # the profiled pass per size (0: none)
        self.probe = probe  # rank 0 times the machine's reference loop once a round
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
        self.rounds, self.per_round = rounds_for(settings)
        self.points: list[DModelPoint] = []
        self.skipped: list[SkippedSize] = []
        self._models: dict[int, tuple[Any, Any]] = {}      # d -> (single on rank 0, TP shard)
        self._params: dict[int, int] = {}
        self._samples: dict[int, dict[str, list[Any]]] = {}
        self._seconds: dict[int, float] = {}
        self._profiled: dict[int, dict[str, Any] | None] = {}

    # ------------------------------------------------------------------ decisions (rank 0)
    def _decide(self, d: int, started: float, committed_s: float,
                last: tuple[int, float] | None) -> tuple[int, str]:
        """(skip code, reason) for size ``d``; 0 = run it. Rank 0 decides, every rank obeys.
        The models of every kept size stay in memory for the rounds, so memory is counted
        together; ``committed_s`` is the projected round time of the sizes already kept."""
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
                       f"{free / 2**30:.1f} GiB are free on {self.device.type} beside the "
                       "smaller sizes' models")
        if last is not None:
            prev_params, prev_s = last
            projected = prev_s * params / prev_params
            spent = time.monotonic() - started
            if spent + committed_s + projected > self.s.budget_s:
                return 3, (f"d_model {d} would take ~{projected:.0f} s (the previous size's "
                           f"{prev_s:.1f} s scaled by parameters) past the sweep's "
                           f"{self.s.budget_s:.0f} s budget ({spent:.0f} s spent, "
                           f"~{committed_s:.0f} s to come; --sweep-budget-s)")
        return 0, ""

    def _agree(self, code: int) -> int:
        flag = torch.tensor([float(code)], dtype=torch.float64, device=self.device)
        dist.broadcast(flag, src=0)
        return int(flag.item())

    # ------------------------------------------------------------------ the sweep
    def run(self) -> tuple[list[DModelPoint], list[SkippedSize]]:
        """Build and warm up every size (ascending, deciding skips), then measure all of them in
        ``self.rounds`` rounds, then emit one point per size."""
        started = time.monotonic()
        last: tuple[int, float] | None = None
        committed = 0.0
        kept: list[int] = []
        for d in self.s.d_models:
            code, reason = (self._decide(d, started, committed, last) if self.rank == 0
                            else (0, ""))
            code = self._agree(code)
            if code:
                if self.rank == 0:
                    self.skipped.append(SkippedSize(d, reason))
                    self.emit(SweepPointEvent(d_model=d, skipped=True, reason=reason))
                    self.log(f"d_model sweep: skipped {d}: {reason}")
                continue
            t0 = time.monotonic()
            warm_s = self._build(d)
            built_s = time.monotonic() - t0
            # the rounds decode (visit warm-up + timed) tokens per mode where the build's warm-up
            # decoded warmup_tokens per mode: scale the warm-up's time by that ratio
            est = warm_s * self.rounds * (3 * self.per_round + 2 * self.s.visit_warmup_tokens
                                          ) / max(1, 2 * self.s.warmup_tokens)
            self._seconds[d] = built_s
            committed += est
            last = (count_params(sweep_config(self.base, d)), built_s + est)
            kept.append(d)
        for r in range(self.rounds):
            if self.rank == 0 and kept:
                self.log(f"d_model sweep: round {r + 1}/{self.rounds} over {round_order(kept, r)}")
            self._round(r, kept)
        for d in kept:
            self._profile(d)
        for d in kept:
            self._finish_point(d)
        self._models.clear()
        self._free()
        return self.points, self.skipped

    def _decode(self, model: Any, tokens: int, instrument: bool = False) -> DecodeRun:
        return decode_timed(model, self.prompt, tokens, self.device, instrument=instrument,
                            sync=self.sync if instrument else None)

    def _build(self, d: int) -> float:
        """Size ``d``'s models (single on rank 0, a TP shard on every rank), each warmed up;
        the seconds the two warm-up decodes took."""
        from tplab.model.gpt import MiniGPT, MiniGPTTP, shard_tensor, split_rule
        from tplab.model.meta_build import on_meta
        cfg = sweep_config(self.base, d)
        single = None
        if self.rank == 0:
            with on_meta():  # no init pass: the weights are drawn below
                model = MiniGPT(cfg)
            model.load_state_dict(random_state_dict(cfg), strict=True, assign=True)
            single = model.to(self.device).eval()
            self._params[d] = sum(p.numel() for p in single.parameters())
        t0 = time.monotonic()
        if single is not None:
            self._decode(single, self.s.warmup_tokens)
        warm_s = time.monotonic() - t0
        self.barrier()
        with on_meta():
            tp = MiniGPTTP(cfg)
        rank, world = self.rank, self.world
        tp.load_state_dict(random_state_dict(
            cfg, keep=lambda name, t: shard_tensor(t, split_rule(name), rank, world)),
            strict=True, assign=True)
        tp = tp.to(self.device).eval()
        t0 = time.monotonic()
        self._decode(tp, self.s.warmup_tokens)
        warm_s += time.monotonic() - t0
        self.barrier()
        self._models[d] = (single, tp)
        self._samples[d] = {k: [] for k in ("single", "tp", "instr", "ar", "calls", "tokens",
                                            "single_steps", "tp_steps")}
        return warm_s

    def _round(self, r: int, sizes: list[int]) -> None:
        """One round: a block per mode (single first on even rounds), each visiting the sizes in
        this round's order, each visit warmed up before it is timed. A TP block opens with one
        untimed decode of its first size: after the single block the other ranks have slept at
        a barrier, and the first collectives after that sleep are slow (docs/measurement.md)."""
        order = round_order(sizes, r)
        for mode in mode_order(r):
            if mode == "single":
                if self.rank == 0:
                    if self.probe is not None:
                        self.probe()
                    for d in order:
                        self._visit_single(d)
                self.barrier()
            else:
                if order:
                    self._decode(self._models[order[0]][1], min(self.s.warmup_tokens, 8))
                for d in order:
                    self._visit_tp(d)
                self.barrier()

    def _visit_single(self, d: int) -> None:
        model, smp = self._models[d][0], self._samples[d]
        self._decode(model, self.s.visit_warmup_tokens)
        run = self._decode(model, self.per_round)
        smp["single"].append(_median(run.decode_ms))
        smp["single_steps"].extend(run.decode_ms)
        smp["tokens"].append(("single", run.tokens))

    def _visit_tp(self, d: int) -> None:
        tp, smp = self._models[d][1], self._samples[d]
        self._decode(tp, self.s.visit_warmup_tokens)
        plain = self._decode(tp, self.per_round)
        instr = self._decode(tp, self.per_round, instrument=True)
        smp["tp"].append(_median(plain.decode_ms))
        smp["tp_steps"].extend(plain.decode_ms)
        smp["instr"].append(_median(instr.decode_ms))
        smp["ar"].append(_median(instr.ar_ms[1:]))
        smp["calls"].append(_mean([float(c) for c in instr.ar_calls[1:]]))
        smp["tokens"].append(("tp", plain.tokens))
        smp["tokens"].append(("tp", instr.tokens))

    def _profile(self, d: int) -> None:
        """A few TP tokens of size ``d`` under the profiler (every rank): the split of a token
        into compute, wire, wait and rest from one pass, which the calibration fits the TP terms
        to (``tplab.job.profiled_pass``)."""
        if not self.profile_tokens:
            return
        from .profiled_pass import ProfiledPass
        pp = ProfiledPass(tokens=self.profile_tokens, rank=self.rank, world_size=self.world,
                          device=self.device, barrier=self.barrier, sync=self.sync)
        self._profiled[d] = pp.split(self._models[d][1], self.prompt, self.base.block_size)

    def _finish_point(self, d: int) -> None:
        if self.rank != 0:
            return
        smp = self._samples[d]
        cfg = sweep_config(self.base, d)
        seqs = [t for _, t in smp["tokens"]]
        point = DModelPoint(
            d_model=d, n_head=cfg.n_head, params=self._params[d], tokens=self.s.tokens,
            single_ms=_median(smp["single"]), tp_ms=_median(smp["tp"]),
            allreduce_ms=_median(smp["ar"]), allreduce_calls=_mean(smp["calls"]),
            tp_instrumented_ms=_median(smp["instr"]),
            single_p50_ms=_median(smp["single_steps"]), tp_p50_ms=_median(smp["tp_steps"]),
            outputs_match=all(t == seqs[0] for t in seqs), seconds=self._seconds[d],
            rounds=self.rounds, tokens_per_round=self.per_round,
            single_rounds_ms=tuple(smp["single"]), tp_rounds_ms=tuple(smp["tp"]),
            allreduce_rounds_ms=tuple(smp["ar"]), profiled=self._profiled.get(d))
        self.points.append(point)
        self.emit(SweepPointEvent(d_model=d, skipped=False, point=point))
        if not point.outputs_match:
            self.emit(ErrorEvent(fatal=False, msg=f"d_model sweep: TP output differs from the "
                                 f"single-device output at d_model {d}."))

    def _free(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def method_note(settings: SweepSettings, device_type: str, world: int, transport: str) -> str:
    clock = ("CUDA events around each step" if device_type == "cuda"
             else "time.perf_counter around each step")
    rounds, per_round = rounds_for(settings)
    return (f"MiniGPT-grammar's architecture with random weights (seed {SEED}, N(0, 0.02)) at each "
            f"d_model, d_ff = 4*d_model, head size and n_layer and vocab of the checkpoint; every "
            f"size built once and warmed up with {settings.warmup_tokens} tokens per mode, then "
            f"{rounds} rounds, each a block of single visits (rank 0 alone) and a block of TP "
            f"visits on {world} ranks over {transport} (single first on even rounds, TP first "
            f"on odd ones; the TP block opens with one untimed decode), the sizes in a seeded "
            f"order rotated every round; each visit {settings.visit_warmup_tokens} untimed "
            f"tokens, then {per_round} timed new tokens (TP: uninstrumented for tp_ms, then "
            f"instrumented for allreduce_ms, the collective time per token inside the decode "
            f"loop); a round's sample is the visit's median per-token ms of the one-token steps "
            f"(prefill excluded), {clock}; a point's ms is the median of its rounds' samples, "
            f"with their spread, interval and count under figures; sizes that TP cannot split, "
            f"that do not fit free memory or that would overrun the {settings.budget_s:.0f} s "
            "budget are skipped with the reason")

"""The job's summary: ``results.json``, built from the per-prompt timings.

It holds the numbers the lab asks for (per-token mean/p50/p99 single and TP, speedup = single /
TP, all-reduce ms per token, comm/compute ratio, the sweep and its alpha-beta fit, outputs_match,
the environment) and, under ``timing``, how each number was taken, because a number without its
method is not honest. ``comm`` names the transport that carried the TP collectives behind the
top-level figures ("gloo", "nccl" or "shm"); a run over several transports (``--comm both``) adds
``transports``, each one's own TP figures, match and sweep (``combine_transports``).

Standard library only (no torch), so the client can import it to read results.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from tplab.stats.fit import AlphaBeta, summarize
from tplab.stats.stability import per_pass_figures

RESULTS_SCHEMA = 1


@dataclass(slots=True)
class ModeRun:
    """One prompt in one mode; the job's ``decode_timing.DecodeRun`` extends it."""

    tokens: list[int]
    step_ms: list[float]
    ar_ms: list[float] = field(default_factory=list)
    ar_calls: list[int] = field(default_factory=list)
    ar_bytes: list[int] = field(default_factory=list)


@dataclass(slots=True)
class PromptRecord:
    index: int
    prompt: str
    single: ModeRun
    tp: ModeRun                 # uninstrumented pass: latency
    tp_instr: ModeRun | None    # instrumented pass: all-reduce time (None: not instrumented)
    single_text: str
    tp_text: str

    @property
    def match(self) -> bool:
        if self.tp_instr is not None and self.tp_instr.tokens != self.tp.tokens:
            return False
        return self.single.tokens == self.tp.tokens

    def first_difference(self) -> int:
        """The first token position where TP differs from single (or the instrumented TP pass
        from the plain one)."""
        for k, (a, b) in enumerate(zip(self.single.tokens, self.tp.tokens)):
            if a != b:
                return k
        if self.tp_instr is not None:
            for k, (a, b) in enumerate(zip(self.tp.tokens, self.tp_instr.tokens)):
                if a != b:
                    return k
        return min(len(self.single.tokens), len(self.tp.tokens))


def _decode_steps(runs: list[ModeRun], attr: str = "step_ms") -> list[float]:
    out: list[float] = []
    for r in runs:
        out.extend(getattr(r, attr)[1:])
    return out


def _prefills(runs: list[ModeRun]) -> list[float]:
    return [r.step_ms[0] for r in runs]


def _spread(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The all-reduce sweep's repeat-to-repeat spread, (q3 - q1) / median of each size's
    rounds: the median and the worst over the sizes, and the worst size."""
    rows = [p for p in points if isinstance(p.get("spread"), (int, float))]
    if not rows:
        return {}
    spreads = sorted(p["spread"] for p in rows)
    worst = max(rows, key=lambda p: p["spread"])
    return {"median": spreads[len(spreads) // 2], "max": worst["spread"],
            "max_at_bytes": worst["bytes"], "repeats": worst.get("repeats", 1),
            "unstable": sum(1 for p in rows if p.get("unstable")),
            "definition": "(q3 - q1) / median of a size's rounds of timed calls"}


def timing_notes(device_type: str, threads: int, warmup: int, sync_desc: str,
                 warmup_tokens: int | None = None, instrumented: int | None = None,
                 num_prompts: int | None = None) -> dict[str, Any]:
    clock = ("CUDA events recorded around each step on the rank's stream, read after the prompt"
             if device_type == "cuda" else "time.perf_counter around each step")
    return {
        "clock": clock,
        "per_token": ("one step = one forward of the model plus the argmax of the last position; "
                      "step 0 is the prefill (whole prompt) and is reported separately as "
                      "prefill_ms; per-token statistics are over the one-token decode steps"),
        "warmup": (f"{warmup} untimed warm-up decode(s)"
                   + (f" of {warmup_tokens} tokens" if warmup_tokens else "")
                   + " per mode before the timed prompts, excluded"),
        "single": ("rank 0 alone while the other ranks wait at a barrier, interleaved with TP "
                   "prompt by prompt (single first on even prompts, TP first on odd ones); "
                   + ("only rank 0's GPU" if device_type == "cuda"
                      else f"torch.set_num_threads({threads}) as on every TP rank, so the "
                           "comparison is apples to apples")),
        "tp_latency": "from the uninstrumented TP pass (no timer inside the collectives)",
        "compile": ("with --compile both models decode through tplab.model.compiled's fixed-shape "
                    "static-cache step under torch.compile; the prompt is fed token by token "
                    "through that step and timed as step 0"),
        "allreduce": ("from a second, instrumented TP pass over "
                      + ("the same prompts" if instrumented is None or instrumented == num_prompts
                         else f"the first {instrumented} of the {num_prompts} prompts")
                      + ": "
                      f"tplab.tp.comm_timing({sync_desc}) brackets every collective with a sync "
                      "and perf_counter; all-reduce ms per token is rank 0's sum inside each step"),
        "instrumentation_overhead": ("instrumented per-token mean minus uninstrumented per-token "
                                     "mean (same prompts, same tokens)"),
        "speedup": "single per-token mean / TP (uninstrumented) per-token mean",
        "comm_compute_ratio": ("all-reduce ms per token / (instrumented per-token ms - all-reduce "
                               "ms per token), both from the instrumented pass"),
        "passes": ("single.passes / tp.passes: each prompt is one pass; its p50, p99 and mean "
                   "per-token ms are one sample, summarized over the passes as median, q1, q3, "
                   "spread = (q3 - q1) / median, 95% interval of the median (bootstrap), mean "
                   "with its 95% t-interval, n; see stability"),
        "sweep": ("fp32 all-reduce on the run's own process group: 5 rounds, each visiting every "
                  "size in a seeded order rotated per round; a size's first visit opens with 5 "
                  "warm-up calls, every later one with 2, then back-to-back timed calls (ms = "
                  "median of the rounds, spread = their (q3 - q1) / median, figure = median, "
                  "quartiles, 95% interval, n); per round "
                  + ("per-rank mean over the loop (CUDA events)" if device_type == "cuda"
                     else "per-rank median of per-call perf_counter times")
                  + "; time = slowest rank's; busbw = algbw * 2(p-1)/p (nccl-tests); fitted to "
                    "t(n) = 2(p-1)*alpha + 2(p-1)/p * n/beta by a Theil-Sen line through the "
                    "steady sizes, 95% intervals from a bootstrap over the rounds"),
    }


def build_results(*, records: list[PromptRecord], config: dict[str, Any], model: dict[str, Any],
                  env: dict[str, Any], timing: dict[str, Any], sweep: list[dict[str, Any]],
                  fit: AlphaBeta | None, fit_error: str, started_at: float, finished_at: float,
                  ) -> dict[str, Any]:
    """The content of results.json (also sent as the ``result`` event)."""
    if not records:
        raise ValueError("no prompts were decoded")
    singles = [r.single for r in records]
    tps = [r.tp for r in records]
    instrs = [r.tp_instr for r in records if r.tp_instr is not None]
    if not instrs:
        raise ValueError("no prompt was decoded in the instrumented TP pass")
    s_stats = summarize(_decode_steps(singles))
    t_stats = summarize(_decode_steps(tps))
    i_stats = summarize(_decode_steps(instrs))
    ar_stats = summarize(_decode_steps(instrs, "ar_ms"))
    calls = _decode_steps(instrs, "ar_calls")
    nbytes = _decode_steps(instrs, "ar_bytes")
    calls_per_token = sum(calls) / len(calls)
    bytes_per_call = (sum(nbytes) / sum(calls)) if sum(calls) else 0.0
    ar_ms = ar_stats.mean
    compute_ms = i_stats.mean - ar_ms
    outputs_match = all(r.match for r in records)
    world = int(env.get("world_size", 0))
    results: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "ok": outputs_match,
        "outputs_match": outputs_match,
        "world_size": world,
        "backend": env.get("backend"),
        "device_type": env.get("device_type"),
        "single_per_token_ms": s_stats.mean,
        "tp_per_token_ms": t_stats.mean,
        "speedup": s_stats.mean / t_stats.mean,
        "tp_over_single": t_stats.mean / s_stats.mean,
        "allreduce_ms_per_token": ar_ms,
        "comm_compute_ratio": (ar_ms / compute_ms) if compute_ms > 0 else math.inf,
        "instrumentation_overhead_ms_per_token": i_stats.mean - summarize(
            _decode_steps([r.tp for r in records if r.tp_instr is not None])).mean,
        "allreduce_calls_per_token": calls_per_token,
        "allreduce_bytes_per_call": bytes_per_call,
        "single": {"per_token_ms": s_stats.to_dict(),
                   "passes": per_pass_figures([r.step_ms[1:] for r in singles]),
                   "prefill_ms": summarize(_prefills(singles)).to_dict()},
        "tp": {"per_token_ms": t_stats.to_dict(),
               "passes": per_pass_figures([r.step_ms[1:] for r in tps]),
               "prefill_ms": summarize(_prefills(tps)).to_dict(),
               "instrumented_per_token_ms": i_stats.to_dict(),
               "allreduce_ms_per_token": ar_stats.to_dict()},
        "sweep": {"points": sweep,
                  "fit": fit.to_dict() if fit is not None else None,
                  "fit_error": fit_error,
                  "spread": _spread(sweep)},
        "prompts": [{
            "index": r.index, "prompt": r.prompt, "match": r.match,
            "single_text": r.single_text, "tp_text": r.tp_text,
            "single_tokens": r.single.tokens, "tp_tokens": r.tp.tokens,
        } for r in records],
        "config": config,
        "model": model,
        "timing": timing,
        "env": env,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_s": finished_at - started_at,
    }
    if math.isinf(results["comm_compute_ratio"]):
        results["comm_compute_ratio"] = None
    return results


#: the per-transport figures ``combine_transports`` keeps under ``transports``
TRANSPORT_KEYS = ("outputs_match", "tp_per_token_ms", "speedup", "tp_over_single",
                  "allreduce_ms_per_token", "comm_compute_ratio",
                  "instrumentation_overhead_ms_per_token", "allreduce_calls_per_token",
                  "allreduce_bytes_per_call", "tp", "sweep")


def combine_transports(per_transport: dict[str, dict[str, Any]], primary: str) -> dict[str, Any]:
    """One results dict from a run decoded over several transports (same single baseline).

    The top level is ``primary``'s results with ``comm = primary``; ``transports`` holds every
    transport's figures (``TRANSPORT_KEYS`` plus ``mismatched_prompts``); ``outputs_match`` and
    ``ok`` are true only if every transport's TP output matched the single-device output.
    """
    if primary not in per_transport:
        raise ValueError(f"no results for the primary transport {primary!r}")
    out = dict(per_transport[primary])
    out["comm"] = primary
    out["transports"] = {
        name: {**{k: r.get(k) for k in TRANSPORT_KEYS},
               "mismatched_prompts": [p["index"] for p in r.get("prompts", []) if not p["match"]]}
        for name, r in per_transport.items()}
    match = all(r.get("outputs_match") is True for r in per_transport.values())
    out["outputs_match"] = out["ok"] = match
    return out


#: the most of a results.json ``load_results`` reads (the lab fetches at most 8 MB of it)
RESULTS_LIMIT = 64 << 20


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a results.json; raise ValueError with one clear sentence if it is not one."""
    from tplab.util.bounded_read import TooLargeError, read_bounded
    try:
        data = json.loads(read_bounded(path, RESULTS_LIMIT, "results file").decode("utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist.") from None
    except TooLargeError as exc:
        raise ValueError(f"{exc}; a results.json is a few hundred kB.") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text.") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
        raise ValueError(f"{path} is not a tplab results.json (schema {RESULTS_SCHEMA}).")
    return data

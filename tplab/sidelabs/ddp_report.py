"""DDP_REPORT.md from the DDP lab's results: loss, step time, all-reduce time and its share.

Separate from the lab so the text is built from the measured numbers only and needs no torch.
"""

from __future__ import annotations

import time
from typing import Any


def _shape_note(s: dict[str, Any]) -> str:
    m = s["model"]
    src = f"the shape of {s['shape_from']}, freshly initialised" if s.get("shape_from") else "the default shape"
    return f" ({src}: {m['n_layer']} blocks, d_model {m['d_model']}, vocabulary {m['vocab_size']})"


def render(r: dict[str, Any]) -> str:
    s = r["settings"]
    share = r["allreduce_share"]
    mb = r["per_rank"][0]["bytes_per_step"] / 1e6
    ar_ms = r["allreduce_ms_median"]
    buckets = r["per_rank"][0]["buckets_per_step"]
    lines = [
        "# DDP on the CPU (the phase's first experiment)", "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(r.get('started_at')))}; torch {r['torch']}, backend {r['backend']}, "
        f"{s['nproc']} ranks × {s['threads_per_rank']} thread(s), MiniGPT-grammar with {r['params']:,} "
        f"parameters{_shape_note(s)}, {s['steps']} steps of {s['batch_size']} sequences per rank "
        f"({s['batch_size'] * s['nproc']} per step in all), AdamW lr {s['lr']:g}.", "",
        "## Result", "",
        f"- Loss (mean over ranks, first vs last tenth of the steps): {r['loss_first']:.3f} → "
        f"{r['loss_last']:.3f} ({'falls' if r['loss_fell'] else 'does NOT fall'}).",
        f"- Replicas in sync at the end (parameter checksums equal on every rank): "
        f"{'yes' if r['params_in_sync'] else 'NO'}.",
        f"- Step (forward + backward + optimizer), median: {r['step_ms_median']:.1f} ms.",
        f"- Gradient all-reduce per step, median: {ar_ms:.2f} ms over {buckets:g} bucket(s), "
        f"{mb:.2f} MB — {share:.1%} of the step time (sum of all-reduce time / sum of step time, "
        f"first {r['steps_skipped_in_timing']} steps left out).",
    ]
    if ar_ms > 0:
        lines.append(f"- Effective all-reduce rate: {mb / (ar_ms / 1e3):.0f} MB/s of gradient per rank.")
    lines += ["", "| rank | step ms (median) | all-reduce ms (median) | share |", "|---|---|---|---|"]
    for p in r["per_rank"]:
        lines.append(f"| {p['rank']} | {p['step_ms_median']:.1f} | {p['allreduce_ms_median']:.2f} | "
                     f"{p['allreduce_share']:.1%} |")
    lines += [
        "", "## How it was measured", "",
        "A DDP communication hook (`register_comm_hook`) performs DDP's own averaging all-reduce "
        "(bucket / world size, then `all_reduce` with `async_op=True`) and records, for every bucket, the "
        "time from launch to the completion of its future. The union of those intervals in a step is that "
        "step's all-reduce time. It includes any time a rank waits for the other to arrive at the "
        "collective, so a rank that finishes its backward early shows a longer all-reduce.",
        "",
        ("With one bucket per step (the whole model's gradients fit in DDP's default 25 MB bucket), the "
         "all-reduce starts only when backward has produced every gradient, so nothing overlaps it; "
         "smaller buckets (`--bucket-cap-mb`) let early buckets travel while backward continues."
         if buckets <= 1 else
         f"With {buckets:g} buckets per step, early buckets are all-reduced while backward is still "
         "computing the gradients of earlier layers, so part of the communication is hidden."),
        "",
        "Reading: this model is tiny, so a step is short and even a local all-reduce between two "
        "processes is a visible part of it; DDP pays off when the compute per step grows faster than "
        "the gradient volume (larger batches, larger models), which is the regime it was built for.",
        "", "Raw per-step records of every rank: `ddp-results.json`.",
    ]
    return "\n".join(lines) + "\n"

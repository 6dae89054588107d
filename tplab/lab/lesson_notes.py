"""``lesson_notes``: the manifest's paragraph on why TP is slower (or faster) here, written from
this run's own numbers.

Why apart from the manifest: the manifest is a record of fields; this is prose, built from the
measured message size, α against the per-token compute, the launches TP does not divide, the
transport's α, the crossover measured or predicted, and the stability of the figures. Two runs
on different hardware read differently; a lab that ended early is described from its partial
figures; without a run it says so, and why (a prediction at the lab's d_model when there is one).

Client side: standard library only (no torch).
"""

from __future__ import annotations

from typing import Any

from tplab.viewmodel.timeline_view import timeline_from


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.0f} B"


def _partial_notes(partial: dict[str, Any], why: str, cross: str) -> str:
    """The paragraph for a lab that ended before its results: what the stream measured so far."""
    s, t, x = (partial.get(k) for k in ("single_per_token_ms", "tp_per_token_ms", "speedup"))
    out = [f"The lab ended before its results ({why})" if why else
           "The lab ended before its results",
           f"; these figures are partial, from the live stream: {partial.get('single_tokens', 0)} "
           f"single-device and {partial.get('tp_tokens', 0)} TP tokens timed"]
    if s is not None:
        out.append(f"; one device {s:.3f} ms/token")
    if t is not None:
        out.append(f", TP {t:.3f} ms/token")
    if x is not None:
        out.append(f", speedup {x:.2f}" + (" (TP is slower)" if x < 1 else ""))
    ar = partial.get("allreduce_ms_per_token")
    if ar is not None:
        out.append(f"; the all-reduces took {ar:.3f} ms per instrumented TP token")
    return ("".join(out) + ". " + cross).strip()


def _crossover_notes(results: dict[str, Any] | None, predicted: float | None,
                     profile_name: str) -> str:
    """The crossover sentence: the model's, and the d_model sweep's measured one beside it."""
    model = f"the scaling model{f' ({profile_name})' if profile_name else ''}"
    why = ("only from there do the weight reads TP divides outweigh the collectives and launches "
           "it adds")
    r = results or {}
    if r.get("d_model_sweep") is None:
        return (f"{model[0].upper()}{model[1:]} predicts the crossover at d_model ≈ "
                f"{predicted:.0f}: {why} (predicted only: this run measured no d_model sweep)."
                if predicted else "")
    measured = r.get("measured_crossover_d_model")
    pred = (f"{model} predicts ≈ {predicted:.0f}" if predicted
            else f"{model} predicts none up to d_model 65536")
    if measured is None:
        return (f"The d_model sweep measured no crossover ({r.get('measured_crossover_reason') or 'none within the sweep'}); "
                f"{pred}.")
    gap = (f", {abs(predicted / measured - 1):.0%} {'above' if predicted > measured else 'below'} "
           "the measurement" if predicted else "")
    return (f"The d_model sweep measured the crossover at d_model ≈ {measured:.0f} (interpolated "
            f"between its points): {why}; {pred}{gap}.")


def lesson_notes(results: dict[str, Any] | None, prediction: Any = None,
                 crossover_d_model: float | None = None, profile_name: str = "",
                 why_no_run: str = "", partial: dict[str, Any] | None = None) -> str:
    """The "why is TP slower here" paragraph, written from this run's numbers.

    ``results`` is a results.json dict (or None when there was no run: then the paragraph is
    written from ``prediction``, a ``tplab.scaling.latency.Prediction`` at the lab's d_model, and opens
    with ``why_no_run``, e.g. the manifest's reason).
    """
    cross = _crossover_notes(results, crossover_d_model, profile_name)
    why = why_no_run.strip().rstrip(".")
    if not results and partial:
        return _partial_notes(partial, why, cross)
    if not results:
        if prediction is None:
            if why:
                return (f"No job results, so nothing measured to reflect on: {why}. "
                        + cross).strip()
            return ("No run and no prediction: nothing measured to reflect on. " + cross).strip()
        p = prediction
        opening = (f"No job results ({why}), so no measured numbers" if why
                   else "No cloud run, so no measured numbers")
        return (f"{opening}: this is the model's prediction at d_model "
                f"{p.d_model:.0f}. One device: {p.single_ms:.3f} ms/token, of which "
                f"{p.single_launch_ms:.3f} ms is kernel launches and only "
                f"{max(p.single_memory_ms, p.single_compute_ms):.3f} ms reading weights or "
                f"computing. TP over {p.world_size}: {p.tp_ms:.3f} ms/token, because it halves the "
                f"small part, launches at least as many kernels per rank ({p.tp_launch_ms:.3f} ms), "
                f"and adds {p.allreduces_per_token} all-reduces of {_fmt_bytes(p.message_bytes)} "
                f"plus a logits all-gather ({p.comm_ms:.3f} ms), each paying the latency α "
                f"whatever its size. " + cross).strip()
    r = results
    s, t, x = r["single_per_token_ms"], r["tp_per_token_ms"], r["speedup"]
    world = r.get("world_size", 2)
    model = r.get("model") or {}
    d = model.get("d_model")
    params = model.get("params")
    ar_ms = r.get("allreduce_ms_per_token")
    calls = r.get("allreduce_calls_per_token")
    per_call = r.get("allreduce_bytes_per_call")
    ratio = r.get("comm_compute_ratio")
    dev = (r.get("env") or {}).get("device_names") or ["?"]
    transport = r.get("comm") or r.get("backend", "?")
    if transport == "shm":
        transport = f"shared memory (shm, {r.get('backend', '?')} for setup)"
    out = [f"Measured on {transport} with {world} ranks ({dev[0]}): one device "
           f"{s:.3f} ms/token, TP {t:.3f} ms/token, speedup {x:.2f}"
           + (" (TP is slower)." if x < 1 else " (TP is faster).")]
    flagged = (r.get("stability") or {}).get("unstable") or []
    if flagged:  # figures whose samples spread past the limit (tplab.stats.stability)
        out.append(f"Careful: {len(flagged)} figure(s) of this run are not trustworthy, e.g. "
                   f"{flagged[0]['figure']}: {flagged[0]['note']} Rerun on a quiet machine "
                   "before drawing the lesson from them.")
    if x >= 1 and params and params < 5_000_000:
        out.append("A TP speedup on a model this small is not physical: check that the baseline "
                   "really ran on one device (CUDA_VISIBLE_DEVICES, rank 0's device only).")
    msg = d * 4 if isinstance(d, int) else per_call
    n_layer, vocab = model.get("n_layer"), model.get("vocab_size")
    if ar_ms is not None and calls:
        what = (f"{2 * n_layer + 1} all-reduces of {_fmt_bytes(msg)} (d_model {d} × 4 bytes) and "
                f"one all-gather of the {vocab} logits" if n_layer and vocab and msg
                else f"{calls:.0f} collectives averaging {_fmt_bytes(per_call or 0)}")
        sentence = f"Each token issues {what}; they took {ar_ms:.3f} ms per token"
        if ratio is not None:
            sentence += f", {ratio:.1f}× the rest of the step's time"
        out.append(sentence + ".")
    split = _timeline_notes(r)
    if split:
        out.append(split)
    fit = (r.get("sweep") or {}).get("fit")
    if fit and calls and msg:
        alpha_us, beta = fit["alpha_us"], fit["beta_gbps"]
        bw_us = (msg / (beta * 1e9)) * 1e6 * 2 * (world - 1) / world
        lat_ms = calls * 2 * (world - 1) * alpha_us / 1e3
        out.append(f"The all-reduce sweep fits α = {alpha_us:.1f} µs and β = {beta:.2f} GB/s, so a "
                   f"{_fmt_bytes(msg)} message is pure latency: its bandwidth term is "
                   f"{bw_us:.3f} µs against 2(p-1)α = {2 * (world - 1) * alpha_us:.1f} µs, and the "
                   f"{calls:.0f} collectives cost ≈ {lat_ms:.3f} ms of latency per token against "
                   f"{s:.3f} ms for the whole single-device step.")
        if ar_ms is not None and ar_ms > 1.5 * lat_ms:
            out.append(f"Inside the decode loop they took {ar_ms:.3f} ms, more than the sweep's "
                       "back-to-back figure predicts: there each all-reduce also waits for the "
                       "slower rank.")
    comparison = _alpha_comparison(r, calls, world)
    if comparison:
        out.append(comparison)
    if params:
        out.append(f"TP splits the {params:,} parameters ({params * 4 / 1e6:.1f} MB of fp32 weights "
                   f"read per token, {params * 4 / world / 1e6:.1f} MB per rank) but not the kernel "
                   "launches: every rank still runs every layer's ops, plus TP's own (clones, bias "
                   "adds after the all-reduce, the embedding mask, the logits gather), so the per-"
                   "token host overhead that dominates a model this small does not shrink.")
    oh = r.get("instrumentation_overhead_ms_per_token")
    if oh is not None:
        out.append(f"(Timing the collectives changed the TP step by {oh:+.3f} ms/token; latency is "
                   "from the uninstrumented pass.)")
    if cross:
        out.append(cross)
    return " ".join(out)


def _in_loop_alpha_us(ar_ms: Any, calls: Any, world: int) -> float | None:
    """The decode loop's collective time per token as one collective's α (the ring's 2(p-1)α per
    collective): what the loop really paid, waiting for the slower rank included."""
    if not isinstance(ar_ms, (int, float)) or not isinstance(calls, (int, float)) or calls <= 0:
        return None
    return ar_ms * 1e3 / (calls * 2 * max(1, world - 1))


def _apart(a: tuple[float, str], b: tuple[float, str]) -> str:
    """'gloo's is 73× shm's' (or 'about the same'), for two (α, transport) pairs."""
    lo, hi = sorted((a, b))
    if lo[0] <= 0:
        return ""
    ratio = hi[0] / lo[0]
    if ratio < 1.2:
        return "about the same"
    times = f"{ratio:.1f}" if ratio < 10 else f"{ratio:.0f}"
    return f"{hi[1]}'s is {times}× {lo[1]}'s"


def _timeline_notes(r: dict[str, Any]) -> str:
    """What the profiled pass (results.json's ``timeline``) says a TP token's time is made of,
    and how much of an all-reduce is waiting for the other rank."""
    t = timeline_from(r.get("timeline"))
    tp = t.splits.get("tp") if t is not None else None
    if t is None or tp is None:
        return ""
    other = "the other rank" if tp.ranks <= 2 else "the last rank"
    out = (f"The profiled pass (torch's profiler on every rank, {tp.tokens} TP tokens, trace in "
           f"{t.trace_file}) splits a TP token of {tp.token_us:.0f} µs (median, mean of the "
           f"ranks) into {tp.compute_us:.0f} µs of compute, {tp.wire_us:.0f} µs on the wire, "
           f"{tp.wait_us:.0f} µs waiting for {other} and {tp.rest_us:.0f} µs of the rest "
           "(launches, Python, host gaps)")
    share = tp.wait_share
    if tp.allreduce_us_per_call and tp.allreduce_wait_us_per_call is not None and share is not None:
        out += (f"; of {tp.allreduce_us_per_call:.0f} µs per all-reduce, "
                f"{tp.allreduce_wait_us_per_call:.0f} µs ({share:.0%}) is waiting for {other} "
                f"to arrive and {tp.allreduce_wire_us_per_call or 0:.0f} µs is the collective "
                "itself once all are there")
    single = t.splits.get("single")
    if single is not None:
        out += (f". Profiled the same way, one device spends {single.compute_us:.0f} µs of its "
                f"{single.token_us:.0f} µs token computing")
    return out + "."


def _alpha_comparison(r: dict[str, Any], calls: float | None, world: int) -> str:
    """The two CPU transports' α side by side, like with like and each named once: *back to
    back* (the all-reduce sweep's fit, one call after another) and *in the loop* (the decode
    loop's collective time per token, ``_in_loop_alpha_us``). Both transports from this run
    (``--comm both``), or this run's against the other transport's profile
    (``tplab/assets/hardware_profiles.json``, whose α says which of the two it is)."""
    if (r.get("device_type") or (r.get("env") or {}).get("device_type")) != "cpu":
        return ""
    here = r.get("comm") or r.get("backend")
    transports = r.get("transports") or {}
    fits = {name: (t.get("sweep") or {}).get("fit") for name, t in transports.items()}
    fits.setdefault(here, (r.get("sweep") or {}).get("fit"))
    found: dict[str, dict[str, Any]] = {k: v for k, v in fits.items() if v}
    if here not in found or here not in ("shm", "gloo"):
        return ""
    other = "gloo" if here == "shm" else "shm"
    b2b_here = found[here]["alpha_us"]
    loop_here = _in_loop_alpha_us(transports.get(here, {}).get("allreduce_ms_per_token",
                                                                r.get("allreduce_ms_per_token")),
                                  calls, world)
    parts = []
    if other in found:
        b2b_other = found[other]["alpha_us"]
        loop_other = _in_loop_alpha_us(transports.get(other, {}).get("allreduce_ms_per_token"),
                                       transports.get(other, {}).get(
                                           "allreduce_calls_per_token", calls), world)
        apart = _apart((b2b_here, here), (b2b_other, other))
        parts.append(f"back to back α = {b2b_here:.1f} µs over {here} and {b2b_other:.1f} µs "
                     f"over {other} in the same run" + (f", {apart}" if apart else ""))
        if loop_here is not None and loop_other is not None:
            apart = _apart((loop_here, here), (loop_other, other))
            parts.append(f"in the loop α ≈ {loop_here:.1f} µs over {here} and "
                         f"{loop_other:.1f} µs over {other}" + (f", {apart}" if apart else ""))
        t_here = transports.get(here, {}).get("tp_per_token_ms")
        t_other = transports.get(other, {}).get("tp_per_token_ms")
        if t_here and t_other:
            parts.append(f"TP measured {t_here:.3f} ms/token over {here} against "
                         f"{t_other:.3f} over {other}")
    else:
        from tplab.scaling import latency
        try:
            prof = latency.load_profile(latency.cpu_profile_name(other))
        except latency.ScalingError:
            return ""
        a_other = prof.alpha_us.value
        in_loop = "in-loop" in prof.alpha_us.note
        mine = loop_here if in_loop else b2b_here
        if mine is None:
            return ""
        where = f"in the {prof.name} profile ({prof.alpha_us.source}, not this run)"
        apart = _apart((mine, here), (a_other, other))
        parts.append(f"{'in the loop' if in_loop else 'back to back'} α "
                     f"{'≈' if in_loop else '='} {mine:.1f} µs over {here} in this run against "
                     f"{a_other:.1f} µs over {other} {where}" + (f", {apart}" if apart else ""))
        if in_loop:
            parts.append(f"back to back this run's {here} α is {b2b_here:.1f} µs")
    return ("The transport is the lesson's α, measured two ways: back to back (the all-reduce "
            "sweep, one call after another) and in the loop (the decode loop's collective time "
            "per token as 2(p-1)α per collective, waiting for the slower rank included): "
            + "; ".join(parts) + ". Shared memory is how ranks on one host talk without a "
            "network stack; gloo's collectives go through TCP loopback.")
"""``lesson_notes``: the manifest's paragraph on why TP is slower (or faster) here, written from
this run's own numbers, every claim checked against them.

Why apart from the manifest: the manifest is a record of fields; this is prose. The paragraph is
a list of ``Claim``s, each made by one function from the figures it names (``facts``) and worded
by what those figures say: "slower" only when TP's per-token time is above one device's; an
all-reduce "pure latency" only when its bandwidth term is a small part of it; the excess of the
decode loop's collectives over the back-to-back sweep called waiting only when the profiled
split puts that much of a collective in waiting (never when waiting is at most
``WAIT_NEGLIGIBLE`` of it), wire otherwise; the per-op host overhead said not to shrink only
when the split shows TP's time outside the collectives did not halve; the crossover the one
band ``tplab.scaling.crossover`` made, with its source. A lab that ended early is described from
its partial figures; without a run it says so, and why (a prediction at the lab's d_model when
there is one).

Client side: standard library only (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tplab.figures.figure import INSTRUMENTED, MS, PROFILED, TIMED, Figure
from tplab.figures.lab_figures import LabFigures
from tplab.viewmodel.timeline_view import Split, timeline_from

#: waiting at most this share of a collective is never the cause of anything
WAIT_NEGLIGIBLE = 0.10
#: the loop's collectives are "more than the sweep predicts" past this factor
EXCESS_FACTOR = 1.5
#: an all-reduce is "pure latency" when its bandwidth term is below this share of 2(p-1)α
LATENCY_BOUND = 0.10
#: TP's time outside the collectives "did not shrink" above this share of one device's token
SHRINK_BAR = 0.6


@dataclass(frozen=True)
class Claim:
    """One sentence of the paragraph and the figures it was made from (``facts``: name -> value,
    with what it concludes), so a test can hold the words to the numbers."""

    topic: str
    text: str
    facts: dict[str, Any] = field(default_factory=dict)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.0f} B"


def _num(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
    return float(v) if ok else None


def _partial_notes(partial: dict[str, Any], why: str, cross: str, f: LabFigures) -> str:
    """The paragraph for a lab that ended before its results: what the stream measured so far
    (the figures as every face shows them, ``f``)."""
    out = [f"The lab ended before its results ({why})" if why else
           "The lab ended before its results",
           f"; these figures are partial, from the live stream: {partial.get('single_tokens', 0)} "
           f"single-device and {partial.get('tp_tokens', 0)} TP tokens timed"]
    if f.single_ms.value is not None:
        out.append(f"; one device {f.single_ms.text()}/token")
    if f.tp_ms.value is not None:
        out.append(f", TP {f.tp_ms.text()}/token (the {TIMED})")
    x = f.speedup.value
    if x is not None:
        out.append(f", speedup {f.speedup.text()}" + (" (TP is slower)" if x < 1 else ""))
    if f.allreduce_ms.value is not None:
        out.append(f"; the all-reduces took {f.allreduce_ms.text()} per TP token of the "
                   f"{INSTRUMENTED}")
    return ("".join(out) + ". " + cross).strip()


def _crossover_notes(results: dict[str, Any] | None, predicted: float | None,
                     profile_name: str, band: Any = None) -> str:
    """The crossover sentence: the model's (its band when there is one), and the d_model sweep's
    measured one beside it."""
    why = ("only from there do the weight reads TP divides outweigh the collectives and launches "
           "it adds")
    named = f"The scaling model{f' ({profile_name})' if profile_name else ''}"
    if band is not None:
        model = f"The scaling model's crossover: {band.text()}"
        central = band.estimate if band.kind in ("range", "point") else None
    elif predicted:
        model = f"{named} predicts the crossover at d_model ≈ {predicted:.0f}"
        central = predicted
    else:
        model, central = f"{named} predicts no crossover up to d_model 65536", None
    r = results or {}
    if r.get("d_model_sweep") is None:
        if band is None and not predicted:
            return ""
        return f"{model}" + (f": {why}" if central else "") + (
            " (predicted only: this run measured no d_model sweep)." if band is None else ".")
    measured = r.get("measured_crossover_d_model")
    ival = r.get("measured_crossover_interval") or {}
    sure = f"; {ival['note']}" if ival.get("note") else ""
    if measured is None:
        return (f"The d_model sweep measured no crossover "
                f"({r.get('measured_crossover_reason') or 'none within the sweep'}{sure}). "
                f"{model}.")
    gap = (f"; its central fit is {abs(central / measured - 1):.0%} "
           f"{'above' if central > measured else 'below'} the measurement" if central else "")
    return (f"The d_model sweep measured the crossover at d_model ≈ {measured:.0f} (interpolated "
            f"between its points{sure}): {why}. {model}{gap}.")


def _no_run_notes(prediction: Any, why: str, cross: str) -> str:
    if prediction is None:
        if why:
            return f"No job results, so nothing measured to reflect on: {why}. {cross}".strip()
        return f"No run and no prediction: nothing measured to reflect on. {cross}".strip()
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
            f"whatever its size. {cross}").strip()


def lesson_notes(results: dict[str, Any] | None, prediction: Any = None,
                 crossover_d_model: float | None = None, profile_name: str = "",
                 why_no_run: str = "", partial: dict[str, Any] | None = None,
                 band: Any = None, figures: LabFigures | None = None) -> str:
    """The "why is TP slower here" paragraph, written from this run's numbers.

    ``results`` is a results.json dict (or None when there was no run: then the paragraph is
    written from ``prediction``, a ``tplab.scaling.latency.Prediction`` at the lab's d_model, and
    opens with ``why_no_run``, e.g. the manifest's reason). ``band``: the crossover with its
    uncertainty (``tplab.scaling.crossover.CrossoverBand``), quoted as it is. ``figures``:
    the lab's record (``tplab.figures.lab_figures``), whose figures the paragraph quotes as
    every face shows them, each with its pass (made from ``results`` when not given).
    """
    cross = _crossover_notes(results, crossover_d_model, profile_name, band)
    why = why_no_run.strip().rstrip(".")
    if not results and partial:
        f = figures if figures is not None else LabFigures.from_results({})
        return _partial_notes(partial, why, cross, f)
    if not results:
        return _no_run_notes(prediction, why, cross)
    text = " ".join(c.text for c in claims(results, figures))
    return f"{text} {cross}".strip()


def claims(r: dict[str, Any], figures: LabFigures | None = None) -> list[Claim]:
    """The paragraph's claims about a run (results.json), in reading order; the figures it
    quotes are ``figures``' (the lab's record), made from ``r`` when not given."""
    f = figures if figures is not None else LabFigures.from_results(r)
    out: list[Claim | None] = [_speed(r, f), _stability(r), _unphysical(r), _collectives(r, f)]
    t = timeline_from(r.get("timeline"))
    tp = t.splits.get("tp") if t is not None else None
    single = t.splits.get("single") if t is not None else None
    if t is not None and tp is not None:
        out.append(_split(tp, single, t.trace_file, f))
    out += [_latency(r, f), _excess(r, tp), _transports(r), _launches(r, tp, single),
            _instrumentation(r)]
    return [c for c in out if c is not None]


def _speed(r: dict[str, Any], f: LabFigures) -> Claim:
    s, t = float(r["single_per_token_ms"]), float(r["tp_per_token_ms"])
    x = s / t if t > 0 else float(r.get("speedup") or 0.0)
    dev = (r.get("env") or {}).get("device_names") or ["?"]
    transport = r.get("comm") or r.get("backend", "?")
    if transport == "shm":
        transport = f"shared memory (shm, {r.get('backend', '?')} for setup)"
    slower = x < 1
    return Claim("speed", f"Measured on {transport} with {r.get('world_size', 2)} ranks "
                 f"({dev[0]}), in the {TIMED} (no timer inside the collectives): one device "
                 f"{f.single_ms.text()}/token, TP {f.tp_ms.text()}/token, speedup "
                 f"{f.speedup.text()}" + (" (TP is slower)." if slower else " (TP is faster)."),
                 {"single_ms": s, "tp_ms": t, "speedup": x, "slower": slower})


def _stability(r: dict[str, Any]) -> Claim | None:
    flagged = (r.get("stability") or {}).get("unstable") or []
    if not flagged:  # figures whose samples spread past the limit (tplab.stats.stability)
        return None
    return Claim("stability", f"Careful: {len(flagged)} figure(s) of this run are not "
                 f"trustworthy, e.g. {flagged[0]['figure']}: {flagged[0]['note']} Rerun on a "
                 "quiet machine before drawing the lesson from them.",
                 {"flagged": len(flagged)})


def _unphysical(r: dict[str, Any]) -> Claim | None:
    s, t = float(r["single_per_token_ms"]), float(r["tp_per_token_ms"])
    params = (r.get("model") or {}).get("params")
    if t <= 0 or s / t < 1 or not params or params >= 5_000_000:
        return None
    return Claim("unphysical", "A TP speedup on a model this small is not physical: check that "
                 "the baseline really ran on one device (CUDA_VISIBLE_DEVICES, rank 0's device "
                 "only).", {"speedup": s / t, "params": params})


def _message(r: dict[str, Any]) -> float | None:
    d = (r.get("model") or {}).get("d_model")
    return d * 4 if isinstance(d, int) else _num(r.get("allreduce_bytes_per_call"))


def _collectives(r: dict[str, Any], f: LabFigures) -> Claim | None:
    ar_ms, calls = _num(r.get("allreduce_ms_per_token")), _num(r.get("allreduce_calls_per_token"))
    if ar_ms is None or not calls:
        return None
    model = r.get("model") or {}
    n_layer, vocab, d = model.get("n_layer"), model.get("vocab_size"), model.get("d_model")
    msg = _message(r)
    if n_layer and vocab and msg and round(calls) == 2 * n_layer + 2:
        what = (f"{2 * n_layer + 1} all-reduces of {_fmt_bytes(msg)} (d_model {d} × 4 bytes) "
                f"and one all-gather of the {vocab} logits")
    else:
        what = (f"{calls:.0f} collectives averaging "
                f"{_fmt_bytes(_num(r.get('allreduce_bytes_per_call')) or 0)}")
    text = (f"Each token issues {what}; in the {INSTRUMENTED} (a timer around every "
            f"collective) they took {f.allreduce_text()}")
    ratio = _num(r.get("comm_compute_ratio"))
    if ratio is not None:
        text += f", {f.comm_compute.text()}× the rest of that step's time"
    return Claim("collectives", text + ".", {"allreduce_ms": ar_ms, "calls": calls,
                                             "ratio": ratio})


def _split(tp: Split, single: Split | None, trace_file: str, f: LabFigures) -> Claim:
    other = "the other rank" if tp.ranks <= 2 else "the last rank"
    slower = f.profiled_against_timed()
    text = (f"The {PROFILED} (torch's profiler on every rank, {tp.tokens} TP token"
            f"{'' if tp.tokens == 1 else 's'}, trace "
            f"in {trace_file}{'; ' + slower if slower else ''}) splits a TP token of "
            f"{tp.token_us:.0f} µs (median, mean of the ranks) into {tp.compute_us:.0f} µs of compute, {tp.wire_us:.0f} µs on the wire, "
            f"{tp.wait_us:.0f} µs waiting for {other} and {tp.rest_us:.0f} µs of the rest "
            "(launches, Python, host gaps)")
    share = tp.wait_share
    if tp.allreduce_us_per_call and tp.allreduce_wait_us_per_call is not None and share is not None:
        text += (f"; of {tp.allreduce_us_per_call:.0f} µs per all-reduce, "
                 f"{tp.allreduce_wait_us_per_call:.0f} µs ({share:.0%}) is waiting for {other} "
                 f"to arrive and {tp.allreduce_wire_us_per_call or 0:.0f} µs is the collective "
                 "itself once all are there")
    if single is not None:
        text += (f". Profiled the same way, one device spends {single.compute_us:.0f} µs of its "
                 f"{single.token_us:.0f} µs token computing")
    return Claim("split", text + ".", {"wait_share": share, "token_us": tp.token_us})


def _b2b_us(r: dict[str, Any]) -> tuple[float, float, float] | None:
    """(α µs, β GB/s, one collective's back-to-back µs at the run's message) from the sweep."""
    fit = (r.get("sweep") or {}).get("fit") or {}
    alpha, beta, msg = _num(fit.get("alpha_us")), _num(fit.get("beta_gbps")), _message(r)
    world = int(r.get("world_size") or 2)
    if alpha is None or not beta or not msg:
        return None
    bw_us = (msg / (beta * 1e9)) * 1e6 * 2 * (world - 1) / world
    return alpha, beta, 2 * (world - 1) * alpha + bw_us


def _latency(r: dict[str, Any], f: LabFigures) -> Claim | None:
    b2b, calls, msg = _b2b_us(r), _num(r.get("allreduce_calls_per_token")), _message(r)
    if b2b is None or not calls or not msg:
        return None
    alpha, beta, per_call = b2b
    world = int(r.get("world_size") or 2)
    lat_us = 2 * (world - 1) * alpha
    bw_us = per_call - lat_us
    latency_bound = bw_us < LATENCY_BOUND * lat_us
    kind = ("pure latency: its bandwidth term is" if latency_bound
            else "not only latency: its bandwidth term is")
    return Claim("latency", f"The all-reduce sweep fits α = {alpha:.1f} µs and β = {beta:.2f} "
                 f"GB/s, so a {_fmt_bytes(msg)} message is {kind} {bw_us:.3f} µs against "
                 f"2(p-1)α = {lat_us:.1f} µs, and the {calls:.0f} collectives cost ≈ "
                 f"{calls * per_call / 1e3:.3f} ms per token back to back against "
                 f"{f.single_ms.text()} for the whole single-device step.",
                 {"alpha_us": alpha, "beta_gbps": beta, "latency_bound": latency_bound,
                  "b2b_ms_per_token": calls * per_call / 1e3})


def _excess(r: dict[str, Any], tp: Split | None) -> Claim | None:
    """The decode loop's collectives against the sweep's back-to-back figure, the excess called
    wire or waiting by the profiled split (or left unexplained without one)."""
    b2b, calls = _b2b_us(r), _num(r.get("allreduce_calls_per_token"))
    ar_ms = _num(r.get("allreduce_ms_per_token"))
    if b2b is None or not calls or ar_ms is None:
        return None
    loop_us = ar_ms * 1e3 / calls
    if loop_us <= EXCESS_FACTOR * b2b[2]:
        return None
    excess = loop_us - b2b[2]
    text = (f"Inside the decode loop each collective took {loop_us:.0f} µs, {excess:.0f} µs "
            f"more than back to back ({b2b[2]:.0f} µs)")
    share = tp.wait_share if tp is not None else None
    if share is None:
        return Claim("excess", text + "; without a profiled pass the run cannot say whether the "
                     "excess is waiting for the slower rank or the collective itself.",
                     {"loop_us": loop_us, "excess_us": excess, "cause": None})
    # the split's shares, applied to the loop's own per-collective time
    waiting = share * loop_us
    explained = min(waiting, excess)
    wire_part = excess - explained
    if share <= WAIT_NEGLIGIBLE or wire_part > explained:
        cause = "wire"
        text += (f": the profiled split puts only {share:.0%} of a collective in waiting for the "
                 f"other rank, so at least {wire_part:.0f} µs of the excess is the collective "
                 "itself, slower on the wire inside the loop than back to back.")
    else:
        cause = "waiting"
        text += (f": the profiled split puts {share:.0%} of a collective ({waiting:.0f} µs) in "
                 "waiting for the other rank, enough to account for most of the excess: inside "
                 "the loop each collective waits for the slower rank.")
    return Claim("excess", text, {"loop_us": loop_us, "excess_us": excess, "wait_share": share,
                                  "waiting_us": explained, "wire_us": wire_part, "cause": cause})


def _launches(r: dict[str, Any], tp: Split | None, single: Split | None) -> Claim | None:
    params = (r.get("model") or {}).get("params")
    if not params:
        return None
    world = int(r.get("world_size") or 2)
    split = (f"TP splits the {params:,} parameters ({params * 4 / 1e6:.1f} MB of fp32 weights "
             f"read per token, {params * 4 / world / 1e6:.1f} MB per rank) but not the ops: "
             "every rank still runs every layer's ops, plus TP's own (clones, bias adds after "
             "the all-reduce, the embedding mask, the logits gather)")
    if tp is None or single is None or single.token_us <= 0:
        return Claim("launches", split + ".", {"shrank": None})
    outside = tp.compute_us + tp.rest_us
    share = outside / single.token_us
    shrank = share < SHRINK_BAR
    if shrank:
        text = (f"{split}; outside the collectives a TP token took {outside:.0f} µs against "
                f"{single.token_us:.0f} µs for a whole single-device token ({share:.0%}): the "
                "split weights paid, and the collectives are what TP adds.")
    else:
        text = (f"{split}, so outside the collectives a TP token still took {outside:.0f} µs "
                f"against {single.token_us:.0f} µs for a whole single-device token ({share:.0%}): "
                "at this size the per-op host overhead, not the weights, sets the time, and it "
                "does not shrink.")
    return Claim("launches", text, {"outside_us": outside, "single_us": single.token_us,
                                    "share": share, "shrank": shrank})


def _instrumentation(r: dict[str, Any]) -> Claim | None:
    oh = _num(r.get("instrumentation_overhead_ms_per_token"))
    if oh is None:
        return None
    return Claim("instrumentation", f"(Timing the collectives changed the TP step by {oh:+.3f} "
                 "ms/token; latency is from the uninstrumented pass.)", {"overhead_ms": oh})


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


def _transports(r: dict[str, Any]) -> Claim | None:
    """The two CPU transports' α side by side, like with like and each named once: *back to
    back* (the all-reduce sweep's fit, one call after another) and *in the loop* (the decode
    loop's collective time per token, ``_in_loop_alpha_us``). Both transports from this run
    (``--comm both``), or this run's against the other transport's profile
    (``tplab/assets/hardware_profiles.json``, whose α says which of the two it is)."""
    if (r.get("device_type") or (r.get("env") or {}).get("device_type")) != "cpu":
        return None
    calls, world = _num(r.get("allreduce_calls_per_token")), int(r.get("world_size") or 2)
    here = r.get("comm") or r.get("backend")
    transports = r.get("transports") or {}
    fits = {name: (t.get("sweep") or {}).get("fit") for name, t in transports.items()}
    fits.setdefault(here, (r.get("sweep") or {}).get("fit"))
    found: dict[str, dict[str, Any]] = {k: v for k, v in fits.items() if v}
    if here not in found or here not in ("shm", "gloo"):
        return None
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
            parts.append(f"TP measured {Figure(t_here, MS, TIMED).text()}/token over {here} "
                         f"against {Figure(t_other, MS, TIMED).text()} over {other}")
    else:
        from tplab.scaling import latency
        try:
            prof = latency.load_profile(latency.cpu_profile_name(other))
        except latency.ScalingError:
            return None
        a_other = prof.alpha_us.value
        in_loop = "in-loop" in prof.alpha_us.note
        mine = loop_here if in_loop else b2b_here
        if mine is None:
            return None
        where = f"in the {prof.name} profile ({prof.alpha_us.source}, not this run)"
        apart = _apart((mine, here), (a_other, other))
        parts.append(f"{'in the loop' if in_loop else 'back to back'} α "
                     f"{'≈' if in_loop else '='} {mine:.1f} µs over {here} in this run against "
                     f"{a_other:.1f} µs over {other} {where}" + (f", {apart}" if apart else ""))
        if in_loop:
            parts.append(f"back to back this run's {here} α is {b2b_here:.1f} µs")
    return Claim("transports", "The transport is the lesson's α, measured two ways: back to back "
                 "(the all-reduce sweep, one call after another) and in the loop (the decode "
                 "loop's collective time per token as 2(p-1)α per collective, waiting for the "
                 "slower rank included): " + "; ".join(parts) + ". Shared memory is how ranks "
                 "on one host talk without a network stack; gloo's collectives go through TCP "
                 "loopback.", {"here": here, "other": other})

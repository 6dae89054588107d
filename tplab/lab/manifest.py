"""``manifest.json``: the lab's record of one run, every field of the seed's Block G and more.

The seed's fields (seed, lab, vendor, instance_type, nvlink_present, instance_id, start_ts, end_ts,
duration_hours, estimated_cost_usd, actual_cost_usd, terminated_screenshot,
single_gpu_per_token_ms, tp_per_token_ms, speedup, lesson_notes, crossover_d_model) plus
allreduce_ms_per_token, allreduce_share (its share of a TP token), comm_compute_ratio, outputs_match,
the tplab version and a status:
COMPLETE, EDUCATIONAL_STUB (with the reason, e.g. no spot capacity under the cap, or no cloud run),
STOPPED (by the user), INTERRUPTED (the provider took the spot instance back) or FAILED (with the
reason).

Money: ``estimated_cost_usd`` is what the caller expects the run to cost (the lab: the quote's
price x the planned run's duration, tplab.lab.preflight.ESTIMATE_FORMULA), ``actual_cost_usd`` what
was recorded; the lab adds ``worst_case_usd``, ``authorized_usd`` and ``actual_cost_source`` as
fields of their own (tplab/lab/artifacts.py).

``lesson_notes`` is written from the run's measured numbers (message size, α against per-token
compute, launches not divided), so two runs on different hardware read differently; without a
run it says so, and why. ``nvlink_present`` comes from the job's ``nvidia-smi topo -m`` capture
(``nvlink_from_results``). Both `tplab local` and the lab (tplab/lab/artifacts.py) write their
manifests through ``build_manifest`` and ``write_manifest``. A manifest
never contains secrets: every string is checked against the environment's key-like variables and
private-key markers, and redacted if one slipped in.

Client side: standard library only (no torch).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from pathlib import Path
from typing import Any

from tplab import __version__
from tplab.home.redact import redact_tree
from tplab.records.jsonfile import write_json

SEED = 35200
LAB = "02-tp-inference-cloud"
STATUSES = ("COMPLETE", "EDUCATIONAL_STUB", "FAILED", "STOPPED", "INTERRUPTED")

#: the seed's Block G fields, in its order
SEED_FIELDS = (
    "seed", "lab", "vendor", "instance_type", "nvlink_present", "instance_id", "start_ts", "end_ts",
    "duration_hours", "estimated_cost_usd", "actual_cost_usd", "terminated_screenshot",
    "single_gpu_per_token_ms", "tp_per_token_ms", "speedup", "lesson_notes", "crossover_d_model",
)
EXTRA_FIELDS = ("allreduce_ms_per_token", "allreduce_share", "comm_compute_ratio", "outputs_match",
                "tplab_version",
                "status", "reason", "crossover_source")



def _share(results: dict[str, Any]) -> float | None:
    """The all-reduce share of a TP token: all-reduce ms over the instrumented pass's own
    per-token ms (the pass that timed it), rounded to 4 places; None without both figures."""
    ar_ms = _positive(results.get("allreduce_ms_per_token"))
    token_ms = _positive(((results.get("tp") or {}).get("instrumented_per_token_ms") or {})
                         .get("mean"))
    return round(ar_ms / token_ms, 4) if ar_ms and token_ms else None


def _positive(v: Any) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    return float(v) if ok else None


class ManifestError(ValueError):
    """A manifest that would say something untrue (one clear sentence)."""


def _iso(ts: Any) -> str | None:
    if ts is None or ts == "":
        return None
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return _dt.datetime.fromtimestamp(float(ts), tz=_dt.UTC).isoformat()
    if isinstance(ts, _dt.datetime):
        return (ts if ts.tzinfo else ts.replace(tzinfo=_dt.UTC)).isoformat()
    if isinstance(ts, str):
        _parse(ts)
        return ts
    raise ManifestError(f"timestamp {ts!r} is neither epoch seconds nor ISO 8601 text.")


def _parse(ts: str) -> _dt.datetime:
    try:
        d = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        raise ManifestError(f"timestamp {ts!r} is not ISO 8601.") from None
    return d if d.tzinfo else d.replace(tzinfo=_dt.UTC)


def _hours(start: str | None, end: str | None) -> float | None:
    if start is None or end is None:
        return None
    hours = (_parse(end) - _parse(start)).total_seconds() / 3600.0
    if hours < 0:
        raise ManifestError("end_ts is before start_ts.")
    return round(hours, 6)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.0f} B"


_GPU = re.compile(r"^GPU\d+$")
_NV_LINK = re.compile(r"^NV\d+$")


def nvlink_from_topo(topo: str | None) -> bool | None:
    """Whether ``nvidia-smi topo -m`` output shows an NVLink (an ``NV<n>`` cell) between two GPUs.

    Only the GPU-to-GPU cells of the matrix count: not the legend (whose ``NV#`` line explains
    the notation) nor NIC rows or columns. None when the text holds no GPU matrix (nvidia-smi
    missing or failed); False when it does and no pair of GPUs is joined by NVLink.
    """
    if not topo:
        return None
    header: list[str] | None = None
    rows = 0
    for line in topo.splitlines():
        cells = line.split()
        if not cells:
            continue
        if header is None:
            if "GPU0" in cells and "X" not in cells:  # the column labels; rows have an X
                header = cells
            continue
        if not _GPU.match(cells[0]) or "X" not in cells:
            continue
        rows += 1
        for col, cell in zip(header, cells[1:]):
            if _GPU.match(col) and col != cells[0] and _NV_LINK.match(cell):
                return True
    return False if rows else None


def nvlink_from_results(results: dict[str, Any] | None) -> bool | None:
    """NVLink between the run's GPUs: False for a CPU run, the topology matrix's answer for a GPU
    run, None when unknown (no results, or no usable ``nvidia-smi topo -m`` capture)."""
    if not results:
        return None
    env = results.get("env") or {}
    if (results.get("device_type") or env.get("device_type")) == "cpu":
        return False
    return nvlink_from_topo(env.get("nvidia_smi_topo_m"))


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
    if flagged:  # figures whose samples spread past the limit (tplab.records.stability)
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


def _alpha_comparison(r: dict[str, Any], calls: float | None, world: int) -> str:
    """The two CPU transports' α side by side: both from this run (``--comm both``), or this
    run's against the other transport's profile (``assets/hardware_profiles.json``)."""
    if (r.get("device_type") or (r.get("env") or {}).get("device_type")) != "cpu":
        return ""
    here = r.get("comm") or r.get("backend")
    fits = {name: (t.get("sweep") or {}).get("fit") for name, t in
            (r.get("transports") or {}).items()}
    fits.setdefault(here, (r.get("sweep") or {}).get("fit"))
    found: dict[str, dict[str, Any]] = {k: v for k, v in fits.items() if v}
    if here not in found or here not in ("shm", "gloo"):
        return ""
    other = "gloo" if here == "shm" else "shm"
    a_here = found[here]["alpha_us"]
    if other in found:
        a_other, source = found[other]["alpha_us"], "in the same run"
        t_here = (r.get("transports") or {}).get(here, {}).get("tp_per_token_ms")
        t_other = (r.get("transports") or {}).get(other, {}).get("tp_per_token_ms")
    else:
        from tplab.scaling import latency
        try:
            prof = latency.load_profile(latency.cpu_profile_name(other))
        except latency.ScalingError:
            return ""
        a_other, t_here, t_other = prof.alpha_us.value, None, None
        source = f"in the {prof.name} profile ({prof.alpha_us.source}, not this run)"
    lo, hi = sorted(((a_here, here), (a_other, other)))
    sentence = (f"The transport is the lesson's α: over {here} α = {a_here:.1f} µs, over {other} "
                f"α = {a_other:.1f} µs {source}")
    if lo[0] > 0:
        sentence += f", {hi[0] / lo[0]:.0f}× apart"
    if calls:
        sentence += (f"; at {calls:.0f} collectives a token that is "
                     f"{calls * 2 * (world - 1) * a_here / 1e3:.3f} ms of latency over {here} and "
                     f"{calls * 2 * (world - 1) * a_other / 1e3:.3f} ms over {other}")
    if t_here and t_other:
        sentence += (f", and TP measured {t_here:.3f} ms/token over {here} against "
                     f"{t_other:.3f} over {other}")
    return sentence + (". Shared memory is how ranks on one host talk without a network stack; "
                       "its α is of the order of an NVLink all-reduce's, gloo's TCP loopback "
                       "is tens of times that.")


def _json_safe(value: Any) -> Any:
    """JSON has no inf/nan (they become null); paths and other objects become text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return str(value)


def build_manifest(results: dict[str, Any] | None, *, status: str, reason: str = "",
                   vendor: str | None = None, instance_type: str | None = None,
                   nvlink_present: bool | None = None, instance_id: str | None = None,
                   start_ts: Any = None, end_ts: Any = None,
                   estimated_cost_usd: float | None = None, actual_cost_usd: float | None = None,
                   terminated_screenshot: str | None = None,
                   crossover_d_model: float | None = None, notes: str | None = None,
                   prediction: Any = None, profile_name: str = "",
                   partial: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest dict. ``notes`` overrides the generated lesson_notes; ``extra`` adds fields
    (it cannot overwrite the seed's). Without results the lesson notes say why (``reason``);
    ``partial`` (figures from the live stream of a lab that ended early) then fills the timing
    fields, and the manifest's ``partial`` section says so and how many tokens they cover."""
    if status not in STATUSES:
        raise ManifestError(f"status must be one of {', '.join(STATUSES)}, not {status!r}.")
    if status != "COMPLETE" and not reason.strip():
        raise ManifestError(f"a {status} manifest needs a reason.")
    if status == "COMPLETE":
        if not results:
            raise ManifestError("a COMPLETE manifest needs the run's results.")
        if results.get("outputs_match") is not True:
            raise ManifestError("a run whose TP output differs from the single-device output "
                                "cannot be COMPLETE; record it as FAILED.")
    r = results or {}
    part = partial if (partial and not r) else None
    figures = r or part or {}
    start, end = _iso(start_ts), _iso(end_ts)
    # the measured crossover (the run's d_model sweep) when there is one, else the model's
    measured_cross = r.get("measured_crossover_d_model")
    cross_value = measured_cross if measured_cross is not None else crossover_d_model
    m: dict[str, Any] = {
        "seed": SEED,
        "lab": LAB,
        "vendor": vendor,
        "instance_type": instance_type,
        "nvlink_present": nvlink_present,
        "instance_id": instance_id,
        "start_ts": start,
        "end_ts": end,
        "duration_hours": _hours(start, end),
        "estimated_cost_usd": estimated_cost_usd,
        "actual_cost_usd": actual_cost_usd,
        "terminated_screenshot": terminated_screenshot,
        "single_gpu_per_token_ms": figures.get("single_per_token_ms"),
        "tp_per_token_ms": figures.get("tp_per_token_ms"),
        "speedup": figures.get("speedup"),
        "lesson_notes": notes if notes is not None else lesson_notes(
            r or None, prediction, crossover_d_model, profile_name,
            why_no_run="" if r else reason, partial=part),
        "crossover_d_model": round(cross_value, 1) if cross_value else None,
        "allreduce_ms_per_token": figures.get("allreduce_ms_per_token"),
        # the all-reduce share of a TP token: ar_ms / token ms of the measured steps
        "allreduce_share": _share(r) if r else (part or {}).get("allreduce_share"),
        "comm_compute_ratio": r.get("comm_compute_ratio"),
        "outputs_match": r.get("outputs_match"),
        "tplab_version": __version__,
        "status": status,
        "reason": reason,
        "crossover_source": (None if not cross_value else
                             "measured" if measured_cross is not None else "predicted"),
    }
    m["predicted_crossover_d_model"] = round(crossover_d_model, 1) if crossover_d_model else None
    if r.get("d_model_sweep") is not None:
        m["measured_crossover_d_model"] = measured_cross
        m["measured_crossover_reason"] = r.get("measured_crossover_reason", "")
        m["d_model_sweep"] = r.get("d_model_sweep")
    m["figures"] = "complete" if r else ("partial" if part else "none")
    if part:
        m["partial"] = part
    if r:
        m["world_size"] = r.get("world_size")
        m["backend"] = r.get("backend")
        m["pod_torch_version"] = (r.get("env") or {}).get("torch_version")
        m["timing"] = (r.get("timing") or {}).get("tp_latency")
    for k, v in (extra or {}).items():
        if k in m:
            raise ManifestError(f"extra field {k!r} would overwrite a manifest field.")
        m[k] = v
    return redact_tree(_json_safe(m))


def write_manifest(path: str | os.PathLike[str], manifest: dict[str, Any]) -> Path:
    """Write the manifest atomically (redacted once more on the way out)."""
    missing = [k for k in SEED_FIELDS + EXTRA_FIELDS if k not in manifest]
    if missing:
        raise ManifestError(f"manifest is missing {', '.join(missing)}.")
    write_json(path, redact_tree(_json_safe(manifest)))
    return Path(path)

"""``manifest.json``: the lab's record of one run, every field of the lab sheet's Block G and more.

The lab sheet's fields (seed, lab, vendor, instance_type, nvlink_present, instance_id, start_ts, end_ts,
duration_hours, estimated_cost_usd, actual_cost_usd, terminated_screenshot,
single_gpu_per_token_ms, tp_per_token_ms, speedup, lesson_notes, crossover_d_model) plus
allreduce_ms_per_token, allreduce_share (its share of the instrumented pass's TP token),
comm_compute_ratio, outputs_match, the tplab version and a status:
COMPLETE, EDUCATIONAL_STUB (with the reason, e.g. no spot capacity under the cap, or no cloud run),
STOPPED (by the user), INTERRUPTED (the provider took the spot instance back) or FAILED (with the
reason).

Money: ``estimated_cost_usd`` is what the caller expects the run to cost (the lab: the quote's
price x the planned run's duration, tplab.lab.preflight.ESTIMATE_FORMULA), ``actual_cost_usd`` what
was recorded; the lab adds ``worst_case_usd``, ``authorized_usd`` and ``actual_cost_source`` as
fields of their own (tplab/lab/artifacts.py).

The figures are the lab's one record (``tplab.figures.lab_figures.LabFigures``): the seed's
fields are its values, and ``lab_figures`` holds it whole, each figure with its text as every
face shows it and the pass that took it (timed, instrumented, profiled), the crossover with the
hardware it is for and the cost figure (billed or estimate).

``lesson_notes`` is written from the run's measured numbers (``tplab.lab.lesson_notes``), so two
runs on different hardware read differently; without a run it says so, and why. ``nvlink_present`` comes from the job's ``nvidia-smi topo -m`` capture
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
from tplab.figures.lab_figures import LabFigures, crossover_of
from tplab.keys.redact import redact_tree
from tplab.lab.lesson_notes import lesson_notes
from tplab.util.jsonfile import write_json

SEED = 35200
LAB = "02-tp-inference-cloud"
STATUSES = ("COMPLETE", "EDUCATIONAL_STUB", "FAILED", "STOPPED", "INTERRUPTED")

#: the lab sheet's Block G fields, in its order
SHEET_FIELDS = (
    "seed", "lab", "vendor", "instance_type", "nvlink_present", "instance_id", "start_ts", "end_ts",
    "duration_hours", "estimated_cost_usd", "actual_cost_usd", "terminated_screenshot",
    "single_gpu_per_token_ms", "tp_per_token_ms", "speedup", "lesson_notes", "crossover_d_model",
)
EXTRA_FIELDS = ("allreduce_ms_per_token", "allreduce_share", "comm_compute_ratio", "outputs_match",
                "tplab_version",
                "status", "reason", "crossover_source", "crossover")



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


def measured_machine(results: dict[str, Any] | None) -> str | None:
    """The machine a run's figures come from, in words, when it was this CPU: "2 CPU processes
    (gloo) on AMD EPYC, 2 cores", "(shm, gloo alongside)" with ``--comm both`` (None for a GPU
    run or no run)."""
    r = results or {}
    env = r.get("env") or {}
    if (r.get("device_type") or env.get("device_type")) != "cpu":
        return None
    transport = r.get("comm") or r.get("backend") or "?"
    others = [t for t in (r.get("transports") or {}) if t != transport]
    if others:
        transport += ", " + ", ".join(others) + " alongside"
    cores = env.get("cpu_count")
    return (f"{r.get('world_size', '?')} CPU processes ({transport}) on {env.get('cpu') or 'this CPU'}"
            + (f", {cores} cores" if cores else ""))


def build_manifest(results: dict[str, Any] | None, *, status: str, reason: str = "",
                   vendor: str | None = None, instance_type: str | None = None,
                   nvlink_present: bool | None = None, instance_id: str | None = None,
                   start_ts: Any = None, end_ts: Any = None,
                   estimated_cost_usd: float | None = None, actual_cost_usd: float | None = None,
                   terminated_screenshot: str | None = None,
                   crossover_d_model: float | None = None, notes: str | None = None,
                   prediction: Any = None, profile_name: str = "",
                   partial: dict[str, Any] | None = None,
                   extra: dict[str, Any] | None = None, band: Any = None,
                   figures: LabFigures | None = None) -> dict[str, Any]:
    """The manifest dict. ``notes`` overrides the generated lesson_notes; ``extra`` adds fields
    (it cannot overwrite the lab sheet's). Without results the lesson notes say why (``reason``);
    ``partial`` (figures from the live stream of a lab that ended early) then fills the timing
    fields, and the manifest's ``partial`` section says so and how many tokens they cover.

    ``band`` (a ``tplab.scaling.crossover.CrossoverBand``) is the predicted crossover with its
    uncertainty: stored whole as ``crossover`` (its ``text`` the sentence to quote), its central
    fit as ``predicted_crossover_d_model``. The lab sheet's ``crossover_d_model`` is the d_model
    sweep's measured crossover when its bootstrap resolved it, else the band's central fit when
    the band is a range (or a point of assumed figures), else null: "no crossover below d_model
    N" is not a number, and ``crossover.text`` says it.

    ``figures`` is the lab's record (``tplab.figures.lab_figures``, with its cost and its
    crossover): the manifest's figure fields are its values, and ``lab_figures`` the whole
    record, each figure with its text as shown and the pass that took it. Without it the record
    is made here from ``results`` (or ``partial``) and the crossover from ``band`` (or
    ``crossover_d_model``)."""
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
    if figures is None:
        figures = LabFigures.from_results(r, crossover=crossover_of(
            r, band, predicted=crossover_d_model))
    cross = figures.crossover or crossover_of(r, band, predicted=crossover_d_model)
    band = cross.band
    start, end = _iso(start_ts), _iso(end_ts)
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
        "single_gpu_per_token_ms": figures.single_ms.value,
        "tp_per_token_ms": figures.tp_ms.value,
        "speedup": figures.speedup.value,
        "lesson_notes": notes if notes is not None else lesson_notes(
            r or None, prediction, cross.predicted_d_model, profile_name,
            why_no_run="" if r else reason, partial=part, band=band, figures=figures),
        "crossover_d_model": cross.d_model,
        "allreduce_ms_per_token": figures.allreduce_ms.value,
        # the all-reduce share of a TP token: ar_ms / the instrumented pass's token ms, the
        # record's own value (rounded here, it could show another percent than every face:
        # 0.86504 is "87%", its 0.865 "86%")
        "allreduce_share": figures.allreduce_share.value,
        "comm_compute_ratio": figures.comm_compute.value if r else None,
        "outputs_match": r.get("outputs_match"),
        "tplab_version": __version__,
        "status": status,
        "reason": reason,
        "crossover_source": cross.source,
    }
    m["predicted_crossover_d_model"] = cross.predicted_d_model
    m["crossover"] = band.to_dict() if band is not None else None
    m["lab_figures"] = figures.to_dict()
    if r.get("d_model_sweep") is not None:
        m["measured_crossover_d_model"] = r.get("measured_crossover_d_model")
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
    missing = [k for k in SHEET_FIELDS + EXTRA_FIELDS if k not in manifest]
    if missing:
        raise ManifestError(f"manifest is missing {', '.join(missing)}.")
    write_json(path, redact_tree(_json_safe(manifest)))
    return Path(path)

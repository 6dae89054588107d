"""The lab's closing artifacts: scaling-curve.png and manifest.json, from one ``LabPrediction``.

Why apart from the orchestrator: these are pure functions of what the lab's owners hold (the
config, the report, the pod, the money, its prediction); the state machine only decides *when* they are written (always,
after terminate + verify + record, whatever the outcome). The manifest itself is built by
``tplab.lab.manifest`` (the same builder `tplab local` uses); this module only says what the lab knows.
Money: ``estimated_cost_usd`` is the quote's expected cost of the planned run
(``estimated_cost_formula``), ``worst_case_usd`` the quote's price for the whole wall cap,
``authorized_usd`` what the ledger held, ``actual_cost_usd`` the lab's cost figure
(``LabMoney.cost``: ``cost_is`` "billed" once the provider's bill was recorded, from
``actual_cost_source``: the provider's billing, or cost x billed seconds; a pod not proven gone
leaves it unrecorded, its hold named in ``held_for_pod``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tplab.figures.lab_figures import LabFigures, crossover_of
from tplab.lab import manifest
from tplab.scaling import calibration, chart
from tplab.util.jsonfile import write_json
from tplab.lab.lab_config import COMPLETE, FAILED, LabConfig
from tplab.lab.pod import PROOF, LabPod
from tplab.lab.preflight import ESTIMATE_FORMULA
from tplab.lab.prediction import LabPrediction
from tplab.lab.proof_png import PROOF_PNG, write_proof_png
from tplab.lab.report import LabReport
from tplab.money.lab_money import LabMoney

CURVE = "scaling-curve.png"
#: the dashboard's screen saved after the lab ended (listed via Lab.add_artifact)
PROOF_SVG = "proof-terminated.svg"


#: what a mock lab's curve says above the plot (its pods are processes on this CPU)
MOCK_BANNER = "MOCK lab: local mock cloud, measured on this machine's CPU (gloo), not a GPU"


def write_curve(pred: LabPrediction, out_dir: Path, mock: bool = False) -> Path:
    """scaling-curve.png: the prediction's curves, the measured points (the d_model sweep's and
    the lab's own), the predicted crossover's band and the measured crossover (and, for a mock
    lab, MOCK above them)."""
    return chart.save_png(out_dir / CURVE, pred.profile, pred.world_size, shape=pred.shape,
                          measured=pred.measured, sweep=pred.sweep,
                          measured_crossover=pred.measured_crossover,
                          measured_reason=pred.measured_reason,
                          banner=MOCK_BANNER if mock else None,
                          warning=calibration.miss_warning(pred.calibration), band=pred.band)


def stand_in(config: LabConfig) -> dict[str, Any] | None:
    """What a mock lab stands for, apart from what it measured: the hardware it would rent and
    the scaling model's prediction there, from that hardware's profile (never from this CPU's
    figures). Nothing in it ran; ``what`` says so."""
    from tplab.lab.prediction import SHIPPED_D_MODEL, predict_lab
    pred = predict_lab(None, gpu_type=config.gpu_type, gpus=config.gpus, mock=False)
    if pred is None:
        return None
    at = pred.at_lab_d_model
    return {
        "what": "a prediction of the scaling model for the hardware this mock lab stands for; "
                "nothing ran on it (the figures above were measured on this machine's CPU)",
        "instance_type": config.instance_type(),
        "profile": pred.profile.name,
        "profile_devices": pred.profile.devices,
        "profile_figures": sorted({n.source for n in pred.profile.numbers().values()}),
        "d_model": SHIPPED_D_MODEL,
        "predicted_single_ms": at.single_ms if at else None,
        "predicted_tp_ms": at.tp_ms if at else None,
        "predicted_speedup": at.speedup if at else None,
        "crossover": pred.band.to_dict() if pred.band else None,
    }


def lab_figures(config: LabConfig, report: LabReport, pod: LabPod, money: LabMoney,
                pred: LabPrediction | None) -> LabFigures:
    """The lab's figures, made once (``tplab.figures.lab_figures``): from its results (or, for
    a lab that ended before them, the live stream's figures so far), its cost figure (the
    ledger's billed amount once recorded) and its crossover (the prediction's band, the d_model
    sweep's, the machine measured and, for a mock lab, the hardware it stands for)."""
    res = report.results or None
    cost = money.cost() if pod.id is not None else None
    machine = manifest.measured_machine(res)
    stands = None
    if config.mock:
        stand = stand_in(config)
        if stand is not None and stand.get("crossover"):
            stands = (f"{stand['instance_type']}: crossover "
                      f"{stand['crossover']['text']}; a prediction, nothing ran on it")
    cross = crossover_of(res, pred.band if pred else None, machine, stands)
    if res:
        return LabFigures.from_results(res, cost=cost, crossover=cross)
    return replace(LabFigures.from_fold(report.partial, cost=cost), crossover=cross)


def write_proof_picture(report: LabReport, summary: dict[str, Any],
                        mock: bool = False) -> Path | None:
    """proof-terminated.png beside proof-terminated.json (tplab.lab.proof_png): the provider's
    answer and the lab's final frame (``summary``: the final table's figures); None when no
    pod was terminated (no proof to draw)."""
    path = write_proof_png(report.out_dir, summary, mock=mock)
    if path is not None:
        report.add_artifact(PROOF_PNG)
    return path


def _store_calibration(pred: LabPrediction, path: Path) -> None:
    """The calibrated prediction at each measured point, into the fetched results.json
    (``calibration``, ``d_model_sweep[i].predicted_*``): done with the manifest, because the
    curve is drawn when the result event arrives, before results.json is fetched."""
    import json
    if pred.calibration is None or not path.is_file():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the lab already refused a results.json it cannot read
    if isinstance(data, dict):
        data["calibration"] = pred.calibration
        if pred.sweep:
            data["d_model_sweep"] = pred.sweep
        write_json(path, data)


def vendor_label(config: LabConfig) -> str:
    """The manifest's ``vendor``: the cloud that ran the lab ("Vast.ai", "mock RunPod (local)")."""
    from tplab.cloud.registry import label
    name = label(config.provider_name())
    return f"mock {name} (local)" if config.mock else name


def lab_manifest(config: LabConfig, report: LabReport, pod: LabPod, money: LabMoney,
                 pred: LabPrediction | None, figures: LabFigures | None = None) -> dict[str, Any]:
    """The lab sheet's manifest fields (and the lab's own) from what the lab's owners hold (the
    report: outcome, results, transport, files; the pod; the money) and its figures
    (``lab_figures``), built by tplab.lab.manifest.build_manifest: lesson notes from this run's
    numbers, no secrets."""
    res = report.results or None
    if figures is None:
        figures = lab_figures(config, report, pod, money, pred)
    transport = report.transport
    status, reason = report.status, report.reason
    if status == COMPLETE and not res:
        status, reason = FAILED, "the lab finished without the job's results"
    elif status == COMPLETE and (res or {}).get("outputs_match") is not True:
        status, reason = FAILED, "the TP output differs from the single-device output"
    # the dashboard's screenshot when it saved one, else the proof picture, else the json
    proof = next((n for n in (PROOF_SVG, PROOF_PNG, PROOF) if report.path(n).is_file()), None)
    partial = report.partial_figures()
    money_fields = money.manifest_fields()
    # a mock lab's pods are processes on this CPU: its instance is what measured, and the GPU it
    # stands for is a labelled prediction beside it, never a field that says a GPU ran
    machine = manifest.measured_machine(res) or "this machine's CPU (no job ran)"
    instance_type = f"mock: {machine}" if config.mock else config.instance_type()
    mock_only: dict[str, Any] = {}
    if config.mock:
        mock_only["measured_on"] = machine
        mock_only["stands_for"] = stand_in(config)
    return manifest.build_manifest(
        res, status=status, reason=reason,
        vendor=vendor_label(config),
        instance_type=instance_type,
        nvlink_present=False if config.mock else manifest.nvlink_from_results(res),
        instance_id=pod.id, start_ts=pod.created_at, end_ts=pod.gone_at,
        estimated_cost_usd=money_fields["estimated_cost_usd"],
        actual_cost_usd=money_fields["actual_cost_usd"],
        terminated_screenshot=proof,
        prediction=pred.at_lab_d_model if pred else None,
        profile_name=pred.profile_name if pred else "",
        partial=partial, figures=figures,
        extra={
            "mock": config.mock,
            "provider": config.provider_name(),
            # a lab that never rented has no end to prove: null, and pod_created says so
            "verified_gone": pod.verified_gone if pod.id is not None else None,
            "pod_created": pod.id is not None,
            "usd_per_hr": pod.usd_per_hr,
            "price_kind": money_fields["price_kind"],
            "estimated_cost_formula": ESTIMATE_FORMULA,
            "worst_case_usd": money_fields["worst_case_usd"],
            "authorized_usd": money_fields["authorized_usd"],
            "actual_cost_source": money_fields["actual_cost_source"],
            "actual_cost_note": money_fields["actual_cost_note"],
            # what actual_cost_usd is: "billed" once the provider showed the pod gone and its
            # bill was recorded, else "estimate"; held_for_pod: the pod whose end is not
            # proven, for which the lab's authorization stays held
            "cost_is": money_fields["cost_is"] if pod.id is not None else None,
            "held_for_pod": money_fields["held_for_pod"],
            "budget_label": config.ledger_label(),
            "image": pod.image.to_dict() if pod.image else None,
            **mock_only,
            "device_type": (res or {}).get("device_type"),
            "timing_method": (res or {}).get("timing"),
            "num_prompts": config.num_prompts,
            "new_tokens": config.new_tokens,
            "events": {"job_events": transport.job_events, "ssh_drops": transport.ssh_drops,
                       "duplicates_dropped": transport.duplicates, "gaps": transport.gaps},
            "artifacts": sorted(set(report.artifacts) | {"manifest.json", "stream.jsonl",
                                                         "instance.json"}),
        })


def write_lab_manifest(config: LabConfig, report: LabReport, pod: LabPod, money: LabMoney,
                       pred: LabPrediction | None, figures: LabFigures | None = None) -> Path:
    """manifest.json in the lab's out dir (atomically, redacted: tplab.lab.manifest.write_manifest);
    the prediction's per-point check goes into results.json first."""
    if pred is not None:
        _store_calibration(pred, report.path("results.json"))
    return manifest.write_manifest(report.path("manifest.json"),
                                   lab_manifest(config, report, pod, money, pred, figures))

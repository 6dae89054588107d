"""manifest.json (tplab/lab/manifest.py): the lab sheet's fields, statuses, measured lesson notes, no secrets."""

from __future__ import annotations

import copy
import json

import pytest

from tplab.lab import lesson_notes, manifest
from tplab.scaling import latency
from tplab.lab.manifest import ManifestError, build_manifest, write_manifest

SHEET_BLOCK_G = ["seed", "lab", "vendor", "instance_type", "nvlink_present", "instance_id",
                "start_ts", "end_ts", "duration_hours", "estimated_cost_usd", "actual_cost_usd",
                "terminated_screenshot", "single_gpu_per_token_ms", "tp_per_token_ms", "speedup",
                "lesson_notes", "crossover_d_model"]


def _results(**over) -> dict:
    r = {
        "schema": 1, "ok": True, "outputs_match": True, "world_size": 2, "backend": "nccl",
        "device_type": "cuda", "single_per_token_ms": 1.9, "tp_per_token_ms": 3.4,
        "speedup": 1.9 / 3.4, "allreduce_ms_per_token": 0.6, "comm_compute_ratio": 0.22,
        "instrumentation_overhead_ms_per_token": 0.15, "allreduce_calls_per_token": 14.0,
        "allreduce_bytes_per_call": 409.0,
        "model": {"n_layer": 6, "vocab_size": 600, "d_model": 64, "n_head": 4, "d_ff": 256,
                  "params": 387072},
        "sweep": {"points": [], "fit": {"alpha_us": 11.5, "beta_gbps": 9.8}},
        "timing": {"tp_latency": "from the uninstrumented TP pass"},
        "env": {"device_names": ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"]},
    }
    r.update(over)
    return r


def _complete(results=None, **kw):
    args = dict(status="COMPLETE", vendor="runpod", instance_type="2x RTX 4090",
                nvlink_present=False, instance_id="pod-123", start_ts=1764450000.0,
                end_ts=1764450000.0 + 5400, estimated_cost_usd=3.0, actual_cost_usd=1.02,
                terminated_screenshot="proof-terminated.png", crossover_d_model=1953.3)
    args.update(kw)
    return build_manifest(results if results is not None else _results(), **args)


def test_manifest_has_every_sheet_field_and_the_extras(tmp_path):
    m = _complete()
    for key in SHEET_BLOCK_G + ["allreduce_ms_per_token", "comm_compute_ratio", "outputs_match",
                               "tplab_version", "status", "reason"]:
        assert key in m, key
    assert m["seed"] == 35200 and m["lab"] == "02-tp-inference-cloud"
    assert m["duration_hours"] == pytest.approx(1.5)
    assert m["start_ts"].startswith("2025-11-29T")
    assert m["single_gpu_per_token_ms"] == 1.9 and m["speedup"] == pytest.approx(0.5588, rel=1e-3)
    assert m["crossover_d_model"] == 1953.3
    path = write_manifest(tmp_path / "manifest.json", m)
    assert json.loads(path.read_text()) == m


def test_statuses_need_reasons_and_honest_outputs():
    with pytest.raises(ManifestError, match="needs a reason"):
        build_manifest(None, status="EDUCATIONAL_STUB")
    with pytest.raises(ManifestError, match="cannot be COMPLETE"):
        _complete(_results(outputs_match=False))
    with pytest.raises(ManifestError, match="status must be one of"):
        build_manifest(None, status="DONE", reason="x")
    failed = build_manifest(_results(outputs_match=False), status="FAILED",
                            reason="TP output differs for prompt 3")
    assert failed["outputs_match"] is False and failed["reason"].startswith("TP output")
    stub = build_manifest(None, status="EDUCATIONAL_STUB", reason="no spot capacity under the cap",
                          prediction=latency.predict(latency.load_profile("rtx4090x2-pcie"), 64),
                          crossover_d_model=1953.0)
    assert stub["single_gpu_per_token_ms"] is None
    assert "prediction" in stub["lesson_notes"] and "1953" in stub["lesson_notes"]


def test_lesson_notes_are_written_from_the_runs_numbers():
    a = lesson_notes.lesson_notes(_results(), crossover_d_model=1953.0, profile_name="rtx4090x2-pcie")
    for piece in ("1.90 ms/token", "3.40 ms/token", "256 B", "13 all-reduces", "α = 11.5 µs",
                  "0.600 ms per token", "launches", "1953"):
        assert piece in a, piece
    other = _results(single_per_token_ms=0.8, tp_per_token_ms=2.5, speedup=0.32,
                     sweep={"points": [], "fit": {"alpha_us": 6.0, "beta_gbps": 200.0}})
    b = lesson_notes.lesson_notes(other, crossover_d_model=2470.0)
    assert b != a and "α = 6.0 µs" in b and "0.800 ms/token" in b


def test_lesson_notes_quote_the_profiled_passs_split_of_a_token_and_of_an_all_reduce():
    from tests.synthetic_lab import synthetic_timeline
    from tplab.viewmodel.timeline_view import timeline_from
    section = synthetic_timeline()
    tp = timeline_from(section).splits["tp"]
    notes = lesson_notes.lesson_notes(_results(timeline=section))
    assert (f"splits a TP token of {tp.token_us:.0f} µs (median, mean of the ranks) into "
            f"{tp.compute_us:.0f} µs of compute, {tp.wire_us:.0f} µs on the wire, "
            f"{tp.wait_us:.0f} µs waiting for the other rank") in notes
    assert (f"of {tp.allreduce_us_per_call:.0f} µs per all-reduce, "
            f"{tp.allreduce_wait_us_per_call:.0f} µs ({tp.wait_share:.0%}) is waiting for the "
            "other rank to arrive") in notes
    assert "splits a TP token" not in lesson_notes.lesson_notes(_results())


def test_no_run_and_no_crossover_claims_nothing():
    notes = lesson_notes.lesson_notes(None)
    assert notes == "No run and no prediction: nothing measured to reflect on."


def test_a_small_model_speedup_is_called_out_as_unphysical():
    notes = lesson_notes.lesson_notes(_results(speedup=1.4, tp_per_token_ms=1.36))
    assert "not physical" in notes


def test_no_secrets_in_the_manifest(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_SUPERSECRET1234567890")
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----"
    m = build_manifest(None, status="FAILED",
                       reason="create failed: 401 for key rpa_SUPERSECRET1234567890",
                       instance_id="pod-1", extra={"ssh": {"key": pem}})
    text = json.dumps(m)
    assert "SUPERSECRET" not in text and "PRIVATE KEY" not in text
    assert "[REDACTED]" in m["reason"]
    leaked = copy.deepcopy(m)
    leaked["vendor"] = "rpa_SUPERSECRET1234567890"
    write_manifest(tmp_path / "m.json", leaked)
    assert "SUPERSECRET" not in (tmp_path / "m.json").read_text()


def test_extra_cannot_overwrite_and_missing_fields_are_refused(tmp_path):
    with pytest.raises(ManifestError, match="overwrite"):
        build_manifest(None, status="FAILED", reason="x", extra={"speedup": 9.0})
    with pytest.raises(ManifestError, match="missing"):
        write_manifest(tmp_path / "m.json", {"seed": 35200})


TOPO_NVLINK = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tSYS\t0-63\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\t0-63\t0\t\tN/A\n"
    "NIC0\tSYS\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


def test_nvlink_is_read_from_the_gpu_cells_of_the_topology_matrix():
    assert manifest.nvlink_from_topo(TOPO_NVLINK) is True
    pcie = TOPO_NVLINK.replace("NV18", "PHB")  # the legend still mentions NV#: not a link
    assert manifest.nvlink_from_topo(pcie) is False
    single = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-31\t0\n\nLegend:\n  NV#  = NVLinks\n"
    assert manifest.nvlink_from_topo(single) is False
    assert manifest.nvlink_from_topo("<nvidia-smi not found>") is None
    assert manifest.nvlink_from_topo("") is None and manifest.nvlink_from_topo(None) is None


def test_nvlink_from_results_is_false_on_cpu_and_unknown_without_a_matrix():
    assert manifest.nvlink_from_results(None) is None
    assert manifest.nvlink_from_results(_results(device_type="cpu")) is False
    gpu = _results()
    assert manifest.nvlink_from_results(gpu) is None  # no topo captured
    gpu["env"] = dict(gpu["env"], nvidia_smi_topo_m=TOPO_NVLINK)
    assert manifest.nvlink_from_results(gpu) is True
    gpu["env"]["nvidia_smi_topo_m"] = TOPO_NVLINK.replace("NV18", "SYS")
    assert manifest.nvlink_from_results(gpu) is False


def test_a_manifest_without_results_says_why_in_its_lesson_notes():
    m = build_manifest(None, status="FAILED", reason="the pod never became ready")
    assert m["lesson_notes"] == ("No job results, so nothing measured to reflect on: the pod "
                                 "never became ready.")
    pred = latency.predict(latency.load_profile("cpu-gloo"), 64)
    m = build_manifest(None, status="EDUCATIONAL_STUB", reason="no spot capacity under the cap",
                       prediction=pred)
    assert m["lesson_notes"].startswith("No job results (no spot capacity under the cap), so no "
                                        "measured numbers: this is the model's prediction")


def test_non_finite_numbers_become_null(tmp_path):
    m = _complete(_results(comm_compute_ratio=float("inf")))
    assert m["comm_compute_ratio"] is None
    write_manifest(tmp_path / "m.json", m)
    assert json.loads((tmp_path / "m.json").read_text())["comm_compute_ratio"] is None


def _cpu_results(**over) -> dict:
    shm_fit = {"alpha_us": 6.0, "beta_gbps": 2.1}
    gloo_fit = {"alpha_us": 420.0, "beta_gbps": 0.5}
    fields = dict(
        backend="gloo", device_type="cpu", comm="shm", sweep={"points": [], "fit": shm_fit},
        env={"device_names": ["cpu: AMD EPYC"] * 2, "device_type": "cpu"},
        transports={"shm": {"tp_per_token_ms": 3.1, "sweep": {"fit": shm_fit},
                            "allreduce_ms_per_token": 2.8, "allreduce_calls_per_token": 14},
                    "gloo": {"tp_per_token_ms": 21.0, "sweep": {"fit": gloo_fit},
                             "allreduce_ms_per_token": 19.6, "allreduce_calls_per_token": 14}})
    fields.update(over)
    return _results(**fields)


def test_lesson_notes_compare_the_two_cpu_transports_alphas_from_one_run():
    notes = lesson_notes.lesson_notes(_cpu_results())
    assert "Measured on shared memory (shm, gloo for setup)" in notes
    assert ("back to back α = 6.0 µs over shm and 420.0 µs over gloo in the same run, gloo's "
            "is 70× shm's") in notes
    # in the loop: 2.8 ms / (14 collectives × 2(p-1)) = 100 µs; 19.6 ms: 700 µs
    assert "in the loop α ≈ 100.0 µs over shm and 700.0 µs over gloo, gloo's is 7.0× shm's" in notes
    assert "TP measured 3.10 ms/token over shm against 21.0 ms over gloo" in notes
    assert notes.count("back to back (the all-reduce sweep") == 1  # each named once
    assert "tens of times" not in notes


def test_lesson_notes_compare_a_single_transport_with_the_other_profile():
    r = _cpu_results(comm="gloo", sweep={"points": [], "fit": {"alpha_us": 400.0,
                                                             "beta_gbps": 0.4}})
    del r["transports"]
    shm = latency.load_profile("cpu-shm").alpha_us
    assert "in-loop" in shm.note  # the profile's α is its decode loop's, so this run's is too
    notes = lesson_notes.lesson_notes(r)
    in_loop = r["allreduce_ms_per_token"] * 1e3 / (r["allreduce_calls_per_token"] * 2)
    assert (f"in the loop α ≈ {in_loop:.1f} µs over gloo in this run against {shm.value:.1f} µs "
            "over shm in the cpu-shm profile (measured, not this run)") in notes
    assert "back to back this run's gloo α is 400.0 µs" in notes
    assert "in the same run" not in notes and "1× apart" not in notes
    # a gloo run whose decode loop paid what the shm profile did: said as such, not "1× apart"
    r["allreduce_ms_per_token"] = shm.value * 2 * r["allreduce_calls_per_token"] / 1e3
    assert f"against {shm.value:.1f} µs over shm in the cpu-shm profile (measured, not this " \
        "run), about the same" in lesson_notes.lesson_notes(r)


def test_gpu_lesson_notes_have_no_cpu_transport_comparison():
    assert "The transport is the lesson's α" not in lesson_notes.lesson_notes(_results())


def test_crossover_is_the_measured_one_when_the_sweep_found_it_and_notes_compare_both():
    sweep = [{"d_model": 512, "single_ms": 2.0, "tp_ms": 2.6, "outputs_match": True},
             {"d_model": 1024, "single_ms": 6.0, "tp_ms": 4.0, "outputs_match": True}]
    m = _complete(_results(d_model_sweep=sweep, measured_crossover_d_model=700.0,
                           measured_crossover_reason=""))
    assert m["crossover_d_model"] == 700.0 and m["crossover_source"] == "measured"
    assert m["predicted_crossover_d_model"] == 1953.3 and m["measured_crossover_d_model"] == 700.0
    notes = m["lesson_notes"]
    assert "measured the crossover at d_model ≈ 700" in notes and "crossover at d_model ≈ 1953" in notes
    assert "179% above the measurement" in notes
    # a sweep without a crossover: the predicted one, labelled so, and the sweep's reason
    m = _complete(_results(d_model_sweep=sweep[:1], measured_crossover_d_model=None,
                           measured_crossover_reason="the sweep has 1 usable measured point(s)"))
    assert m["crossover_d_model"] == 1953.3 and m["crossover_source"] == "predicted"
    assert "measured no crossover (the sweep has 1 usable" in m["lesson_notes"]
    # no sweep at all: predicted, and the notes do not pretend otherwise
    m = _complete()
    assert m["crossover_source"] == "predicted" and "predicted only" in m["lesson_notes"]


def test_the_manifest_gives_the_all_reduce_share_of_a_tp_token():
    """allreduce_ms_per_token over the instrumented pass's own per-token ms (the pass that timed
    it): 0.6 of 4.0 ms; none without both figures."""
    timed = {"instrumented_per_token_ms": {"n": 14, "mean": 4.0}}
    assert _complete(_results(tp=timed))["allreduce_share"] == pytest.approx(0.15)
    assert _complete(_results(tp=timed, allreduce_ms_per_token=None))["allreduce_share"] is None
    assert _complete()["allreduce_share"] is None
    # the record's own value, not a rounding of it that would show another percent: 3.46016 of
    # 4.0 ms is 0.86504, "87%" on every face; rounded to 0.865 it read "86%"
    from tplab.figures.lab_figures import from_manifest
    m = _complete(_results(tp=timed, allreduce_ms_per_token=3.46016))
    share = from_manifest(m).allreduce_share
    assert share.text() == "87%" and share.at_rounding(m["allreduce_share"]) == "87%"


def test_lesson_notes_warn_when_the_runs_figures_are_flagged_unstable():
    quiet = lesson_notes.lesson_notes(_results())
    assert "not trustworthy" not in quiet
    busy = _results()
    busy["stability"] = {"unstable": [{"figure": "tp_per_token_ms (gloo)",
                                       "note": "unstable: spread 37%; machine busy?"}]}
    notes = lesson_notes.lesson_notes(busy)
    assert ("1 figure(s) of this run are not trustworthy, e.g. tp_per_token_ms (gloo): "
            "unstable: spread 37%; machine busy?") in notes

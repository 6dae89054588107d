"""Fast tests of the lab's pieces that need no cloud: records, options, the view (the event tail's
decoding is in tests/wire/test_event_tail.py)."""

from __future__ import annotations

import argparse
import io
import json
import sys

import pytest

from tplab.lab import instances as instance_store
from tplab.records.events import EventWriter, LogEvent, WarningEvent
from tplab.faces.headless import HeadlessView
from tplab.lab.lab_config import LabConfig
from tplab.lab.orchestrator import Lab
from tplab.lab.options import add_lab_arguments, config_from_args


def test_instance_records_round_trip_and_close(tmp_path):
    rec = instance_store.InstanceRecord(lab_id="L1", label="lab", pod_name="tplab-L1",
                                        provider="runpod", gpu_type="g", gpu_count=2, spot=True,
                                        usd_per_hr=0.7, mock=True)
    instance_store.save(rec, [tmp_path / "instance.json"])
    assert [r.lab_id for r in instance_store.open_records(True)] == ["L1"]
    rec.pod_id, rec.state = "pod9", instance_store.CREATED
    instance_store.save(rec)
    instance_store.mark("pod9", instance_store.GONE, True)
    assert instance_store.open_records(True) == []
    data = json.loads((tmp_path / "instance.json").read_text())
    assert data["state"] == "intent" and "key" not in json.dumps(data).lower()


def test_options_build_the_config(tmp_path):
    p = argparse.ArgumentParser()
    add_lab_arguments(p)
    args = p.parse_args(["--mock", "--prompts", "3", "--new-tokens", "9", "--on-demand",
                         "--lab-cap", "2.5", "--heartbeat-timeout", "7", "--out", str(tmp_path),
                         "--terminate-timeout", "30"])
    cfg = config_from_args(args)
    assert cfg.mock and not cfg.spot and cfg.num_prompts == 3 and cfg.new_tokens == 9
    assert cfg.end_bound_s == 30.0  # the end's bound, as `tplab terminate --timeout` has it
    assert config_from_args(p.parse_args([])).end_bound_s == LabConfig().end_bound_s == 240.0
    assert cfg.lab_cap_usd == 2.5 and cfg.heartbeat_timeout_s == 7.0
    assert cfg.out_dir == tmp_path
    assert cfg.ledger_label() == "lab02-tp-spinup-rtx4090x2"
    with pytest.raises(SystemExit):
        p.parse_args(["--prompts", "0"])
    # the watchdog's stale-heartbeat T defaults to the lab sheet's 10 min
    assert config_from_args(p.parse_args([])).heartbeat_timeout_s == 600.0
    assert LabConfig().heartbeat_timeout_s == 600.0


def test_lab_manifest_without_results_is_built_by_tplab_manifest(tmp_path):
    from tplab.lab.artifacts import write_lab_manifest
    from tplab.lab.prediction import predict_lab
    from tplab.lab.manifest import SHEET_FIELDS
    lab = Lab(LabConfig(mock=True, out_dir=tmp_path))
    cfg, report = lab.config, lab.report
    owners = (cfg, report, lab.pod, lab.money)
    pred = predict_lab(None, gpu_type=cfg.gpu_type, gpus=cfg.gpus, mock=True,
                       checkpoint=cfg.checkpoint)
    report.end("EDUCATIONAL_STUB", "no spot capacity; nothing was created")
    m = json.loads(write_lab_manifest(*owners, pred).read_text())
    assert all(k in m for k in SHEET_FIELDS)
    assert m["status"] == "EDUCATIONAL_STUB" and m["vendor"] == "mock RunPod (local)"
    assert m["nvlink_present"] is False and m["instance_id"] is None
    assert m["terminated_screenshot"] is None  # no pod, no proof file
    notes = m["lesson_notes"]
    assert notes.startswith("No job results (no spot capacity; nothing was created)")
    assert "prediction at d_model 64" in notes
    assert m["events"]["job_events"] == 0 and m["budget_label"] == lab.config.ledger_label()
    # a pod's proof, once written, is what terminated_screenshot names
    (tmp_path / "proof-terminated.json").write_text("{}")
    report.end("FAILED", "the job exited with status 1")
    m = json.loads(write_lab_manifest(*owners, pred).read_text())
    assert m["terminated_screenshot"] == "proof-terminated.json"
    assert "the job exited with status 1" in m["lesson_notes"]


async def test_subscribers_get_every_event_and_never_block_the_lab(tmp_path):
    lab = Lab(LabConfig(mock=True, out_dir=tmp_path))
    fast = lab.subscribe()
    slow = lab.subscribe(maxsize=2)
    for i in range(5):
        lab.stream.emit("log", level="info", msg=f"m{i}")
    lab.stream.publish_batch([])  # an empty batch is harmless
    lab.stream.close_subs()
    got = [ev.msg async for ev in fast if isinstance(ev, LogEvent)]
    assert got == [f"m{i}" for i in range(5)]
    tail = [ev.msg async for ev in slow if isinstance(ev, LogEvent)]  # ends too, the newest
    assert tail == ["m4"]
    assert lab.dropped_events == 4  # the slow one lost its oldest, the lab did not wait


def test_headless_view_prints_stages_progress_and_table():
    out = io.StringIO()
    view = HeadlessView(out, tty=False)
    view.set_plan(1, 2, 2)
    lab_w, job_w = EventWriter(src="lab"), EventWriter(src="job")
    for ev in [lab_w.make("phase", name="run"),
               job_w.make("token", mode="single", prompt=0, pos=0, ms=1.0, ar_ms=0.0),
               job_w.make("token", mode="single", prompt=0, pos=1, ms=1.2, ar_ms=0.0),
               job_w.make("token", mode="tp", prompt=0, pos=0, ms=3.0, ar_ms=2.0),
               job_w.make("token", mode="tp", prompt=0, pos=1, ms=3.5, ar_ms=2.0),
               lab_w.make("warning", msg="budget alert: 80%"),
               lab_w.make("phase", name="done", status="COMPLETE", reason="ok")]:
        view.handle(ev)
    text = out.getvalue()
    assert "run" in text and "tokens 4/4 (100%)" in text and "tp 3.50 ms" in text
    assert "WARNING: budget alert" in text and "done: COMPLETE" in text
    table = view.table({"status": "COMPLETE", "reason": "ok", "results": {
        "single_per_token_ms": 1.1, "tp_per_token_ms": 3.25, "speedup": 0.338,
        "allreduce_ms_per_token": 2.0, "comm_compute_ratio": 1.6, "outputs_match": True},
        "pod_id": "p", "verified_gone": True, "actual_cost_usd": 0.01, "job_events": 4,
        "ssh_drops": 0, "duplicates": 0, "gaps": 0, "artifacts": {"manifest.json": "/x"}})
    assert "0.338×" in table and "p (verified gone)" in table
    # each figure named with the pass that took it: TP's latency and the all-reduce are two
    # passes' figures, the table says which (it once printed "all-reduce per token 2.000 ms"
    # under "TP per-token" without a word)
    rows = dict(line.strip().split("  ", 1) for line in table.splitlines())
    assert rows["cost"].strip().startswith("$0.01 ")  # money as every face shows it (fmt_usd)
    assert rows["TP per token (timed pass)"].strip() == "3.25 ms"
    assert rows["all-reduce (instrumented pass)"].strip() == "2.00 ms per token"
    assert rows["speedup, single/TP (timed pass)"].strip() == "0.338×"


def test_headless_view_says_a_choice_the_lab_made_and_keeps_other_info_quiet():
    out = io.StringIO()
    view = HeadlessView(out, tty=False)
    w = EventWriter(src="lab")
    view.handle(w.make("log", level="info", msg="image pytorch/pytorch:2.4.0"))
    view.handle(w.make("log", level="info", msg="--provider auto picked Vast.ai: the cheapest "
                       "spot offer", headline=True))
    text = out.getvalue()
    assert "image pytorch" not in text
    assert "--provider auto picked Vast.ai: the cheapest spot offer" in text


def test_tty_progress_is_one_redrawn_line():
    out = io.StringIO()
    view = HeadlessView(out, tty=True)
    view.set_plan(1, 50, 2)
    w = EventWriter(src="job")
    for i in range(100):
        view.handle(w.make("token", mode="tp", prompt=0, pos=i % 50, ms=2.0, ar_ms=1.0))
    view._bar(force=True)
    assert "\n" not in out.getvalue() and "\r" in out.getvalue()
    assert "100/100 tokens" in out.getvalue().split("\r")[-1]


def test_bundle_is_only_what_the_pod_needs(lab_assets):
    from tplab.lab.bundle import bundle_items
    ckpt, prompts = lab_assets
    remote_paths = {i.remote for i in bundle_items(ckpt, prompts)}
    assert {"checkpoint.pt", "prompts.txt", "tplab/__init__.py", "tplab/records/events.py",
            "tplab/job/__main__.py", "tplab/job/watchdog.py", "tplab/tp/layers.py",
            "tplab/model/gpt.py", "tplab/stats/fit.py", "tplab/util/jsonfile.py"} <= remote_paths
    tops = {p.split("/")[1] for p in remote_paths if p.startswith("tplab/") and p.count("/") > 1}
    assert tops == {"records", "stats", "util", "tp", "model", "job"}
    assert not any(p.startswith(("tplab/cloud", "tplab/mock")) or "remote" in p or
                   "__pycache__" in p for p in remote_paths)


def test_a_relative_pod_python_means_the_same_file_on_the_pod(tmp_path, monkeypatch):
    """A mock pod runs in its sandbox folder: the path given is made absolute where it was typed
    (not resolved: a virtual environment's python is a link that must keep its name)."""
    from tplab.commands.main import build_parser
    from tplab.lab.options import config_from_args
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    for command in (["run", "--mock"], ["local", "--out", "x"], ["mock-cloud"]):
        args = build_parser().parse_args([*command, "--pod-python", "venv/bin/python"])
        assert args.pod_python == str(venv / "python"), command
    args = build_parser().parse_args(["run", "--mock", "--pod-python", "venv/bin/python"])
    assert config_from_args(args).pod_python == str(venv / "python")
    monkeypatch.setenv("PATH", str(venv))
    assert build_parser().parse_args(["mock-cloud", "--pod-python", "python"]).pod_python == \
        str(venv / "python")


def test_the_labs_curve_carries_a_warning_when_its_calibration_misses_its_point(tmp_path,
                                                                                 monkeypatch):
    from tests.commands.test_scaling import _one_point
    from tplab.lab import artifacts
    from tplab.lab.prediction import predict_lab
    from tplab.scaling import chart
    drawn: list = []
    monkeypatch.setattr(chart, "save_png", lambda *a, **kw: drawn.append(kw) or tmp_path)
    for single_ms, warned in ((0.81, False), (0.05, True)):
        pred = predict_lab(_one_point(single_per_token_ms=single_ms), gpu_type="cpu", mock=True)
        artifacts.write_curve(pred, tmp_path, mock=True)
        assert (drawn[-1]["warning"] or "").startswith("not a fit: ") is warned, single_ms
        assert drawn[-1]["banner"]  # MOCK


async def test_a_lab_says_the_ledger_has_damaged_lines_before_it_spends(tmp_path):
    """`tplab run` and the dashboard show the lab's warnings: a damaged ledger line is said
    there too, not only by `tplab budget`."""
    from tplab.lab import preflight
    from tplab.money.budget_config import default_ledger_path
    default_ledger_path(mock=True).write_text("not json at all\n")
    lab = Lab(LabConfig(mock=True, out_dir=tmp_path))
    seen = lab.subscribe()
    assert preflight.open_budget(lab.config, lab.money, lab.stream).lab_cap_usd == 3.0
    lab.stream.close_subs()
    warnings = [ev.msg async for ev in seen if isinstance(ev, WarningEvent)]
    assert len(warnings) == 1 and "has 1 damaged line(s) (line 1: not valid JSON" in warnings[0]

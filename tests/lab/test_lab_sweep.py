"""The d_model sweep in the lab: on by default on a real GPU pod (and in its cost estimate), off
in the mock lab unless asked for, the flag reaching the job's arguments and the on-demand line."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from tplab.cloud.runpod import self_end as pod_self_end
from tplab.lab import preflight
from tplab.lab.lab_config import DEFAULT_SWEEP_BUDGET_S, GPU_SWEEP_D_MODELS, LabConfig
from tplab.lab.options import add_lab_arguments, config_from_args
from tplab.lab.orchestrator import Lab
from tplab.lab.ssh_session import PodSession


def _parse(*argv: str) -> LabConfig:
    p = argparse.ArgumentParser()
    add_lab_arguments(p)
    return config_from_args(p.parse_args(list(argv)))


def _job_args(cfg: LabConfig) -> list[str]:
    """The job's arguments as the lab's SSH session launches them on the pod (whose
    self-termination travels with the job: the RunPod cloud's description of it)."""
    lab = Lab(cfg, SimpleNamespace(name="runpod", self_end=pod_self_end.self_end))
    session = PodSession(lab.config, lab.pod, lab.report, lab.stream, lab._stop,
                         on_result=lambda r: None)
    return session.launch_spec().job_args


def test_a_gpu_pod_sweeps_by_default_and_pays_for_it_in_the_estimate():
    cfg = _parse()
    assert cfg.d_model_sweep() == GPU_SWEEP_D_MODELS
    args = _job_args(cfg)
    i = args.index("--sweep-d-model")
    assert args[i + 1] == GPU_SWEEP_D_MODELS
    assert args[args.index("--sweep-budget-s") + 1] == f"{DEFAULT_SWEEP_BUDGET_S:g}"
    without = _parse("--sweep-d-model", "none")
    assert without.d_model_sweep() == "" and "--sweep-d-model" not in _job_args(without)
    assert preflight.planned_seconds(cfg) == pytest.approx(
        preflight.planned_seconds(without) + DEFAULT_SWEEP_BUDGET_S)
    assert "d_model sweep" in preflight.ESTIMATE_FORMULA


def test_the_mock_lab_sweeps_only_when_asked_and_the_flag_travels():
    assert _parse("--mock").d_model_sweep() == ""
    assert "--sweep-d-model" not in _job_args(_parse("--mock"))
    cfg = _parse("--mock", "--sweep-d-model", "256,64", "--sweep-budget-s", "30")
    assert cfg.d_model_sweep() == "64,256"
    args = _job_args(cfg)
    assert args[args.index("--sweep-d-model") + 1] == "64,256"
    assert args[args.index("--sweep-budget-s") + 1] == "30"
    line = preflight.on_demand_command(cfg)
    assert "--sweep-d-model 64,256" in line and "--sweep-budget-s 30" in line
    assert "--sweep-d-model none" in preflight.on_demand_command(_parse("--sweep-d-model", "none"))


def test_a_bad_size_list_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        _parse("--sweep-d-model", "64,big")
    assert "integers separated by commas" in capsys.readouterr().err


def test_the_ui_state_keeps_the_sweep_points_as_they_arrive():
    from tplab.records.dmodel import SkippedSize
    from tplab.records.events import EventWriter
    from tplab.viewmodel.fold import LabState
    from tests.synthetic_lab import measured_point

    s, w = LabState(), EventWriter()
    big, small = measured_point(256, 6.5, 17.0), measured_point(64, 3.5, 10.6)
    s.apply(w.make("sweep_point", d_model=256, skipped=False, point=big))
    s.apply(w.make("sweep_point", d_model=64, skipped=False, point=small))
    s.apply(w.make("sweep_point", d_model=8192, skipped=True, reason="d_model 8192 needs ~40 GiB"))
    assert s.sweep_points == [small, big]  # in d_model order
    assert s.sweep_skipped == [SkippedSize(8192, "d_model 8192 needs ~40 GiB")]
    assert any("d_model sweep: 256" in line.text for line in s.log)

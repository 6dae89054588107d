"""The caps are resolved by one function, ``tplab.money.caps.resolve_caps``, and every face
says what it resolved: `tplab run` whatever ``--provider`` (the lab's pre-flight and ``auto``'s
pick), the dashboard's pre-start check and its Budget panel, `tplab check`, `tplab budget`."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

import pytest

from tplab.cloud.base import GoneProof, PodInfo, Quote
from tplab.lab.lab_config import LabConfig
from tplab.money.budget_config import BudgetError
from tplab.money.caps import ALERT_SHARE, resolve_caps

REPO = Path(__file__).resolve().parents[2]
#: the flags of the issue's bar: a lab cap above the default phase cap, with the phase cap raised
LAB, PHASE = 6.0, 10.0


def test_the_one_resolution_takes_the_file_then_the_flags(tmp_path):
    caps = resolve_caps(mock=True, lab_cap_usd=LAB, phase_cap_usd=PHASE, wall_cap_s=3600)
    assert (caps.lab_cap_usd, caps.phase_cap_usd, caps.preflight_buffer_usd) == (6.0, 10.0, 0.5)
    assert caps.needed_usd == 6.5 and caps.alert_usd(3.0) == pytest.approx(ALERT_SHARE * 3)
    assert caps.worst_case(5.0).fits and not caps.worst_case(6.5).fits  # x 1 h vs $6
    with pytest.raises(BudgetError, match=r"--lab-cap \$6.00 is above the phase cap \$5.00"):
        resolve_caps(mock=True, lab_cap_usd=LAB)
    conf = tmp_path / "budget.toml"
    conf.write_text("phase_cap_usd = 12.0\n")
    caps = resolve_caps(config_path=conf, lab_cap_usd=LAB)
    assert (caps.lab_cap_usd, caps.phase_cap_usd) == (6.0, 12.0)


def test_no_face_reads_the_budget_file_or_applies_a_flag_itself():
    """Only the one resolution reads budget.toml and lays the flags over it."""
    offenders = []
    for path in [*(REPO / "tplab").rglob("*.py"), *(REPO / "tui").rglob("*.py")]:
        rel = path.relative_to(REPO).as_posix()
        if rel in ("tplab/money/caps.py", "tplab/money/budget_config.py",
                   "tplab/money/budget.py"):
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"BudgetConfig\.load\(|\.with_overrides\(", text):
            offenders.append(rel)
    assert offenders == []


class _Cloud:
    """A provider that answers the check and the quote: spot at $2.75/h (x 2 h = $5.50, within
    a $6 lab cap, over the default $3)."""

    name = "runpod"
    label = "RunPod"

    def list_pods(self) -> list[PodInfo]:
        return []

    def quote(self, gpu_type, gpu_count, image=""):
        return Quote(gpu_type, gpu_count, 2.75, 3.5, True, True, spot_offered=True)

    def balance(self):
        return 100.0

    def verify_gone(self, pod_id):
        return GoneProof(pod_id, "now", {"pod": None}, False)


def test_run_with_provider_auto_uses_the_labs_own_caps(monkeypatch):
    """`tplab run --lab-cap 6 --phase-cap 10 --provider auto`: the pick takes both flags (it
    used to drop --phase-cap and refuse the lab), and picks an offer only when its worst case
    fits the lab cap the pre-flight will hold it to."""
    from tplab.lab import auto_pick
    from tplab.lab.auto_pick import Answer
    config = LabConfig(mock=True, provider="auto", lab_cap_usd=LAB, phase_cap_usd=PHASE)
    monkeypatch.setattr(auto_pick, "_ask",
                        lambda cfg, name: Answer(name, _Cloud().quote(cfg.gpu_type, cfg.gpus)))
    name, why = asyncio.run(auto_pick.pick(config))
    assert name in ("runpod", "vast") and "fits the lab cap $6.00" in why


def test_provider_auto_never_picks_an_offer_over_the_lab_cap():
    """The pick's rule is the lab cap: a $0.74 worst case does not "fit" a $0.05 lab cap."""
    from tplab.lab import auto_pick
    from tplab.lab.auto_pick import Answer
    from tplab.lab.lab_config import LabStop
    config = LabConfig(mock=True, provider="auto", lab_cap_usd=0.05, wall_cap_s=3600)
    cheap = Answer("vast", Quote("RTX 4090", 2, 0.74, 1.0, True, True, spot_offered=True))
    with pytest.raises(LabStop) as stop:
        auto_pick.decide(config, [cheap], config.caps())
    assert stop.value.status == "EDUCATIONAL_STUB"
    assert "worst case $0.74 over the lab cap $0.05" in stop.value.reason
    fits = Answer("runpod", Quote("RTX 4090", 2, 0.04, 1.0, True, True, spot_offered=True))
    assert auto_pick.decide(config, [cheap, fits], config.caps())[0] == "runpod"


def test_the_labs_preflight_holds_what_the_flags_say(tmp_path):
    from tplab.lab import preflight
    from tplab.lab.orchestrator import Lab
    lab = Lab(LabConfig(mock=True, lab_cap_usd=LAB, phase_cap_usd=PHASE, out_dir=tmp_path))
    caps = preflight.open_budget(lab.config, lab.money, lab.stream)
    assert (caps.lab_cap_usd, caps.phase_cap_usd) == (6.0, 10.0)
    assert lab.money.guard is not None and lab.money.guard.cap_usd == 10.0


def test_the_dashboards_pre_start_check_and_budget_panel_say_the_same_caps(monkeypatch):
    from tplab.faces.startcheck import refusal
    from tplab.viewmodel.ledger_view import read_ledger_budget
    from tui.app import build_parser
    from tui.lab_port import LazyConfig
    from tui.precheck import default_precheck
    config = LabConfig(mock=True, lab_cap_usd=LAB, phase_cap_usd=PHASE)
    assert refusal(config) is None
    budget = read_ledger_budget(True, LAB, PHASE)
    assert (budget.lab_cap_usd, budget.cap_usd, budget.needed_usd) == (6.0, 10.0, 6.5)
    asked: dict = {}
    monkeypatch.setattr("tplab.faces.cloud_check.gather_check", lambda **kw: asked.update(kw))
    args = build_parser().parse_args(["--mock", "--api-url", "http://127.0.0.1:9",
                                      "--lab-cap", "6", "--phase-cap", "10"])
    default_precheck(LazyConfig(args), True, args.api_url)()
    assert (asked["lab_cap_usd"], asked["phase_cap_usd"]) == (6.0, 10.0)


def test_check_and_budget_say_the_same_caps(capsys):
    from tplab.commands import budget
    from tplab.faces.cloud_check import gather_check
    report = gather_check(mock=True, provider=_Cloud(), lab_cap_usd=LAB, phase_cap_usd=PHASE)
    assert (report.lab_cap_usd, report.phase_cap_usd) == (6.0, 10.0)
    line = next(x for x in report.lines if x.name == "budget")
    assert line.ok and "within the lab cap $6.00 (phase cap $10.00)" in line.text
    parser = argparse.ArgumentParser()
    budget.add_arguments(parser)
    assert budget.main(parser.parse_args(["--mock", "--json", "--lab-cap", "6",
                                          "--phase-cap", "10"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["preflight"]["lab_cap_usd"], data["cap_usd"]) == (6.0, 10.0)

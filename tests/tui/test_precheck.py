"""The place for the cloud check's facts before Start: any report the injected callable returns
is shown in the idle Instance panel (its fields as rows), never a secret; the default asks
nothing."""

from __future__ import annotations

from dataclasses import dataclass

from tui.app import TplabApp
from tui.precheck import default_precheck, no_precheck, report_rows

from .helpers import wait_for


@dataclass
class _Quote:
    spot_usd_per_hr: float
    stock: str


@dataclass
class _Report:  # shaped like a CheckReport: what the check found, with a key it must not show
    key_works: bool
    key_source: str
    api_key: str
    balance_usd: float
    quote: _Quote
    spot_offered: bool
    fits_budget: bool


REPORT = _Report(True, "RUNPOD_API_KEY", "rpa_SECRET", 12.3, _Quote(0.69, "High"), True, False)


def test_report_rows_show_the_facts_and_never_a_key():
    rows = dict(report_rows(REPORT))
    assert rows["key works"] == "✓ yes" and rows["key source"] == "RUNPOD_API_KEY"
    assert rows["balance"] == "$12.30" and rows["quote spot"] == "$0.690/h"
    assert rows["quote stock"] == "High" and rows["fits budget"] == "✗ no"
    assert "rpa_SECRET" not in str(rows)
    assert report_rows(None) == []
    assert default_precheck(object(), mock=True, api_url=None) is no_precheck


def test_the_dashboards_check_is_tplab_checks_against_a_running_mock_cloud(mock_cloud,
                                                                          monkeypatch):
    """With --api-url the dashboard asks `tplab check`'s question of that cloud: key, balance,
    the quote, spot, the budget, and whether a lab can run, one row each."""
    import argparse

    from tplab.lab.options import add_lab_arguments
    from tui.lab_port import LazyConfig
    monkeypatch.setenv("RUNPOD_API_KEY", mock_cloud.api_key)
    p = argparse.ArgumentParser()
    add_lab_arguments(p)
    args = p.parse_args(["--mock", "--api-url", mock_cloud.api_url])
    check = default_precheck(LazyConfig(args), mock=True, api_url=mock_cloud.api_url)
    rows = dict(report_rows(check()))
    assert rows["key"].startswith("✓") and rows["can run"] == "✓ yes"
    assert "$" in rows["balance"] and mock_cloud.api_key not in str(rows)


async def test_the_idle_instance_panel_shows_the_check():
    calls = []

    def check():
        calls.append(1)
        return REPORT

    app = TplabApp(None, precheck=check, plan={"gpu_type": "NVIDIA GeForce RTX 4090"})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.instance_panel.check_rows, what="the check")
        app.redraw(force=True)
        await pilot.pause()
        text = app.instance_panel._shown.plain
        assert "NVIDIA GeForce RTX 4090 × 2 · spot" in text and "balance" in text
        assert "$12.30" in text and "rpa_SECRET" not in text
        assert calls == [1]


async def test_a_failing_check_says_so_in_one_line():
    def check():
        raise RuntimeError("the provider did not answer\n(timeout)")

    app = TplabApp(None, precheck=check)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.instance_panel.check_status.startswith("check failed"),
                       what="the failure")
        assert app.instance_panel.check_status == ("check failed: the provider did not answer "
                                                   "(timeout)")


async def test_start_after_a_check_that_says_the_lab_cannot_run_is_refused_and_makes_nothing():
    """`s` after the check said "can run ✗ no": one sentence naming why, the lab is never built
    (no lab folder, no FAILED manifest), and the check is asked again for the next Start."""
    from tplab.faces.cloud_check import CheckReport
    report = CheckReport(mock=False, api_url=None, gpu_type="NVIDIA GeForce RTX 4090", gpus=2,
                         spot=True)
    report.add("key", True, "RunPod accepts the API key (from RUNPOD_API_KEY)")
    report.add("spot", False, "spot not available: no spot offer")
    checks: list[int] = []

    def check():
        checks.append(1)
        return report

    built: list[int] = []

    def factory():
        built.append(1)
        raise AssertionError("the lab must not be built")

    app = TplabApp(factory, precheck=check)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runner.check_report is not None, what="the check")
        await pilot.press("s")
        await wait_for(pilot, lambda: app.runner.notice is not None, what="the refusal")
        assert app.runner.notice == (
            "not started: The cloud check says a lab cannot run now (spot not available: no "
            "spot offer); nothing was created. The check runs again: press s once it says a "
            "lab can run.")
        assert built == [] and not app.runner.lab_active
        await wait_for(pilot, lambda: len(checks) == 2, what="the check asked again")
    from tplab.home.paths import tplab_home
    labs = [tplab_home(m) / "labs" for m in (False, True)]
    assert built == [] and not any(d.exists() and any(d.iterdir()) for d in labs)

"""`tplab check`: every line answered, nothing created, non-zero when a lab could not run; and
the https rule for --api-url.

One test runs `python -m tplab check` as a process, as a user does; the others run the same
command line in this process (``tplab.commands.main``, its stdout, stderr and exit status), so
that each does not pay a Python start and the cloud SDK's import (~0.5 s) for the same lines."""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tests.mock.helpers import GPU
from tests.fresh_imports import packages_loaded_by

REPO = Path(__file__).resolve().parents[2]


def _env(key: str | None, vast_key: str | None) -> dict[str, str]:
    """This environment without any cloud's variables, with the keys given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "VAST_"))}
    if key:
        env["RUNPOD_API_KEY"] = key
    if vast_key:
        env["VAST_API_KEY"] = vast_key
    return env


def _check_process(*args, key=None, timeout=120, vast_key=None):
    """`python -m tplab check args...` as a process."""
    env = {**_env(key, vast_key), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "tplab", "check", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def _check(*args, key=None, vast_key=None, home=None) -> subprocess.CompletedProcess[str]:
    """`tplab check args...` through its command line's ``main``, in this process, with
    ``_env``'s environment (HOME: ``home`` if given), which is restored afterwards."""
    from tplab.commands.main import main
    saved, env = dict(os.environ), _env(key, vast_key)
    if home:
        env["HOME"] = str(home)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(env)
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["check", *args])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["tplab", "check", *args], code, out.getvalue(),
                                       err.getvalue())


def _creates(calls):
    return {k: v for k, v in calls.items()
            if k in ("POST /v2/pods", "graphql podRentInterruptable", "DELETE /v2/pods/{id}")}


@pytest.mark.slow  # tplab check as a process
def test_check_mock_answers_every_line_and_creates_nothing(cloud):
    """What it pays for: `python -m tplab check` as a process, as a user runs it (a Python start
    and the cloud SDK's import)."""
    before = cloud.calls()
    proc = _check_process("--mock", "--api-url", cloud.api_url, key=cloud.api_key)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for line in ("[ok  ] key       the mock RunPod cloud accepts the API key (from RUNPOD_API_KEY)",
                 "[ok  ] on-demand 2x NVIDIA GeForce RTX 4090 on-demand $1.380/h",
                 "stock HIGH", "[ok  ] spot      spot offered now: minimum bid $0.700/h",
                 "[ok  ] balance   account balance $", "[ok  ] budget    spot worst case $1.40",
                 "[ok  ] image     runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04",
                 "[ok  ] hosts     the create sends allowedCudaVersions 12.4, 12.8, leaving out "
                 "hosts with CUDA 12.2",
                 "      cannot run hosts with CUDA 12.2: its driver runs CUDA 12.2 at most",
                 "A lab can run now."):
        assert line in out, out
    assert _creates(cloud.calls()) == _creates(before)
    assert not [p for p in cloud.pods() if p["name"].startswith("tplab-")]


def test_check_says_the_ledger_has_damaged_lines(cloud):
    """Not only `tplab budget`: a damaged ledger line is left out of every figure check shows."""
    from tplab.money.budget_config import default_ledger_path
    ledger = default_ledger_path(mock=True)
    ledger.write_text('{"kind": "actual", "label": "lab02", "amount_usd": 0.4\n')  # torn
    proc = _check("--mock", "--api-url", cloud.api_url, key=cloud.api_key)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the lab can still run
    assert (f"[note] ledger    The ledger {ledger} has 1 damaged line(s) (line 1: not valid "
            "JSON") in proc.stdout
    assert "left out of the budget's figures" in proc.stdout and "`tplab budget`" in proc.stdout


def test_check_with_a_bad_key_says_so_and_fails(cloud):
    proc = _check("--mock", "--api-url", cloud.api_url, key="rpa_NOT_THE_KEY_0123456789")
    assert proc.returncode == 1
    assert "[FAIL] key" in proc.stdout and "HTTP 401" in proc.stdout
    assert "rpa_NOT_THE_KEY" not in proc.stdout + proc.stderr
    assert "could not run" in proc.stderr


def test_check_says_when_spot_is_gone_and_that_on_demand_could_run(cloud, monkeypatch):
    from tplab.faces.cloud_check import gather_check
    monkeypatch.setenv("RUNPOD_API_KEY", cloud.api_key)
    cloud.set_faults(spot_removed=True)
    report = gather_check(mock=True, api_url=cloud.api_url)
    spot = next(line for line in report.lines if line.name == "spot")
    assert not report.can_run and spot.ok is False and report.spot_offered is False
    assert spot.text.startswith("spot not available: RunPod no longer offers spot pods")
    assert "`tplab run --on-demand` can" in spot.text
    report = gather_check(mock=True, api_url=cloud.api_url, spot=False)
    assert report.can_run and report.worst_case_usd == pytest.approx(2.76)
    assert "on-demand worst case $2.76" in report.lines[-1].text


@pytest.mark.parametrize("retired", ["404", "410", "html"])
def test_check_with_runpods_graphql_retired_still_works(cloud, monkeypatch, retired):
    """GraphQL gone (as planned for early 2027): spot not offered, the balance unknown, and an
    on-demand lab still checks out through REST v2 (introspection was refused all along)."""
    from tplab.faces.cloud_check import gather_check
    monkeypatch.setenv("RUNPOD_API_KEY", cloud.api_key)
    cloud.set_faults(graphql_retired=retired)
    report = gather_check(mock=True, api_url=cloud.api_url)
    spot = next(line for line in report.lines if line.name == "spot")
    assert report.key_ok and not report.can_run and report.spot_offered is False
    assert spot.text.startswith("spot not available: RunPod no longer offers spot pods: its "
                                "GraphQL API, the only way to rent them, is gone (HTTP "
                                + {"404": "404", "410": "410", "html": "200"}[retired])
    balance = next(line for line in report.lines if line.name == "balance")
    assert balance.ok is None and "the balance could not be read" in balance.text
    assert report.balance_usd is None
    ondemand = gather_check(mock=True, api_url=cloud.api_url, spot=False)
    assert ondemand.can_run and ondemand.on_demand_usd_per_hr == pytest.approx(1.38)
    assert cloud.calls().get("graphql (retired)", 0) >= 2


@pytest.mark.slow  # its own mock cloud, as a process
def test_check_on_its_own_mock_cloud_and_as_json():
    import json
    proc = _check("--mock", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["can_run"] and report["key_ok"] and report["availability"] == "HIGH"
    assert {line["name"] for line in report["lines"]} == {"key", "image", "hosts", "on-demand",
                                                          "spot", "balance", "budget"}
    assert report["image"] == "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
    assert [o["ok"] for o in report["offers"]] == [False, True, True]  # hosts at 12.2 left out


def test_check_report_is_importable_without_torch_or_the_sdk():
    assert packages_loaded_by(["tplab.faces.cloud_check"],
                              ["torch", "runpod", "requests", "aiohttp"], timeout_s=30) == []


async def test_real_key_goes_only_to_https(monkeypatch, tmp_path):
    from tplab.cloud.base import ProviderError
    from tplab.lab.lab_config import FAILED
    from tplab.lab.options import add_lab_arguments, api_url_problem, config_from_args
    from tplab.lab.orchestrator import Lab
    from tplab.lab.providers import real_provider
    assert api_url_problem(True, "http://127.0.0.1:1") is None
    assert api_url_problem(False, "https://api.example.invalid") is None
    parser = argparse.ArgumentParser()
    add_lab_arguments(parser)
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_REAL_KEY_0123456789")
    cfg = config_from_args(parser.parse_args(["--api-url", "http://example.invalid",
                                              "--out", str(tmp_path / "out")]))
    outcome = await Lab(cfg).run()
    assert outcome.status == FAILED and outcome.exit_code == 1 and outcome.pod_id is None
    assert outcome.reason.startswith("--api-url http://example.invalid is not https: without "
                                     "--mock the real API key would go to it in clear")
    monkeypatch.setenv("RUNPOD_API_BASE_URL", "http://evil.invalid")
    with pytest.raises(ProviderError, match="not https"):
        real_provider()
    proc = _check("--api-url", "http://example.invalid", key="rpa_REAL_KEY_0123456789")
    assert proc.returncode == 1 and "not https" in proc.stdout


def test_check_without_any_key_says_where_to_put_one(tmp_path):
    proc = _check("--gpu-type", GPU, home=tmp_path)
    assert proc.returncode == 1
    assert "[FAIL] key       No RunPod API key found" in proc.stdout


TORCH_24_VAST = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"


def _vast_check(vast, *args):
    return _check("--mock", "--provider", "vast", "--api-url", vast.api_url, *args,
                  vast_key=vast.api_key)


def _vast_creates(vast) -> int:
    return vast.calls().get("PUT /api/v0/asks/{id}", 0) + len(vast.pods())


def test_check_names_the_image_and_says_per_offer_why_it_runs_or_not(vast):
    before = _vast_creates(vast)
    proc = _vast_check(vast, "--gpu-type", "L40S")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert (f"[ok  ] image     {TORCH_24_VAST} (torch 2.4.0, CUDA 12.4, kernels sm_50..sm_90): "
            "the default for Ada GPUs (sm_89) on Vast.ai; the runtime flavour") in out
    assert ("[ok  ] hosts     1 of the 2 cheapest offers can run the image; the lab takes offer "
            "9001010") in out
    assert ("      cannot run offer 9001029 $0.704/h (minimum bid + storage), driver CUDA 12.2: "
            f"its driver runs CUDA 12.2 at most, below the 12.4 of {TORCH_24_VAST}") in out
    assert ("      runs       offer 9001010 $0.764/h (minimum bid + storage), driver CUDA 12.8: "
            "its driver runs CUDA 12.8 (the image needs 12.4)") in out
    # the offer's three prices, each named: its minimum bid (Vast's own figure), with the disk's
    # storage (the line above), and tplab's bid, a little above both
    spot = next(line for line in out.splitlines() if "] spot " in line)
    assert re.search(r"spot offered now for 2x L40S: tplab's bid, \$0\.779/h: offer 9001010's "
                     r"minimum bid \$0\.7\d\d/h \+ storage \$0\.0\d\d/h \(20 GB\), \+ 2% so a bid "
                     r"at the minimum is not outbid at once", spot), spot
    assert "A lab can run now." in out and _vast_creates(vast) == before


def test_check_fails_when_no_offer_can_run_the_image_and_creates_nothing(vast):
    before = _vast_creates(vast)
    proc = _vast_check(vast, "--gpu-type", "RTX 3090")
    assert proc.returncode == 1
    assert ("[FAIL] hosts     Vast.ai's one interruptible offer for 2x RTX 3090 cannot run "
            f"{TORCH_24_VAST}: its host's driver runs CUDA 12.2 at most") in proc.stdout
    assert "      cannot run offer 9001022" in proc.stdout
    assert "a lab would be refused before anything is rented" in proc.stdout
    # --image: the image named is the one judged, here on a Blackwell GPU
    proc = _vast_check(vast, "--gpu-type", "RTX 5090", "--image", TORCH_24_VAST)
    assert proc.returncode == 1
    assert (f"[FAIL] image     the image {TORCH_24_VAST} (torch 2.4.0, CUDA 12.4) has no kernels "
            "for RTX 5090 (Blackwell, sm_120)") in proc.stdout
    assert f"({TORCH_24_VAST}: named with --image)" in proc.stdout
    assert "[FAIL] hosts     no offer can run the image (see the image line)" in proc.stdout
    proc = _vast_check(vast, "--gpu-type", "RTX 5090")
    assert proc.returncode == 0 and ("[ok  ] image     pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
                                     in proc.stdout)
    assert _vast_creates(vast) == before


def test_the_dashboards_rows_put_an_image_problem_first_in_a_few_words(vast, monkeypatch):
    from tplab.faces.cloud_check import gather_check
    monkeypatch.setenv("VAST_API_KEY", vast.api_key)
    rows = gather_check(mock=True, api_url=vast.api_url, name="vast", gpu_type="RTX 3090").rows()
    names = [name for name, _ in rows]
    assert names[:2] == ["key", "hosts"]  # before the lines the small panel may cut
    assert names.index("can run") < names.index("image")  # the image itself is fine
    assert dict(rows)["hosts"] == "✗ drivers run CUDA 12.2 at most; the image needs 12.4"
    assert rows[-1] == ("offer", "✗ offer 9001022 $0.204/h, driver CUDA 12.2")
    assert dict(rows)["can run"].startswith("✗ no")
    rows = gather_check(mock=True, api_url=vast.api_url, name="vast", gpu_type="L40S").rows()
    names = [name for name, _ in rows]
    assert names.index("can run") < names.index("image") < names.index("hosts")
    assert dict(rows)["image"] == f"✓ {TORCH_24_VAST}"
    assert [v for n, v in rows if n == "offer"] == ["✗ offer 9001029 $0.704/h, driver CUDA 12.2",
                                                    "✓ offer 9001010 $0.764/h, driver CUDA 12.8"]


@pytest.mark.parametrize("which", ["vast", "runpod"])
def test_a_cloud_that_does_not_answer_never_has_the_key_accepted(which):
    """`VAST_API_KEY=abc tplab check` with nothing answering said "[ok] key Vast.ai accepts the
    API key" and then "could not be reached": any error that was not the key's counted as the
    key being fine. The key is said accepted only after a read only an accepted key gets (the
    account's pods); with no answer it is "not checked", and why, on both clouds."""
    from tplab.cloud.registry import provider_for
    from tplab.faces.cloud_check import gather_check
    prov = provider_for(which, "abc", "https://127.0.0.1:9", retry_delays=(), timeout_s=2.0)
    report = gather_check(provider=prov, name=which, gpu_type=GPU)
    key = next(line for line in report.lines if line.name == "key")
    assert key.ok is None and key.text.startswith("not checked:")
    assert "could not be reached" in key.text and "is unknown" in key.text
    assert not report.key_ok and not report.key_checked and not report.can_run
    assert not any("accepts the API key" in line.text for line in report.lines)
    assert dict(report.rows())["key"] == "· not checked: no answer"

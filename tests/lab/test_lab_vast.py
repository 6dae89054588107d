"""Labs on the mock Vast cloud, end to end: the real Vast provider, the real mock (held to
Vast's OpenAPI document), real SSH instances running the real job, the real guard, watchdog and
ledger. And ``--provider auto`` across both mock clouds."""

from __future__ import annotations

import asyncio
import calendar
import json
import re
import time

import pytest

from tests.e2e_fixtures import assert_key_unwritten, assert_ledgers_settled, tiny_lab_config
from tplab.money.budget import BudgetGuard, default_ledger_path
from tplab.lab.lab_config import COMPLETE, FAILED, INTERRUPTED, STUB, LabOutcome
from tplab.lab.orchestrator import Lab
from tplab.records.events import InstanceEvent, PromptDoneEvent
from tplab.mock.handle import start_mock_cloud

pytestmark = pytest.mark.slow

BLACKWELL_VAST = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"


@pytest.fixture
def vast_cloud(tmp_path, monkeypatch):
    """A running mock Vast cloud whose key the lab finds in VAST_API_KEY (as a real one's)."""
    cloud = start_mock_cloud(provider="vast", boot_delay_s=0.3, state_dir=tmp_path / "vast")
    monkeypatch.setenv("VAST_API_KEY", cloud.api_key)
    yield cloud
    cloud.stop()


#: Vast's limits at a tenth, the client told so (``SCALE_VAR``), for the labs that are not about
#: pacing: every call is still paced, and the mock still answers 429 to one that comes too soon,
#: at a tenth of the wait. The scenario lab keeps Vast's own limits (and its 0 answers of 429),
#: the production lab twice them.
QUICK_LIMITS = 0.1


@pytest.fixture
def vast_quick(vast_cloud, monkeypatch):
    """``vast_cloud`` with Vast's limits at ``QUICK_LIMITS``, and the lab's client told so."""
    from tplab.cloud.vast.pacing import SCALE_VAR
    vast_cloud.set_faults(rate_scale=QUICK_LIMITS)
    monkeypatch.setenv(SCALE_VAR, str(QUICK_LIMITS))
    return vast_cloud


def _settled() -> list[str]:
    assert BudgetGuard(default_ledger_path(mock=True), 100.0).held == 0.0, "a hold was left open"
    lines = default_ledger_path(mock=True).read_text().splitlines()
    return [json.loads(line)["kind"] for line in lines if line.strip()]


def _alive(cloud) -> list[dict]:
    return [p for p in cloud.pods() if not p["destroyed"] or p["alivePids"]]


def test_a_vast_lab_completes_and_names_vast(lab_assets, tmp_path, vast_cloud):
    """Vast's rules on, as the service keeps them (the mock's default): its input limits, its
    rate limits, a market of 209 offers answered in the server's own order; and the cheapest
    offer taken between search and create (410 no_such_ask), the next one's quote stale (400
    invalid_price). What it pays for: three creates at Vast's own create interval (4.5 s, the
    service's limit, kept so that none meets a 429), then a whole lab at Vast's intervals."""
    vast_cloud.set_faults(offer_taken=[410, 400])
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_cloud.api_url)
    started = time.monotonic()
    outcome = asyncio.run(Lab(cfg).run())
    print(f"the Vast scenario lab took {time.monotonic() - started:.1f} s")
    assert outcome.status == COMPLETE, outcome.reason
    assert outcome.verified_gone and outcome.exit_code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["vendor"] == "mock Vast.ai (local)" and manifest["provider"] == "vast"
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["outputs_match"] is True
    proof = json.loads((tmp_path / "out" / "proof-terminated.json").read_text())
    assert proof["provider"] == "vast" and proof["answer"] == {"pod": None}
    assert _settled()[-1] == "actual" and _alive(vast_cloud) == []
    # -- fault suite: "vast offer: taken, then its quote stale" (COMPLETE, no pod, no hold:
    # above), its ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_cloud.api_key, tmp_path, [])
    state = vast_cloud.state()
    calls = state["calls"]
    assert calls.get("POST /api/v0/instances/{id}/ssh") == 1      # the key on its instance
    assert not calls.get("POST /api/v0/ssh")                       # never on the account
    assert state["schemaViolations"] == []
    guard = (tmp_path / "out" / "guard.log").read_text()
    assert "the client showed up after" in guard
    assert vast_cloud.api_key not in (tmp_path / "out" / "stream.jsonl").read_text()
    # the create fit Vast's limits (the guard in variables of <= 256 characters) and the guard
    # started with the instance's container, from its onstart
    [made] = vast_cloud.pods()
    first = re.match(r"(\S+Z) boot-guard\[\d+\]: started:", guard.splitlines()[0])
    assert first, guard.splitlines()[0]
    began = calendar.timegm(time.strptime(first.group(1), "%Y-%m-%dT%H:%M:%SZ"))
    assert made["containerStartedAt"] - 1 <= began <= made["containerStartedAt"] + 5
    # Vast's rate limits on, at the service's own intervals: tplab paced every call
    assert sum(state["rateLimited"].values()) == 0, state["rateLimited"]
    # 209 offers, the cheapest 2x RTX 4090 that can run the image far down the server's own
    # order and behind 135 cheaper hosts whose drivers cannot: the lab bid on it first
    stream = (tmp_path / "out" / "stream.jsonl").read_text()
    assert "would not rent offer 9001002 as quoted (HTTP 410 no_such_ask" in stream
    # -- taken, then its quote stale: each try in the log, nothing made, the third offer (one
    # at the same price) rented, at the bid the lab authorized
    assert "(HTTP 400 invalid_price" in stream and "try 3 of 3" in stream
    assert calls.get("PUT /api/v0/asks/{id}") == 3 and made["is_bid"]
    assert made["askId"] != 9001002 and made["price"] <= 0.3702


def test_a_stopped_intent_while_the_instance_comes_up_fails_the_lab_at_once(
        lab_assets, tmp_path, vast_quick):
    """Vast turns the instance's intended and next state to stopped while it loads (its own
    agent plugin: it failed): the lab fails at once with the reason, not after the boot
    timeout, and nothing is left billing."""
    vast_quick.set_faults(stopped_while_loading=True)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_quick.api_url,
                          boot_timeout_s=600.0)
    lab = Lab(cfg)
    events = lab.subscribe()
    created: list[float] = []

    async def run() -> LabOutcome:
        async def watch() -> None:
            async for ev in events:
                if isinstance(ev, InstanceEvent) and ev.pod_id and not created:
                    created.append(time.monotonic())
        watcher = asyncio.create_task(watch())
        try:
            return await lab.run()
        finally:
            await asyncio.wait_for(watcher, 30)

    outcome = asyncio.run(run())
    failed_after = time.monotonic() - created[0]
    print(f"a stopped intent during boot failed the lab {failed_after:.1f} s after the create")
    assert outcome.status == FAILED and outcome.exit_code == 1 and outcome.verified_gone
    assert "went ERROR while booting" in outcome.reason
    assert "set it to stop while it was coming up" in outcome.reason, outcome.reason
    assert failed_after < 30.0
    assert _alive(vast_quick) == [] and _settled()[-1] == "actual"
    # -- fault suite: "vast state: stopped intent while it comes up" (FAILED within 30 s, no
    # pod, no hold: above), its ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_quick.api_key, tmp_path, [])


def test_outbid_mid_run_is_a_spot_interruption_with_the_tokens_kept(lab_assets, tmp_path,
                                                                    vast_quick):
    """On Vast's limits at a tenth (``vast_quick``). What it pays for: a lab to its first
    measured prompt, then its teardown."""
    # outbid the moment the job has measured its first prompt (the baseline's first prompt_done
    # reached the client): the job (all 16 shipped prompts x 100 tokens, three passes) is then
    # decoding and far from done, on a quiet machine or a loaded one. (It was a timer, outbid
    # 30 s after the instance ran: 30 s of two ranks decoding, and a guess at the machine's speed.)
    # reported as dstack saw it: cur_state = intended_status = next_state = stopped
    vast_quick.set_faults(outbid_resume_s=-1, outbid_as_stopped=True)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_quick.api_url,
                          num_prompts=16, new_tokens=100, status_poll_s=0.5)
    lab = Lab(cfg)
    events = lab.subscribe()
    outbid_after: list[str] = []

    async def outbid_on_the_first_prompt() -> None:
        async for ev in events:
            if isinstance(ev, PromptDoneEvent) and ev.src == "job" and not outbid_after:
                outbid_after.append(f"prompt {ev.prompt} ({ev.mode})")
                await asyncio.to_thread(vast_quick.outbid, lab.pod_id)

    async def run() -> LabOutcome:
        watcher = asyncio.create_task(outbid_on_the_first_prompt())
        try:
            return await lab.run()
        finally:
            await asyncio.wait_for(watcher, 30)  # the events end with the lab

    outcome = asyncio.run(run())
    assert outbid_after == ["prompt 0 (single)"], outbid_after
    assert outcome.status == INTERRUPTED and "spot interruption" in outcome.reason
    assert "outbid" in outcome.reason or "paused" in outcome.reason
    assert outcome.verified_gone and _alive(vast_quick) == [] and outcome.exit_code == 5
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == INTERRUPTED and "spot interruption" in manifest["reason"]
    partial = manifest.get("partial") or {}
    assert manifest["vendor"] == "mock Vast.ai (local)"
    assert partial and partial["single_tokens"] > 0, \
        "the figures measured before the interruption were dropped"
    assert _settled()[-1] == "actual"
    # -- fault suite: "vast outbid mid-run" and "vast state: stopped intent mid-run"
    # (INTERRUPTED, exit 5, tokens kept, no pod, no hold: above), their ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_quick.api_key, tmp_path, [])


def test_a_failed_bid_leaves_nothing_and_says_so(lab_assets, tmp_path, vast_quick):
    vast_quick.set_faults(failed_bid_n=1)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_quick.api_url)
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == STUB and "left instance" in outcome.reason, outcome.reason
    assert "nothing" not in outcome.reason and outcome.verified_gone  # proven, then said
    assert _alive(vast_quick) == [] and len(vast_quick.pods()) == 1   # made, then destroyed
    assert _settled()[-1] == "actual"   # its storage seconds, billed
    # -- fault suite: "vast bid fails and leaves a stopped instance" (a stub, nothing left,
    # nothing held: above), its ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_quick.api_key, tmp_path, [])


def test_a_bid_rented_on_demand_is_destroyed_at_once_and_said_in_one_sentence(
        lab_assets, tmp_path, vast_quick):
    # Vast rents a create without a price on demand, and its answer does not say so; here the
    # mock does that to tplab's bid (bid_ignored_n), as a client dropping the price would
    vast_quick.set_faults(bid_ignored_n=1)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_quick.api_url)
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == FAILED and outcome.exit_code == 1 and outcome.verified_gone
    assert "rented it on demand at $0.800/h" in outcome.reason, outcome.reason
    assert "destroyed at once and verified gone" in outcome.reason
    assert "\n" not in outcome.reason and outcome.reason.count(". ") == 0
    [made] = vast_quick.pods()
    assert made["is_bid"] is False and made["destroyed"] and made["alivePids"] == []
    assert made["computeSeconds"] < 5             # destroyed within seconds of its start
    calls = vast_quick.calls()
    assert not calls.get("POST /api/v0/instances/{id}/ssh")   # no key given to it
    proof = json.loads((tmp_path / "out" / "proof-terminated.json").read_text())
    assert proof["answer"] == {"pod": None}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == FAILED and manifest["verified_gone"] is True
    assert _settled()[-1] == "actual"
    # -- fault suite: "vast on-demand instead of the bid" (FAILED, no pod, no hold: above), its
    # ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_quick.api_key, tmp_path, [])


def test_a_lab_on_vast_as_it_answers_in_production_completes(lab_assets, tmp_path, vast_cloud):
    """Vast as other public clients report it answering: the v0 list deprecated (410), someone
    else's 30 instances ahead of the lab's (its own on the v1 list's second page), Vast's rate
    limits doubled (429 without Retry-After: the client, paced for the service's own, learns),
    a host whose direct SSH port never answers (the proxy
    does) and whose public_ipaddr carries whitespace, and a destroyed instance still shown as a
    record that says destroyed. The lab completes, lists only through v1, to the last page.
    The GPU is a Blackwell one (RTX 5090), with the image the lab picks for it by default: what
    tests/lab/test_lab_images.py::test_a_blackwell_lab_gets_the_blackwell_image_by_default
    asserted on a lab of its own (marked below). What it pays for: every call paced at twice
    Vast's intervals (a show every 4 s, a list page every 2 s), the 429s learned from, and the
    direct SSH port's bound (1 s) before the proxy."""
    from tests.mock.vast_helpers import create, destroy
    vast_cloud.set_faults(rate_scale=0.0)      # the 30 others are made faster than Vast allows
    others = [create(vast_cloud, f"someone-else-{i}", bid=False, target_state="stopped")[1]
              ["new_contract"] for i in range(30)]
    vast_cloud.set_faults(rate_scale=2.0, direct_port_blocked=True, padded_ipaddr=True,
                          destroyed_records=True)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_cloud.api_url,
                          direct_ssh_s=1.0, gpu_type="RTX 5090")
    started = time.monotonic()
    outcome = asyncio.run(Lab(cfg).run())
    took = time.monotonic() - started
    state = vast_cloud.state()
    vast_cloud.set_faults(rate_scale=0.0)
    for inst in others:
        destroy(vast_cloud, inst)
    assert outcome.status == COMPLETE and outcome.verified_gone, outcome.reason
    calls, limited = state["calls"], state["rateLimited"]
    print(f"limits doubled: {sum(limited.values())} answers of 429 ({limited}), lab {took:.1f} s")
    assert "GET /api/v0/instances (deprecated list)" not in calls
    later = calls.get("GET /api/v1/instances (after_token)", 0)
    served = calls["GET /api/v1/instances"] - limited.get("GET /api/v1/instances", 0)
    assert later >= 1 and served == 2 * later    # every list read both pages
    assert sum(limited.values()) > 0, "the doubled limits never answered 429"
    stream = (tmp_path / "out" / "stream.jsonl").read_text()
    # -- direct SSH never answered: the lab said so and connected through the proxy
    events = [json.loads(line) for line in stream.splitlines()]
    fell = [e for e in events if "connecting through Vast.ai's SSH proxy" in str(e.get("msg"))]
    assert len(fell) == 1 and any(e.get("via") == "proxy" and e.get("state") == "connected"
                                  for e in events if e.get("type") == "ssh")
    first_try = next(e["ts"] for e in events if e.get("type") == "ssh")
    print(f"proxy fallback: connected {fell[0]['ts'] - first_try:.1f} s after the first try")
    # -- destroyed, and answered as a record that says so: verified gone
    proof = json.loads((tmp_path / "out" / "proof-terminated.json").read_text())
    assert proof["answer"]["pod"]["actual_status"] == "destroyed"
    assert proof["answer"]["pod"]["status"] == "TERMINATED" and not proof["listed"]
    assert _alive(vast_cloud) == [] and _settled()[-1] == "actual"
    # -- fault suite: "vast list: v0 deprecated, 30 other instances ahead", "vast 429: the
    # limits doubled", "vast ssh: direct port blocked" and "vast state: a destroyed record"
    # (COMPLETE, no pod, no hold: above), their ledger and canary rows
    assert_ledgers_settled(default_ledger_path(mock=True).parents[1])
    assert_key_unwritten(vast_cloud.api_key, tmp_path, [])
    # -- from test_lab_images.py::test_a_blackwell_lab_gets_the_blackwell_image_by_default
    # (COMPLETE and verified gone: above)
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    image = manifest["image"]
    assert image["name"] == BLACKWELL_VAST and image["named"] is False
    assert image["torch"] == "2.8.0" and "sm_120" in image["arch_list"]
    assert image["why"].startswith("the default for Blackwell GPUs (sm_120) on Vast.ai")
    assert json.loads((out / "instance.json").read_text())["image"] == BLACKWELL_VAST
    stream = (out / "stream.jsonl").read_text()
    assert f"image {BLACKWELL_VAST} (torch 2.8.0, CUDA 12.8" in stream


def test_auto_picks_vast_when_runpod_offers_no_spot(lab_assets, tmp_path, monkeypatch):
    """Vast's limits at a tenth on the mock the lab starts, the client told so (as
    ``vast_quick``), with `--lab-cap 6 --phase-cap 10` (a lab cap above the default phase cap:
    ``auto`` takes both flags, as the pre-flight does), and Vast's old-driver hosts answering
    without their CUDA (``cuda_unknown``: cheaper than any host known to run the image). What it
    pays for: both mock clouds, started by the lab, and a whole lab on Vast."""
    from tplab.cloud.vast.pacing import SCALE_VAR
    monkeypatch.setenv(SCALE_VAR, str(QUICK_LIMITS))
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="auto", lab_cap_usd=6.0,
                          phase_cap_usd=10.0, mock_options={
                              "runpod": {"faults": {"spot_removed": True}, "boot_delay_s": 0.3},
                              "vast": {"faults": {"rate_scale": QUICK_LIMITS,
                                                  "cuda_unknown": True},
                                       "boot_delay_s": 0.3}})
    lab = Lab(cfg)
    outcome = asyncio.run(lab.run())
    assert outcome.status == COMPLETE, outcome.reason
    # -- the caps: the pick and the pre-flight held the lab to $6 of a $10 phase cap
    guard = BudgetGuard(default_ledger_path(mock=True), 10.0)
    assert [e.amount_usd for e in guard.summary().entries if e.kind == "authorize"] == [6.0]
    # -- fault suite: "vast offers: the cheap hosts do not say their CUDA": the lab bid on the
    # known fit first (9001002, the cheapest host known to run the image), not on a cheaper
    # host that does not say
    from tplab.cloud.vast.provider import BID_MARGIN
    from tplab.mock.vast_mock.catalog import find_machine, storage_per_hr
    known = find_machine(9001002)
    assert known is not None
    bid = round((known.min_bid + storage_per_hr(20)) * BID_MARGIN, 6)
    stream = (tmp_path / "out" / "stream.jsonl").read_text()
    assert "may run the image: CUDA unknown: taken after every known fit" in stream
    assert f"spot quote ${bid:.3f}/h" in stream, bid
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["actual_cost_usd"] and manifest["cost_is"] == "billed"
    stream = (tmp_path / "out" / "stream.jsonl").read_text()
    assert "--provider auto picked Vast.ai" in stream and "RunPod: no spot at all" in stream
    picked = [e for e in map(json.loads, stream.splitlines())
              if e["type"] == "log" and e["msg"].startswith("--provider auto picked")]
    assert [e.get("headline") for e in picked] == [True]  # every face says it (headless too)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["provider"] == "vast"


def test_auto_with_no_spot_anywhere_is_a_stub_naming_both(lab_assets, tmp_path):
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="auto", mock_options={
        "runpod": {"faults": {"no_spot_capacity": True}},
        "vast": {"faults": {"no_bid_offers": True}}})
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == STUB and outcome.pod_id is None and outcome.exit_code == 3
    assert "RunPod: no spot capacity" in outcome.reason
    assert "Vast.ai: no spot capacity" in outcome.reason
    assert "on-demand: RunPod $" in outcome.reason and "Vast.ai $" in outcome.reason
    assert "nothing was created" in outcome.reason


def test_an_instance_that_never_gets_a_public_ssh_port_is_one_sentence(lab_assets, tmp_path,
                                                                       vast_quick):
    """On Vast's limits at a tenth (``vast_quick``). What it pays for: the boot bound (4 s) it
    shows being waited to."""
    vast_quick.set_faults(no_ssh_port=True)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast_quick.api_url,
                          boot_timeout_s=4.0)
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == FAILED and outcome.verified_gone
    assert "never got a public SSH port within 4 s" in outcome.reason
    assert _alive(vast_quick) == [] and _settled()[-1] in ("actual", "release")

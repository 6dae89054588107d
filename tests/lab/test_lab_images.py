"""The lab and its pod's image, on the mock clouds: a pod that could not run the job is refused
before anything is authorized or created, in one sentence; the image a lab uses (the default
for the cloud and GPU generation, or ``--image``) is in its instance record and manifest."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from tests.e2e_fixtures import tiny_lab_config
from tplab.lab.lab_config import COMPLETE, FAILED
from tplab.lab.options import add_lab_arguments, config_from_args
from tplab.lab.orchestrator import Lab
from tplab.mock.handle import start_mock_cloud, start_mock_vast
from tplab.money.budget import default_ledger_path

TORCH_24_VAST = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
BLACKWELL_VAST = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
BLACKWELL_RUNPOD = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2204"
CREATES = ("PUT /api/v0/asks/{id}", "POST /v2/pods", "graphql podRentInterruptable")


@pytest.fixture(scope="module")
def vast(tmp_path_factory):
    with start_mock_vast(boot_delay_s=0.3, state_dir=tmp_path_factory.mktemp("vast")) as c:
        yield c


def _creates(mock) -> tuple[int, int]:
    return sum(mock.calls().get(c, 0) for c in CREATES), len(mock.pods())


def _nothing_done(mock, before: tuple[int, int], out) -> None:
    """No create call, no instance, no hold or spend in the ledger; the record says FAILED."""
    assert _creates(mock) == before, mock.calls()
    ledger = default_ledger_path(mock=True)
    kinds = [json.loads(line)["kind"] for line in ledger.read_text().splitlines()
             if line.strip()] if ledger.exists() else []
    assert "authorize" not in kinds, kinds
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == FAILED and manifest["instance_id"] is None
    assert not (out / "instance.json").exists()


def _one_sentence(reason: str) -> None:
    assert reason.endswith("nothing was created") and "\n" not in reason
    assert ". " not in reason, reason


def test_vast_offers_with_an_old_driver_are_refused_before_create(lab_assets, tmp_path, vast,
                                                                  monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", vast.api_key)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast.api_url,
                          gpu_type="RTX 3090")
    before = _creates(vast)
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == FAILED and outcome.exit_code == 1 and outcome.pod_id is None
    assert outcome.reason.startswith(
        f"Vast.ai's one interruptible offer for 2x RTX 3090 cannot run {TORCH_24_VAST}: its "
        "host's driver runs CUDA 12.2 at most, below the image's 12.4;")
    _one_sentence(outcome.reason)
    _nothing_done(vast, before, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["image"]["name"] == TORCH_24_VAST and manifest["image"]["cuda"] == "12.4"


def test_a_blackwell_gpu_with_the_24_image_is_refused_before_any_cloud_call(
        lab_assets, tmp_path, vast, monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", vast.api_key)
    searches = vast.calls().get("POST /api/v0/bundles", 0)
    before = _creates(vast)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast.api_url,
                          gpu_type="RTX 5090", image=TORCH_24_VAST)
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == FAILED and outcome.exit_code == 1 and outcome.pod_id is None
    assert outcome.reason.startswith(f"the image {TORCH_24_VAST} (torch 2.4.0, CUDA 12.4) has no "
                                     "kernels for RTX 5090 (Blackwell, sm_120)")
    assert f"drop --image for the default {BLACKWELL_VAST}" in outcome.reason
    _one_sentence(outcome.reason)
    _nothing_done(vast, before, tmp_path / "out")
    assert vast.calls().get("POST /api/v0/bundles", 0) == searches  # no offer was even asked for


@pytest.mark.slow  # a whole mock lab
def test_a_blackwell_lab_gets_the_blackwell_image_by_default(lab_assets, tmp_path, vast,
                                                             monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", vast.api_key)
    cfg = tiny_lab_config(lab_assets, tmp_path, provider="vast", api_url=vast.api_url,
                          gpu_type="RTX 5090")
    outcome = asyncio.run(Lab(cfg).run())
    assert outcome.status == COMPLETE and outcome.verified_gone, outcome.reason
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    image = manifest["image"]
    assert image["name"] == BLACKWELL_VAST and image["named"] is False
    assert image["torch"] == "2.8.0" and "sm_120" in image["arch_list"]
    assert image["why"].startswith("the default for Blackwell GPUs (sm_120) on Vast.ai")
    assert json.loads((out / "instance.json").read_text())["image"] == BLACKWELL_VAST
    stream = (out / "stream.jsonl").read_text()
    assert f"image {BLACKWELL_VAST} (torch 2.8.0, CUDA 12.8" in stream


@pytest.mark.slow  # a whole mock lab
def test_image_flag_is_accepted_and_recorded_and_the_pod_lands_on_a_host_that_runs_it(
        lab_assets, tmp_path, monkeypatch):
    cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp_path / "runpod")
    try:
        monkeypatch.setenv("RUNPOD_API_KEY", cloud.api_key)
        parser = argparse.ArgumentParser()
        add_lab_arguments(parser)
        args = parser.parse_args(["--mock", "--api-url", cloud.api_url, "--image",
                                  BLACKWELL_RUNPOD, "--prompts", "2", "--new-tokens", "8",
                                  "--out", str(tmp_path / "out")])
        cfg = config_from_args(args)
        assert cfg.image == BLACKWELL_RUNPOD
        cfg.checkpoint, cfg.prompts = lab_assets
        cfg.sweep, cfg.warmup, cfg.mock_options = False, 1, {"boot_delay_s": 0.3}
        outcome = asyncio.run(Lab(cfg).run())
        assert outcome.status == COMPLETE and outcome.verified_gone, outcome.reason
        out = tmp_path / "out"
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["image"]["name"] == BLACKWELL_RUNPOD and manifest["image"]["named"]
        assert manifest["image"]["why"] == "named with --image"
        record = json.loads((out / "instance.json").read_text())
        assert record["image"] == BLACKWELL_RUNPOD
        pod = next(p for p in cloud.pods() if p["id"] == outcome.pod_id)
        # the RTX 4090's hosts run CUDA 12.2, 12.4 and 12.8: only 12.8 runs this image
        assert pod["allowedCudaVersions"] == ["12.8"] and pod["hostCuda"] == "12.8"
    finally:
        cloud.stop()

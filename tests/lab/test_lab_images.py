"""The lab and its pod's image, on the mock clouds: a pod that could not run the job is refused
before anything is authorized or created, in one sentence. The image a lab uses (the default
for the cloud and GPU generation, or ``--image``) is in its instance record and manifest: the
labs that complete show it (tests/lab/test_lab_vast.py::test_a_lab_on_vast_as_it_answers_in_production_completes,
a Blackwell GPU with its default image; tests/lab/test_lab_e2e.py::test_full_lab_completes_with_every_artifact,
--image on RunPod), each once a lab of its own here."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.e2e_fixtures import tiny_lab_config
from tplab.lab.lab_config import FAILED
from tplab.lab.orchestrator import Lab
from tplab.mock.handle import start_mock_vast
from tplab.money.budget import default_ledger_path

TORCH_24_VAST = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
BLACKWELL_VAST = "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
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

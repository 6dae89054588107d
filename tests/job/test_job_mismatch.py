"""A TP output that differs from the single-device output is an error event and a failed run.

Runs the job's sequence in-process on a one-rank gloo group, with a TP build whose weights were
perturbed, so the two outputs must differ (no torchrun needed: seconds)."""

from __future__ import annotations

import io
import json

import pytest
import torch
import torch.distributed as dist

import tplab.model.checkpoint as checkpoint
from tplab.records.events import ErrorEvent, EventWriter, StageEvent, decode_line
from tplab.job.run import Job, build_parser
from tplab.job.runtime import Runtime


@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def _run(tiny_assets, tmp_path, monkeypatch, perturb: bool) -> tuple[int, list, dict | None]:
    torch.set_num_threads(1)
    real_build_tp = checkpoint.build_tp

    def build_tp(ckpt, device, group=None):
        model = real_build_tp(ckpt, device, group)
        if perturb:
            with torch.no_grad():
                model.lm_head.weight.mul_(-1.0)  # a wrong shard: argmax changes
        return model

    monkeypatch.setattr(checkpoint, "build_tp", build_tp)
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    args = build_parser().parse_args(["--checkpoint", str(ckpt), "--prompts", str(prompts),
                                      "--out", str(out), "--num-prompts", "2", "--new-tokens",
                                      "5", "--warmup", "0", "--no-sweep"])
    buf = io.StringIO()
    rt = Runtime(rank=0, local_rank=0, world_size=1, backend="gloo", device=torch.device("cpu"),
                 threads=1, fallback_reason="test")
    rc = Job(args, rt, EventWriter([buf])).run()
    events = [decode_line(ln) for ln in buf.getvalue().splitlines()]
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return rc, events, results


def test_mismatch_fails_the_run_with_error_events(tiny_assets, tmp_path, monkeypatch, one_rank_group):
    rc, events, results = _run(tiny_assets, tmp_path, monkeypatch, perturb=True)
    assert rc == 1
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.fatal for e in errors] == [False, False, True]  # one per prompt, then the verdict
    assert "prompt 0: TP output differs" in errors[0].msg
    assert "differs from the single-device output (prompts [0, 1]" in errors[-1].msg
    assert results["outputs_match"] is False and results["ok"] is False
    assert not any(isinstance(e, StageEvent) and e.name == "finished" for e in events)


def test_same_weights_match(tiny_assets, tmp_path, monkeypatch, one_rank_group):
    rc, events, results = _run(tiny_assets, tmp_path, monkeypatch, perturb=False)
    assert rc == 0 and results["outputs_match"] is True
    assert not [e for e in events if e.type == "error"]
    assert results["sweep"]["fit_error"] == "sweep skipped (--no-sweep)"

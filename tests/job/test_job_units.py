"""The job's parts that run without a process group: prompts, device choice, the timed loop,
the results summary."""

from __future__ import annotations

import pytest
import torch

from tplab.job import runtime
from tplab.records.results import ModeRun, PromptRecord, build_results, timing_notes
from tplab.job.run import read_prompts
from tplab.job.runtime import JobError
from tplab.job.decode_timing import decode_timed


def test_read_prompts_skips_blanks_and_comments(tiny_assets):
    _, prompts = tiny_assets
    assert read_prompts(str(prompts), 2) == ["he goed to school", "i has eat"]
    with pytest.raises(JobError, match="has 3 prompts, fewer than --num-prompts 10"):
        read_prompts(str(prompts), 10)
    with pytest.raises(JobError, match="cannot read the prompts file"):
        read_prompts(str(prompts) + ".missing", 1)


def test_device_choice(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.choose("auto", 2, 0) == ("gloo", torch.device("cpu"), "no GPU is visible")
    with pytest.raises(JobError, match="asked for 2 GPUs but no GPU is visible"):
        runtime.choose("cuda", 2, 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(JobError, match="2 ranks need 2 GPUs but only 1 is visible"):
        runtime.choose("auto", 2, 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert runtime.choose("auto", 2, 1) == ("nccl", torch.device("cuda", 1), "")
    assert runtime.choose("cpu", 2, 1)[0] == "gloo"


def test_init_outside_torchrun_says_how_to_launch(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(JobError, match="run the job under torchrun"):
        runtime.init()


def test_nccl_env_is_recorded_not_set(monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    assert runtime.nccl_env() == {"NCCL_P2P_DISABLE": "1"}


def test_timed_loop_decodes_exactly_like_greedy_decode(tiny_assets):
    from tplab.model.checkpoint import build_single, load_checkpoint
    from tplab.model.decode import greedy_decode

    torch.set_num_threads(1)
    ckpt = load_checkpoint(tiny_assets[0])
    model = build_single(ckpt, "cpu")
    ids = ckpt.tokenizer.prompt_ids("he goed to school")
    run = decode_timed(model, ids, 12, torch.device("cpu"))
    assert run.tokens == greedy_decode(model, ids, 12)
    assert len(run.step_ms) == 12 and all(ms > 0 for ms in run.step_ms)
    assert len(run.decode_ms) == 11 and run.ar_ms == []
    instr = decode_timed(model, ids, 12, torch.device("cpu"), instrument=True)
    assert instr.tokens == run.tokens
    assert instr.ar_calls == [0] * 12  # a single-device model issues no collectives


def _rec(i: int, single: list[int], tp: list[int]) -> PromptRecord:
    s = ModeRun(tokens=single, step_ms=[5.0, 1.0, 1.0, 1.0])
    t = ModeRun(tokens=tp, step_ms=[9.0, 4.0, 4.0, 4.0])
    ti = ModeRun(tokens=tp, step_ms=[9.5, 4.5, 4.5, 4.5], ar_ms=[3.0, 2.0, 2.0, 2.0],
                 ar_calls=[5, 5, 5, 5], ar_bytes=[640, 640, 640, 640])
    return PromptRecord(index=i, prompt=f"p{i}", single=s, tp=t, tp_instr=ti,
                        single_text="a", tp_text="a")


def _build(records):
    return build_results(records=records, config={}, model={}, timing=timing_notes("cpu", 1, 2, "x"),
                         env={"world_size": 2, "backend": "gloo", "device_type": "cpu"}, sweep=[],
                         fit=None, fit_error="sweep skipped", started_at=0.0, finished_at=1.0)


def test_results_numbers_and_a_mismatch_fails_the_run():
    ok = _build([_rec(0, [1, 2, 3, 4], [1, 2, 3, 4])])
    assert ok["outputs_match"] is True and ok["ok"] is True
    assert ok["single_per_token_ms"] == 1.0 and ok["tp_per_token_ms"] == 4.0  # prefill excluded
    assert ok["speedup"] == 0.25
    assert ok["allreduce_ms_per_token"] == 2.0
    assert ok["comm_compute_ratio"] == pytest.approx(2.0 / 2.5)
    assert ok["instrumentation_overhead_ms_per_token"] == pytest.approx(0.5)
    assert ok["allreduce_calls_per_token"] == 5 and ok["allreduce_bytes_per_call"] == 128
    assert ok["single"]["prefill_ms"]["mean"] == 5.0
    for key in ("clock", "tp_latency", "allreduce", "instrumentation_overhead", "single"):
        assert key in ok["timing"]
    bad = _build([_rec(0, [1, 2, 3, 4], [1, 2, 3, 4]), _rec(1, [1, 2, 3, 4], [1, 2, 9, 4])])
    assert bad["outputs_match"] is False and bad["ok"] is False
    assert [p["match"] for p in bad["prompts"]] == [True, False]


def test_too_few_gpus_is_an_error_event_and_exit_1(tiny_assets, tmp_path, monkeypatch, capsys):
    import io

    from tplab.records.events import read_events
    from tplab.job.run import main

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    stdout = io.StringIO()
    rc = main(["--checkpoint", str(ckpt), "--prompts", str(prompts), "--out", str(out)], stdout)
    assert rc == 1
    (err,) = [e for e in read_events(str(out / "events.jsonl")) if e.type == "error"]
    assert err["fatal"] is True
    assert err["msg"] == ("2 ranks need 2 GPUs but only 1 is visible; launch with "
                          "--nproc-per-node=1 or on a machine with more GPUs.")
    assert '"type":"error"' in stdout.getvalue()
    assert "tplab.job rank 0: 2 ranks need 2 GPUs" in capsys.readouterr().err


def test_static_step_loop_decodes_like_greedy_decode(tiny_assets):
    """The --compile path's timed loop, with the static-cache step left eager (compiling is slow)."""
    from tplab.model.compiled import build_decoder
    from tplab.job.decode_timing import decode_timed_static
    from tplab.model.checkpoint import build_single, load_checkpoint
    from tplab.model.decode import greedy_decode

    torch.set_num_threads(1)
    ckpt = load_checkpoint(tiny_assets[0])
    model = build_single(ckpt, "cpu")
    ids = ckpt.tokenizer.prompt_ids("i has eat")
    run = decode_timed_static(build_decoder(model, compile=False), ids, 10, torch.device("cpu"))
    assert run.tokens == greedy_decode(model, ids, 10)
    assert len(run.step_ms) == 10

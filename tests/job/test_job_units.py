"""The job's parts that run without a process group: prompts, device choice, the timed loop,
the results summary."""

from __future__ import annotations

import time

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


def test_the_input_check_refuses_what_the_job_would_fail_on_with_its_sentence(tiny_assets,
                                                                              tmp_path):
    """What the lab's pre-flight asks before authorize: one rank, a file that is not UTF-8
    text, a prompt too long for the context (and the advice that can help: no lower
    --new-tokens makes room for a prompt that fills the context alone)."""
    from tplab.job import input_check
    ckpt, prompts = tiny_assets
    with pytest.raises(JobError, match="tensor parallelism needs at least 2 ranks, got 1"):
        input_check.check(str(ckpt), str(prompts), 1, 4, 1)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("zo\xeb goed to m\xfcnchen\n".encode("latin-1"))
    with pytest.raises(JobError, match=r"is not UTF-8 text \(byte 0xeb on line 1\)"):
        input_check.check(str(ckpt), str(latin1), 1, 4, 2)
    long = tmp_path / "long.txt"
    long.write_text("he goed to school " * 10 + "\n" + "he goed to school " * 12 + "\n")
    with pytest.raises(JobError, match="a prompt of 42 tokens plus 10 new tokens exceeds the "
                                       "model's block_size 48; lower --new-tokens to 6 or less"):
        input_check.check(str(ckpt), str(long), 1, 10, 2)  # the tiny model's context: 48
    with pytest.raises(JobError, match="a prompt of 50 tokens leaves no room in the model's "
                                       "48-token context for new tokens .*; shorten that prompt"):
        input_check.check(str(ckpt), str(long), 2, 2, 2)


def test_device_choice():
    """Once the pod check passed: gloo on the CPU without GPUs, NCCL on this rank's GPU."""
    assert runtime.choose("auto", 0, 0) == ("gloo", torch.device("cpu"), "no GPU is visible")
    assert runtime.choose("auto", 2, 1) == ("nccl", torch.device("cuda", 1), "")
    assert runtime.choose("cpu", 2, 1)[0] == "gloo"


def test_init_refuses_a_device_it_does_not_know(monkeypatch):
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    with pytest.raises(JobError, match="--device must be auto, cuda or cpu, not 'tpu'"):
        runtime.init("tpu")


def test_init_asks_the_pod_check_before_joining_a_group(monkeypatch):
    """A GPU lab on a pod whose torch sees no GPU ends in the check's sentence, before any
    process group (which would wait for peers) is joined."""
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(JobError, match="sees no GPU on this pod|is a CPU build"):
        runtime.init("cuda")


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

    from tplab.records.events import ErrorEvent, read_events
    from tplab.job.run import main

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    from tplab.job import pod_check

    one_gpu = pod_check.TorchFacts(version=str(torch.__version__), cuda="12.4",
                                   cuda_available=True, nccl=True, arch_list=("sm_89",),
                                   gpus=(pod_check.Gpu("NVIDIA GeForce RTX 4090", (8, 9)),))
    monkeypatch.setattr(pod_check, "facts", lambda: one_gpu)
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    stdout = io.StringIO()
    rc = main(["--checkpoint", str(ckpt), "--prompts", str(prompts), "--out", str(out)], stdout)
    assert rc == 1
    (err,) = [e for e in read_events(str(out / "events.jsonl")) if isinstance(e, ErrorEvent)]
    assert err.fatal is True
    assert err.msg == ("2 ranks need 2 GPUs but only 1 is visible on this pod; rent 2 GPUs "
                          "or run with --gpus 1.")
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


def test_leaving_the_process_group_is_bounded(monkeypatch):
    """A rank whose destroy_process_group never returns (seen on torch 2.4's gloo) is told so
    within the bound, instead of keeping a finished job, and its pod, waiting."""
    import threading

    import torch.distributed as dist

    never = threading.Event()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: never.wait(30))
    t0 = time.monotonic()
    assert runtime.shutdown(timeout_s=0.2) is False
    assert time.monotonic() - t0 < 5
    never.set()
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    assert runtime.shutdown(timeout_s=5) is True

"""The job end to end under torchrun (2 ranks on a gloo group, tiny model), through `tplab local`
with the collectives over shared memory and over gloo side by side, and its failure paths: a
timeout, and a rank killed while the shm collectives run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e_fixtures import assert_profiled_pass
from tplab.figures.figure import MS, shown
from tplab.records.events import (LogEvent, StageEvent, PromptDoneEvent, ResultEvent,
                                  SweepEvent, SweepPointEvent, TimelineEvent, TokenEvent,
                                  read_events)
from tplab.tp.shm_segment import segment_dir

pytestmark = pytest.mark.slow

SHEET_BLOCK_G = ["seed", "lab", "vendor", "instance_type", "nvlink_present", "instance_id",
                "start_ts", "end_ts", "duration_hours", "estimated_cost_usd", "actual_cost_usd",
                "terminated_screenshot", "single_gpu_per_token_ms", "tp_per_token_ms", "speedup",
                "lesson_notes", "crossover_d_model"]
N_PROMPTS, N_TOKENS = 3, 6


def test_tplab_local_end_to_end_over_shm_with_gloo_alongside(tiny_assets, tmp_path):
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tplab", "local", "--tp", "2", "--comm", "both", "--out", str(out),
         "--checkpoint", str(ckpt), "--prompts-file", str(prompts), "--prompts", str(N_PROMPTS),
         "--new-tokens", str(N_TOKENS), "--warmup", "1", "--sweep-max-bytes", "8192",
         "--instrumented-prompts", "2", "--timeout", "150", "--sweep-d-model", "16,32",
         "--sweep-tokens", "4"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stdout + done.stderr + (out / "torchrun.log").read_text()
    assert "speedup, single/TP (timed pass)" in done.stdout and "match" in done.stdout
    assert "d_model sweep (measured" in done.stdout and "crossover, measured:" in done.stdout
    assert "TP=2 per token, shm" in done.stdout and "TP=2 per token, gloo" in done.stdout
    assert "single (same run)" in done.stdout and "[cpu-shm calibrated from this run" in done.stdout

    r = json.loads((out / "results.json").read_text())
    assert r["outputs_match"] is True and r["world_size"] == 2 and r["backend"] == "gloo"
    assert r["comm"] == "shm" and r["config"]["comm"] == "both"
    assert r["env"]["comm"]["transports"] == ["shm", "gloo"]
    assert r["env"]["comm"]["shm"]["segment"].startswith("tplab-tp-")
    assert not (Path(r["env"]["comm"]["shm"]["dir"]) / r["env"]["comm"]["shm"]["segment"]).exists()
    assert set(r["transports"]) == {"shm", "gloo"}
    for name, t in r["transports"].items():
        assert t["outputs_match"] is True and t["mismatched_prompts"] == [], name
        assert t["tp_over_single"] == pytest.approx(t["tp_per_token_ms"] / r["single_per_token_ms"])
        assert t["allreduce_calls_per_token"] == 2 * 2 + 1 + 1
        assert t["sweep"]["transport"] == name
        assert [p["bytes"] for p in t["sweep"]["points"]] == [256, 512, 1024, 2048, 4096, 8192]
        assert all(p["p99_ms"] >= p["ms"] > 0 for p in t["sweep"]["points"])
    assert r["transports"]["shm"]["tp_per_token_ms"] == r["tp_per_token_ms"]
    assert r["sweep"] == r["transports"]["shm"]["sweep"]
    assert "went over shm" in r["timing"]["comm"] and "over gloo in the same run" in r["timing"]["comm"]
    for key in ("single_per_token_ms", "tp_per_token_ms", "speedup", "allreduce_ms_per_token",
                "comm_compute_ratio", "instrumentation_overhead_ms_per_token"):
        assert isinstance(r[key], float), key
    assert r["speedup"] == pytest.approx(r["single_per_token_ms"] / r["tp_per_token_ms"])
    for mode in ("single", "tp"):
        stats = r[mode]["per_token_ms"]
        assert stats["n"] == N_PROMPTS * (N_TOKENS - 1)
        assert 0 < stats["p50"] <= stats["p99"] <= stats["max"]
    assert r["allreduce_calls_per_token"] == 2 * 2 + 1 + 1  # 2 per layer + embedding + logits
    assert r["allreduce_ms_per_token"] > 0
    assert [p["bytes"] for p in r["sweep"]["points"]] == [256, 512, 1024, 2048, 4096, 8192]
    fit = r["sweep"]["fit"]
    assert (fit["alpha_us"] >= 0 and fit["beta_gbps"] > 0) if fit else r["sweep"]["fit_error"]
    assert r["env"]["nccl_env_set_by_job"] == {} and r["env"]["torch_version"]
    assert r["env"]["threads_per_rank"] == 1
    assert "uninstrumented" in r["timing"]["tp_latency"]
    assert all(p["single_tokens"] == p["tp_tokens"] and len(p["tp_tokens"]) == N_TOKENS
               for p in r["prompts"])

    events = list(read_events(str(out / "events.jsonl")))
    assert [e.seq for e in events] == list(range(len(events)))  # every event once, in order
    phases = [e.name for e in events if isinstance(e, StageEvent)]
    assert phases == ["setup", "load", "warmup", "decode", "profile", "sweep", "d_model_sweep",
                      "results", "finished"]
    # the profiled pass (over shm, the transport carrying the figures): the trace, the split,
    # its event for the views, the final table's rows, the sweep's own splits
    tl = assert_profiled_pass(out)
    assert tl["comm"] == "shm"
    (tl_event,) = [e for e in events if isinstance(e, TimelineEvent)]
    assert tl_event.section["modes"] == tl["modes"]
    assert "TP token (profiled pass)" in done.stdout and "per all-reduce" in done.stdout
    assert all(p["profiled"]["tokens"] == 4 for p in r["d_model_sweep"])
    # the d_model sweep (over shm, the transport carrying the figures): each point streamed, TP
    # output equal to single at each, and the calibrated prediction stored beside each point
    assert [e.d_model for e in events if isinstance(e, SweepPointEvent)] == [16, 32]
    assert [p["d_model"] for p in r["d_model_sweep"]] == [16, 32]
    for p in r["d_model_sweep"]:
        assert p["outputs_match"] is True and p["tokens"] == 4 and p["allreduce_calls"] == 6
        assert p["predicted_single_ms"] > 0 and p["predicted_tp_ms"] > 0
    cal = r["calibration"]
    assert cal["points_from"] == "d_model_sweep" and len(cal["points"]) == 2
    assert cal["within_tolerance"] == (cal["max_abs_error"] <= 0.25)
    assert (r["measured_crossover_d_model"] is None) == bool(r["measured_crossover_reason"])
    assert r["sweep"]["spread"]["repeats"] == 5
    for p in r["d_model_sweep"]:  # every figure with its spread and sample count
        assert p["figures"]["tp_ms"]["n"] == p["rounds"] >= 2 and "spread" in p["figures"]["tp_ms"]
    assert r["tp"]["passes"]["p50"]["n"] == N_PROMPTS and "clean" in r["stability"]
    assert "note" in r["measured_crossover_interval"]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) == 2 * N_PROMPTS * N_TOKENS  # single and the primary transport's TP
    # single and TP interleave prompt by prompt, the mode going first alternating
    pass_order = [(e.prompt, e.mode) for e in tokens if e.pos == 0]
    assert pass_order == [(i, m) for i in range(N_PROMPTS)
                          for m in (("single", "tp") if i % 2 == 0 else ("tp", "single"))]
    done_modes = [e.mode for e in events if isinstance(e, PromptDoneEvent)]
    assert done_modes.count("tp") == done_modes.count("tp-gloo") == N_PROMPTS
    assert {e.comm for e in events if isinstance(e, SweepEvent)} == {"shm", "gloo"}
    assert all(e.ar_ms == 0 for e in tokens if e.mode == "single")
    tp_tokens = [e for e in tokens if e.mode == "tp"]
    assert all(e.ar_measured == (e.prompt < 2) for e in tp_tokens)  # first 2 instrumented
    assert sum(e.ar_ms for e in tp_tokens if e.prompt < 2) > 0
    assert "the first 2 of the 3 prompts" in r["timing"]["allreduce"]
    assert r["tp"]["instrumented_per_token_ms"]["n"] == 2 * (N_TOKENS - 1)
    assert any(isinstance(e, LogEvent) and "gloo on the CPU" in e.msg for e in events)
    result = events[-2]
    assert isinstance(result, ResultEvent) and result.results["outputs_match"] is True

    assert (out / "scaling-curve.png").read_bytes()[:4] == b"\x89PNG"
    m = json.loads((out / "manifest.json").read_text())
    assert all(k in m for k in SHEET_BLOCK_G)
    assert (m["status"], m["reason"]) == ("EDUCATIONAL_STUB", "no cloud run")
    assert m["outputs_match"] is True and m["tp_per_token_ms"] == r["tp_per_token_ms"]
    assert f"{shown(r['single_per_token_ms'], MS)} ms/token" in m["lesson_notes"]
    assert "The profiled pass (torch's profiler on every rank, 4 TP tokens" in m["lesson_notes"]
    assert "is waiting for the other rank to arrive" in m["lesson_notes"]
    # the calibration fitted TP's terms to the profiled split, its error both ways side by side
    assert cal["tp_split_from"] == "profiled" and set(cal["both_ways"]) == {"profiled",
                                                                            "two passes"}
    assert "TP terms from the profiled split" in done.stdout
    fits = [t["sweep"]["fit"] for t in r["transports"].values()]
    if all(fits):  # sizes up to 8 KiB are all latency: on a busy machine a fit can fail
        assert "µs over shm and " in m["lesson_notes"] and "in the same run" in m["lesson_notes"]
    else:
        assert all(t["sweep"]["fit"] or t["sweep"]["fit_error"] for t in r["transports"].values())
    assert m["instance_type"].startswith("2 CPU processes (shm, gloo alongside) on ")


def test_tplab_local_timeout_stops_the_job_and_records_failed(tiny_assets, tmp_path):
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tplab", "local", "--out", str(out), "--checkpoint", str(ckpt),
         "--prompts-file", str(prompts), "--prompts", "1", "--new-tokens", "4", "--timeout", "0.5",
         "--quiet"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "the job did not finish within 0.5 s" in done.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "FAILED" and "did not finish" in m["reason"]
    assert not (out / "results.json").exists()


def test_a_rank_killed_during_the_shm_collectives_fails_the_job_promptly(tiny_assets, tmp_path):
    """SIGKILL rank 1 once TP decoding over shm is under way: the job ends, failed, not hung."""
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tplab", "local", "--comm", "shm", "--out", str(out),
         "--checkpoint", str(ckpt), "--prompts-file", str(prompts), "--prompts", "3",
         "--new-tokens", "40", "--sweep-max-bytes", "65536", "--quiet", "--timeout", "150"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, MPLBACKEND="Agg"))
    pids = segment = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            text = (out / "events.jsonl").read_text() if (out / "events.jsonl").exists() else ""
            m = re.search(r"segment (tplab-tp-\S+) in .*?ranks' pids \[(\d+), (\d+)\]", text)
            if m:
                segment, pids = m.group(1), (int(m.group(2)), int(m.group(3)))
            if pids and '"mode":"tp"' in text.replace(" ", ""):
                break
            time.sleep(0.02)
        assert pids, "the job never said which processes its ranks are"
        os.kill(pids[1], signal.SIGKILL)
        killed_at = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stdout + stderr
    assert time.monotonic() - killed_at < 30
    assert "the run failed" in stderr or "the job failed" in stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "FAILED"
    assert not (segment_dir() / segment).exists()

"""The job end to end under torchrun (2 gloo ranks, tiny model), through `tplab local`, and its
failure path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tplab.events import read_events

pytestmark = pytest.mark.slow

SEED_BLOCK_G = ["seed", "lab", "vendor", "instance_type", "nvlink_present", "instance_id",
                "start_ts", "end_ts", "duration_hours", "estimated_cost_usd", "actual_cost_usd",
                "terminated_screenshot", "single_gpu_per_token_ms", "tp_per_token_ms", "speedup",
                "lesson_notes", "crossover_d_model"]
N_PROMPTS, N_TOKENS = 3, 6


def test_tplab_local_end_to_end(tiny_assets, tmp_path):
    ckpt, prompts = tiny_assets
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tplab", "local", "--tp", "2", "--out", str(out),
         "--checkpoint", str(ckpt), "--prompts-file", str(prompts), "--prompts", str(N_PROMPTS),
         "--new-tokens", str(N_TOKENS), "--warmup", "1", "--sweep-max-bytes", "8192",
         "--instrumented-prompts", "2", "--timeout", "150"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stdout + done.stderr + (out / "torchrun.log").read_text()
    assert "speedup (single/TP)" in done.stdout and "match" in done.stdout

    r = json.loads((out / "results.json").read_text())
    assert r["outputs_match"] is True and r["world_size"] == 2 and r["backend"] == "gloo"
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
    phases = [e["name"] for e in events if e.type == "phase"]
    assert phases == ["setup", "load", "baseline", "tp", "sweep", "results", "finished"]
    tokens = [e for e in events if e.type == "token"]
    assert len(tokens) == 2 * N_PROMPTS * N_TOKENS
    assert all(e["ar_ms"] == 0 for e in tokens if e["mode"] == "single")
    tp_tokens = [e for e in tokens if e["mode"] == "tp"]
    assert all(e["ar_measured"] == (e["prompt"] < 2) for e in tp_tokens)  # first 2 instrumented
    assert sum(e["ar_ms"] for e in tp_tokens if e["prompt"] < 2) > 0
    assert "the first 2 of the 3 prompts" in r["timing"]["allreduce"]
    assert r["tp"]["instrumented_per_token_ms"]["n"] == 2 * (N_TOKENS - 1)
    assert any(e.type == "log" and "gloo on the CPU" in e["msg"] for e in events)
    assert events[-2].type == "result" and events[-2]["results"]["outputs_match"] is True

    assert (out / "scaling-curve.png").read_bytes()[:4] == b"\x89PNG"
    m = json.loads((out / "manifest.json").read_text())
    assert all(k in m for k in SEED_BLOCK_G)
    assert (m["status"], m["reason"]) == ("EDUCATIONAL_STUB", "no cloud run")
    assert m["outputs_match"] is True and m["tp_per_token_ms"] == r["tp_per_token_ms"]
    assert f"{r['single_per_token_ms']:.3f} ms/token" in m["lesson_notes"]


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

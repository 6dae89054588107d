"""``--comm gloo|shm|both`` in the job: what each choice decodes with, refusals, results per
transport, and the sweep over an injected transport."""

from __future__ import annotations

import pytest
import torch

from tests.distributed import run_distributed
from tplab.job import comm
from tplab.records.results import TRANSPORT_KEYS, combine_transports
from tplab.job.allreduce_sweep import REVISIT_WARMUP
from tplab.job.runtime import JobError, Runtime
from tplab.stats.harness import relative_iqr


def test_choices_put_the_transport_carrying_the_figures_first():
    assert comm.transports_for("gloo") == ["gloo"]
    assert comm.transports_for("shm") == ["shm"]
    assert comm.transports_for("both") == ["shm", "gloo"]
    with pytest.raises(JobError, match="--comm must be one of gloo, shm, both, not 'tcp'"):
        comm.transports_for("tcp")
    assert [comm.rotated(["shm", "gloo"], i) for i in range(3)] == [
        ["shm", "gloo"], ["gloo", "shm"], ["shm", "gloo"]]


def test_shm_on_gpus_is_refused_with_what_to_do():
    rt = Runtime(rank=0, local_rank=0, world_size=2, backend="nccl",
                 device=torch.device("cuda", 0), threads=1, fallback_reason="")
    with pytest.raises(JobError, match="this run uses nccl on GPUs; drop --comm or pass --device cpu"):
        comm.setup("both", rt, 10.0)
    gloo = comm.setup("gloo", rt, 10.0)  # nothing to set up: the process group carries it
    assert (gloo.names, gloo.shm, gloo.label("gloo")) == (["gloo"], None, "nccl")


def _per_transport(tp_ms: float, match: bool, alpha: float) -> dict:
    return {"outputs_match": match, "ok": match, "tp_per_token_ms": tp_ms, "speedup": 1 / tp_ms,
            "tp_over_single": tp_ms, "allreduce_ms_per_token": tp_ms / 2,
            "comm_compute_ratio": 1.0, "instrumentation_overhead_ms_per_token": 0.1,
            "allreduce_calls_per_token": 14.0, "allreduce_bytes_per_call": 256.0,
            "tp": {"per_token_ms": {"mean": tp_ms}},
            "sweep": {"points": [], "fit": {"alpha_us": alpha}, "fit_error": ""},
            "prompts": [{"index": 0, "match": True}, {"index": 1, "match": match}],
            "single_per_token_ms": 1.0}


def test_results_of_several_transports_keep_each_ones_figures():
    both = combine_transports({"shm": _per_transport(2.0, True, 6.0),
                               "gloo": _per_transport(20.0, True, 400.0)}, "shm")
    assert both["comm"] == "shm" and both["tp_per_token_ms"] == 2.0  # the top level is shm's
    assert both["outputs_match"] is True and both["ok"] is True
    assert set(both["transports"]) == {"shm", "gloo"}
    gloo = both["transports"]["gloo"]
    assert set(gloo) == {*TRANSPORT_KEYS, "mismatched_prompts"}
    assert gloo["tp_per_token_ms"] == 20.0 and gloo["sweep"]["fit"]["alpha_us"] == 400.0
    # one transport's mismatch fails the whole run, and says where
    bad = combine_transports({"shm": _per_transport(2.0, True, 6.0),
                              "gloo": _per_transport(20.0, False, 400.0)}, "shm")
    assert bad["outputs_match"] is False and bad["ok"] is False
    assert bad["transports"]["gloo"]["mismatched_prompts"] == [1]
    assert bad["transports"]["shm"]["mismatched_prompts"] == []
    with pytest.raises(ValueError, match="primary transport 'shm'"):
        combine_transports({"gloo": _per_transport(20.0, True, 400.0)}, "shm")


def _sweeps(rank: int, ws: int) -> dict:
    from tplab.job.allreduce_sweep import run_sweep
    from tplab.tp import ShmComm

    shm = ShmComm.create(timeout_s=20)
    calls = []

    def counted(t: torch.Tensor) -> None:
        calls.append(t.numel())
        shm.all_reduce(t, out=t)

    cpu = torch.device("cpu")
    points = run_sweep(cpu, [256, 4096], iters=4, warmup=1, all_reduce=counted)
    buf = torch.ones(8)
    counted(buf)  # the injected reduce really sums: ones over ws ranks
    gloo = run_sweep(cpu, [256], iters=4, warmup=1)
    shm.close()
    return {"points": points, "calls": calls, "sum": buf.tolist(), "gloo": gloo}


@pytest.mark.slow  # spawns gloo ranks
def test_the_sweep_measures_the_transport_it_is_given():
    r0, r1 = run_distributed(_sweeps, 2, timeout_s=90)
    # 5 rounds, each visiting both sizes (the first visit after 1 warm-up call, later ones after
    # REVISIT_WARMUP), the sizes' order changing from round to round; then ours
    calls = r0["calls"]
    assert calls[-1] == 8
    for n in (64, 1024):
        assert calls.count(n) == 1 + 5 * 4 + 4 * REVISIT_WARMUP
    visits = [c for i, c in enumerate(calls[:-1]) if i == 0 or calls[i - 1] != c]
    assert len(visits) > 2  # interleaved, not one size's rounds back to back
    assert r0["sum"] == [2.0] * 8
    for p0, p1 in zip(r0["points"], r1["points"]):
        assert p0.ms == p1.ms and p0.p99_ms == p1.p99_ms  # the slowest rank's, on every rank
        assert 0 < p0.ms <= p0.p99_ms
        assert p0.repeats == 5 and len(p0.repeat_ms) == 5 and p0.repeat_ms == p1.repeat_ms
        assert p0.ms == sorted(p0.repeat_ms)[2]  # the median round
        assert p0.spread == pytest.approx(relative_iqr(p0.repeat_ms))
        assert p0.to_dict()["figure"]["n"] == 5
    assert r0["gloo"][0].bytes == 256 and r0["gloo"][0].p99_ms >= r0["gloo"][0].ms

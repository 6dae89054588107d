"""The profiled pass's records: each rank's capture of torch's trace put on one clock, merged
into one bounded Chrome trace, and each token step split into compute, on the wire, waiting and
rest — on the CPU from the ops and our spans, on a GPU from the kernels each span launched."""

from __future__ import annotations

import json

import pytest

from tplab.records.timeline import rank_steps, timeline_section
from tplab.records.trace_merge import (
    ANCHOR,
    Ev,
    Merged,
    align,
    capture_from_chrome,
    check_trace,
    collective_counts,
    trace_document,
)
from tplab.records.trace_names import collective_name, parse_collective, parse_token, token_name


def _merged(events: dict[int, list[Ev]], steps: dict[int, dict[str, dict[int, float]]]) -> Merged:
    for evs in events.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
    return Merged(events=events, steps=steps, threads={r: {0: "main"} for r in events},
                  clock={"alignment": "test"}, t0_ns=0, dropped=0)


def _section(events, steps, devices=None):
    return timeline_section(_merged(events, steps), devices or {r: "cpu" for r in events},
                            comm="gloo", taken={}, trace={})


def test_names_say_what_each_span_is_and_read_back():
    assert token_name("tp", 7) == "tp token 7" and parse_token("tp token 7") == ("tp", 7)
    assert parse_token("tp token x") is None and parse_token("aten::mm") is None
    name = collective_name("attn-out", "all-reduce", 3)
    assert name == "L3 attn-out all-reduce"
    c = parse_collective(name)
    assert (c.layer, c.place, c.op, c.short) == (3, "attn-out", "all-reduce", "3a")
    assert parse_collective("embedding all-reduce").short == "E"
    assert parse_collective("logits all-gather").short == "G"
    assert parse_collective("c10d::allreduce_") is None
    with pytest.raises(ValueError):
        collective_name("attention", "all-reduce")


def test_each_collective_splits_at_the_last_arrival_into_wait_and_wire():
    """Rank 0 arrives at the all-reduce at 100 µs, rank 1 at 160; both leave at 200: rank 0 waited
    60 µs for rank 1, and each spent 40 µs on the wire. Compute is their ops, rest the gaps."""
    ar = collective_name("embedding", "all-reduce")
    ev = {0: [Ev.at_us("user_annotation", token_name("tp", 3), 0, 300, 0),
              Ev.at_us("cpu_op", "aten::embedding", 10, 80, 0),
              Ev.at_us("user_annotation", ar, 100, 100, 0),
              Ev.at_us("cpu_op", "c10d::allreduce_", 101, 98, 0),   # inside the collective: not compute
              Ev.at_us("cpu_op", "aten::linear", 210, 60, 0)],
          1: [Ev.at_us("user_annotation", token_name("tp", 3), 5, 295, 0),
              Ev.at_us("cpu_op", "aten::embedding", 10, 140, 0),
              Ev.at_us("user_annotation", ar, 160, 40, 0),
              Ev.at_us("cpu_op", "aten::linear", 210, 60, 0)]}
    s = _section(ev, {0: {"tp": {3: 295.0}}, 1: {"tp": {3: 290.0}}})
    (tok,) = s["modes"]["tp"]["tokens"]
    r0, r1 = tok["ranks"]
    assert (r0["wait_us"], r0["wire_us"]) == (60.0, 40.0)
    assert (r1["wait_us"], r1["wire_us"]) == (0.0, 40.0)
    assert (r0["compute_us"], r1["compute_us"]) == (140.0, 200.0)
    assert r0["rest_us"] == 300 - 140 - 100 and r1["rest_us"] == 295 - 200 - 40
    for r in (r0, r1):
        parts = r["compute_us"] + r["wire_us"] + r["wait_us"] + r["rest_us"]
        assert parts == pytest.approx(r["token_us"]) and r["sum_ratio"] == pytest.approx(
            parts / r["step_us"])
    (c,) = tok["collectives"]
    assert (c["arrive"], c["start"], c["end"], c["short"]) == (160.0, [100.0, 160.0],
                                                               [200.0, 200.0], "E")
    assert s["waiting_seen"] is True and s["sum_check"]["ok"] is True
    ar_split = s["modes"]["tp"]["median"]["allreduce"]
    assert ar_split["calls_per_token"] == 1 and ar_split["wait_us_per_call"] == 30.0
    assert ar_split["wire_us_per_call"] == 40.0 and ar_split["wait_share"] == pytest.approx(30 / 70)


def test_parts_that_do_not_add_up_to_the_steps_own_clock_fail_the_sum_check():
    ev = {0: [Ev.at_us("user_annotation", token_name("single", 3), 0, 100, 0),
              Ev.at_us("cpu_op", "aten::mm", 0, 90, 0)]}
    s = _section(ev, {0: {"single": {3: 150.0}}})  # the step's own clock saw 150 µs
    assert s["sum_check"]["ok"] is False and s["sum_check"]["worst"] == pytest.approx(1 / 3)


def test_one_step_off_alone_is_reported_and_the_medians_decide():
    """A rank descheduled between its clock's read and its span's edge puts that time in one
    step's span (as rest) and not on its clock: reported as the worst step, while each rank's
    median over its steps says whether the profiler's clock agrees with the rank's."""
    ev = {0: [Ev.at_us("user_annotation", token_name("single", p), 1000 * p, 100, 0)
              for p in (3, 4, 5)]}
    s = _section(ev, {0: {"single": {3: 100.0, 4: 100.0, 5: 40.0}}})
    assert s["sum_check"]["ok"] is True and s["sum_check"]["median_worst"] == pytest.approx(0)
    assert s["sum_check"]["worst"] == pytest.approx(1.5)
    s = _section(ev, {0: {"single": {3: 40.0, 4: 40.0, 5: 100.0}}})
    assert s["sum_check"]["ok"] is False


def test_a_step_whose_ranks_show_different_collectives_is_left_out_and_named():
    a, b = collective_name("embedding", "all-reduce"), collective_name("logits", "all-gather")
    ev = {0: [Ev.at_us("user_annotation", token_name("tp", 3), 0, 100, 0),
              Ev.at_us("user_annotation", a, 10, 20, 0), Ev.at_us("user_annotation", b, 50, 20, 0)],
          1: [Ev.at_us("user_annotation", token_name("tp", 3), 0, 100, 0),
              Ev.at_us("user_annotation", a, 10, 20, 0)]}
    s = _section(ev, {0: {"tp": {3: 100.0}}, 1: {"tp": {3: 100.0}}})
    assert s["unmatched_steps"] == ["tp token 3"] and "tp" not in s["modes"]


def test_on_a_gpu_the_split_comes_from_the_kernels_each_span_launched():
    """Kernels are matched to the CPU spans by the launch's correlation id: NCCL's kernel is the
    collective's time on the GPU (its copy kernel is compute), the rest of the kernels compute."""
    ar = collective_name("embedding", "all-reduce")

    def rank(nccl_start: float) -> list[Ev]:
        return [Ev.at_us("user_annotation", token_name("tp", 3), 0, 400, 0),
                Ev.at_us("cuda_runtime", "cudaLaunchKernel", 10, 5, 0, corr=1),
                Ev.at_us("user_annotation", ar, 20, 30, 0),
                Ev.at_us("cuda_runtime", "cudaLaunchKernel", 22, 5, 0, corr=2),   # the output's copy
                Ev.at_us("cuda_driver", "cuLaunchKernelEx", 30, 5, 0, corr=3),    # NCCL's
                Ev.at_us("kernel", "embedding_kernel", 40, 50, 7, corr=1),
                Ev.at_us("kernel", "copy_kernel", 95, 10, 7, corr=2),
                Ev.at_us("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", nccl_start,
                   300 - nccl_start, 9, corr=3)]
    s = _section({0: rank(110), 1: rank(180)}, {0: {"tp": {3: 398.0}}, 1: {"tp": {3: 398.0}}},
                 {0: "cuda", 1: "cuda"})
    r0, r1 = s["modes"]["tp"]["tokens"][0]["ranks"]
    assert (r0["wait_us"], r0["wire_us"]) == (70.0, 120.0)
    assert (r1["wait_us"], r1["wire_us"]) == (0.0, 120.0)
    assert r0["compute_us"] == 60.0 and r1["compute_us"] == 60.0  # embedding + the copy
    assert r0["rest_us"] == 400 - 60 - 190


def _chrome(events: list[dict], base_ns: int = 1_000_000_000_000) -> dict:
    return {"baseTimeNanoseconds": base_ns, "traceEvents": events}


def test_each_rank_is_put_on_its_real_time_clock_by_its_anchors_and_aligned_by_host():
    """The profiler's stamps are checked against time.time_ns() read inside the anchor spans:
    here the profiler runs 2 µs ahead, and the capture takes that off. Ranks on one host share
    the clock (the barrier offset is only recorded); on two hosts it is applied."""
    base = 1_000_000_000_000
    anchor_reads = [base + 10_000, base + 20_000]          # ns, real time, inside each anchor
    chrome = _chrome([
        {"ph": "X", "cat": "user_annotation", "name": ANCHOR, "ts": 11.0, "dur": 2.0, "pid": 1,
         "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": ANCHOR, "ts": 21.0, "dur": 2.0, "pid": 1,
         "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 102.0, "dur": 5.0, "pid": 1,
         "tid": 1},
        {"ph": "i", "name": "instant", "ts": 50.0, "pid": 1, "tid": 1},          # not kept
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}])
    cap = capture_from_chrome(chrome, rank=1, anchors=anchor_reads, host="b",
                              steps={"tp": {3: 5.0}})
    assert cap["profiler_offset_ns"] == 2000 and len(cap["events"]) == 3
    mm = next(e for e in cap["events"] if e[1] == "aten::mm")
    assert cap["ref_ns"] + mm[2] == base + 100_000  # 102 µs less the 2 µs ahead
    zero = dict(cap, rank=0, host="a", events=[["cpu_op", "x", 0, 1000, 0, None]], flows=[],
                ref_ns=base)
    same = align([zero, cap], {0: 0, 1: 40_000}, same_host=True)
    two = align([zero, cap], {0: 0, 1: 40_000}, same_host=False)
    def gap(m: Merged) -> float:  # rank 1's op after rank 0's first event, on the one clock
        return (next(e.ts for e in m.events[1] if e.name == "aten::mm")
                - next(e.ts for e in m.events[0] if e.name == "x"))
    assert gap(same) == pytest.approx(100.0) and gap(two) == pytest.approx(60.0)
    assert same.clock["applied_offsets_us"] == {"0": 0.0, "1": 0.0}
    assert same.clock["barrier_offsets_us"]["1"] == 40.0 and "same host" in same.clock["alignment"]
    assert two.clock["applied_offsets_us"]["1"] == 40.0


def _two_rank_merged(tokens: int = 4) -> Merged:
    from tests.synthetic_lab import _synthetic_rank_events
    import random
    events, steps = _synthetic_rank_events(random.Random(1), tokens=tokens)
    return _merged(events, steps)


def test_the_merged_trace_is_one_process_per_rank_and_opens_as_it_is():
    merged = _two_rank_merged()
    doc = json.loads(json.dumps(trace_document(merged, other={"clock": merged.clock})))
    assert check_trace(doc) == []
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {1: "rank 0", 2: "rank 1"}
    assert {e["ph"] for e in doc["traceEvents"]} == {"X", "M"}
    counts = collective_counts(doc)
    tp = {k: v for k, v in counts.items() if k[1] == "tp"}
    assert len(tp) == 2 * 4 and all(len(v) == 2 * 6 + 2 for v in tp.values())
    assert doc["otherData"]["bound"]["note"] == "complete"


def test_over_its_bound_the_trace_leaves_out_whole_steps_single_first_and_says_so():
    merged = _two_rank_merged()
    full = len(json.dumps(trace_document(merged)))
    doc = trace_document(merged, max_bytes=full * 6 // 10)
    assert len(json.dumps(doc)) <= full * 6 // 10 and check_trace(doc) == []
    bound = doc["otherData"]["bound"]
    assert bound["left_out"][-4:] == [f"single token {p}" for p in range(3, 7)]
    assert bound["events_left_out"] > 0 and bound["note"].startswith("over ")
    kept = {k for k in collective_counts(doc)}
    assert (0, "tp", 3) in kept and not any(k[1] == "single" for k in kept)


def test_what_a_viewer_would_refuse_is_named():
    ok = {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0}
    meta = {"ph": "M", "name": "process_name", "pid": 1, "tid": 1, "args": {"name": "rank 0"}}
    assert check_trace({"traceEvents": [meta, ok]}) == []
    assert "pid 0" in check_trace({"traceEvents": [dict(meta, pid=0), dict(ok, pid=0)]})[0]
    start = {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1.0}
    assert check_trace({"traceEvents": [meta, ok, start, dict(start, ph="f", bp="e")]}) == []
    assert "one end only" in check_trace({"traceEvents": [meta, ok, start]})[0]
    assert check_trace([ok]) == ["not a JSON object with a traceEvents list"]
    half = dict(ok, name="b", ts=5.0, dur=10.0)  # starts inside a, ends after it
    assert "half-overlaps" in check_trace({"traceEvents": [meta, ok, half]})[0]
    assert "no process_name" in check_trace({"traceEvents": [ok]})[0]
    assert "non-negative dur" in check_trace({"traceEvents": [meta, dict(ok, dur=-1)]})[0]
    assert "not a complete" in check_trace({"traceEvents": [meta, dict(ok, ph="B")]})[0]


def test_rank_steps_keeps_one_step_per_token_span():
    merged = _two_rank_merged(tokens=2)
    steps = rank_steps(merged.events[0], "cpu")
    assert sorted(steps) == [("single", 3), ("single", 4), ("tp", 3), ("tp", 4)]
    assert len(steps[("tp", 3)].collectives) == 2 * 6 + 2
    assert steps[("single", 3)].collectives == []


def _gpu_export(rank: int, base_us: str) -> str:
    """A rank's export as torch writes it on a GPU (text: its µs carry ns digits past what a
    float holds at epoch scale): a token span, a launch, its kernel with the args HTA reads,
    and their flow."""
    from decimal import Decimal

    def at(us: str) -> str:
        return str(Decimal(base_us) + Decimal(us))

    return ("{\"traceEvents\": ["
            f'{{"ph": "X", "cat": "user_annotation", "name": "{token_name("tp", 3)}", '
            f'"pid": 7, "tid": 7, "ts": {at("0.000")}, "dur": 50.0, '
            '"args": {"External id": 1}}, '
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, '
            f'"tid": 7, "ts": {at("1.001")}, "dur": 2.5, '
            f'"args": {{"External id": 2, "correlation": {40 + rank}}}}}, '
            f'{{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, '
            f'"tid": 7, "ts": {at("4.999")}, "dur": 30.123, "args": {{"stream": 7, '
            f'"device": {rank}, "correlation": {40 + rank}, "grid": [1, 1, 1]}}}}, '
            f'{{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": {40 + rank}, "pid": 7, '
            f'"tid": 7, "ts": {at("1.001")}}}, '
            f'{{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": {40 + rank}, "pid": 0, '
            f'"tid": 7, "ts": {at("4.999")}, "bp": "e"}}]}}')


def test_epoch_scale_stamps_are_merged_to_the_ns_with_args_and_flows_kept():
    """Stamps like torch's (1733456789012345.678 µs: more digits than a float holds) come out
    exact to the ns; every arg the profiler wrote stays on its event (a kernel's stream, device,
    correlation); each launch keeps its flow arrow to its kernel, unique across ranks; and no
    rank is process 0."""
    from tplab.records.trace_merge import load_chrome, pid_of

    base = "1733456789012345.678"
    texts = {r: _gpu_export(r, base) for r in (0, 1)}
    as_float = json.loads(texts[0])["traceEvents"][2]["ts"]
    assert round(as_float * 1000) != 1733456789012345_678 + 4_999  # a float loses the ns
    caps = [capture_from_chrome(load_chrome(texts[r]), rank=r, anchors=[], host="h",
                                steps={"tp": {3: 50.0}}, device="cuda") for r in (0, 1)]
    kernel = next(e for e in caps[0]["events"] if e[0] == "kernel")
    assert caps[0]["ref_ns"] == 1733456789012345_678
    assert (kernel[2], kernel[3]) == (4_999, 30_123)
    merged = align(caps, {0: 0, 1: 0}, same_host=True)
    doc = json.loads(json.dumps(trace_document(merged)))
    assert check_trace(doc) == []
    assert {e["pid"] for e in doc["traceEvents"]} == {pid_of(0), pid_of(1)} == {1, 2}
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert [k["ts"] for k in kernels] == [4.999, 4.999] and kernels[0]["dur"] == 30.123
    assert kernels[1]["args"] == {"stream": 7, "device": 1, "correlation": 41, "grid": [1, 1, 1]}
    flows = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 4 and len({f["id"] for f in flows}) == 2
    assert {f["ts"] for f in flows} == {1.001, 4.999}
    assert next(f for f in flows if f["ph"] == "f")["bp"] == "e"

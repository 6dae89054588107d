"""Each rank's own trace: where it lies, and what HTA needs of it (held without installing HTA:
its loader reads ``distributedInfo.rank`` from every ``.json``/``.json.gz`` in the folder)."""

from __future__ import annotations

import gzip
import json

import pytest

from tplab.records import rank_traces
from tplab.records.rank_traces import (
    check_rank_trace,
    distributed_info,
    rank_of_name,
    rank_trace_path,
    read_rank_trace,
    unpack,
)


def _doc(rank: int = 1, world: int = 2, **over) -> dict:
    doc = {"distributedInfo": distributed_info("gloo", rank, world),
           "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9,
                            "ts": 1.0, "dur": 2.0, "args": {"External id": 3}}]}
    doc.update(over)
    return doc


def test_the_tp_ranks_lie_alone_in_their_folder_and_the_single_pass_apart():
    assert rank_trace_path(1) == "traces/rank1.pt.trace.json.gz"
    assert rank_trace_path(0, "single") == "traces/single/rank0.pt.trace.json.gz"
    assert rank_of_name("rank12.pt.trace.json.gz") == 12
    for name in ("rank1.json", "../rank1.pt.trace.json.gz", "rank99999.pt.trace.json.gz",
                 "rank1.pt.trace.json.gz/x", f"rank{rank_traces.MAX_RANKS}.pt.trace.json.gz"):
        assert rank_of_name(name) is None, name


def test_a_trace_names_its_rank_as_torch_profiler_does():
    info = distributed_info("nccl", 1, 2, 1, [{"pg_name": "0", "ranks": [0, 1]}], "2.21.5")
    assert info == {"backend": "nccl", "rank": 1, "world_size": 2, "pg_count": 1,
                    "pg_config": [{"pg_name": "0", "ranks": [0, 1]}], "nccl_version": "2.21.5"}
    assert check_rank_trace(_doc(), 1, 2) == []


def test_what_hta_cannot_read_is_named():
    no_info = _doc()
    del no_info["distributedInfo"]
    assert "no distributedInfo" in check_rank_trace(no_info, 1, 2)[0]
    assert "rank is 0, not 1" in check_rank_trace(_doc(rank=0), 1, 2)[0]
    assert "world_size" in check_rank_trace(_doc(world=4), 1, 2)[0]
    bare = _doc(traceEvents=[{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}])
    assert "args" in check_rank_trace(bare, 1, 2)[0]
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1,
              "args": {"correlation": 4, "device": 0}}
    assert "stream" in check_rank_trace(_doc(traceEvents=[kernel]), 1, 2)[0]
    flow = {"ph": "s", "cat": "ac2g", "id": 4, "ts": 1}
    events = _doc()["traceEvents"] + [flow]
    assert "flow" in check_rank_trace(_doc(traceEvents=events), 1, 2)[0]
    assert check_rank_trace(_doc(traceEvents=events + [dict(flow, ph="f")]), 1, 2) == []


def test_a_file_from_the_pod_is_read_within_its_bound():
    data = rank_traces.compress(json.dumps(_doc()).encode())
    assert data == rank_traces.compress(json.dumps(_doc()).encode())  # no time in the header
    assert read_rank_trace(data)["distributedInfo"]["rank"] == 1
    bomb = gzip.compress(b" " * (1 << 20))
    with pytest.raises(ValueError, match="more than"):
        unpack(bomb, limit=1000)
    with pytest.raises(ValueError, match="not a gzip"):
        read_rank_trace(b"{}")

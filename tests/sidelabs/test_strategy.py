"""The strategy chooser: each decision boundary (memory and topology) on both sides, the bytes
each strategy moves per step from the formulas, and MiniGPT-grammar's answer in step with the
survey's own figures. Standard library only (no torch): the shapes come from the shipped
checkpoint through the survey's reader."""

from __future__ import annotations

import pytest

from tplab.sidelabs import distributed_costs as dc
from tplab.sidelabs.strategy import Cluster, ModelSpec, choose, options, survey_models

GB = 10**9
#: fp32 AdamW: 4 + 4 + 8 = 16 bytes per parameter; 1e9 parameters = 16 GB of state; layers small
M = ModelSpec("m", 1e9, 4, 1024, 1024, 4, 4, 8)
LAYER = 12 * 1024**2 * 4


def pick(mem_gb: float, gpus: int = 2, nodes: int = 1, link: str = "nvlink", m: ModelSpec = M) -> str:
    return choose(m, Cluster(mem_gb, gpus, nodes, link)).strategy


def test_ddp_until_the_whole_state_stops_fitting_then_zero1() -> None:
    assert pick(16.0) == "DDP"
    assert pick(15.99) == "ZeRO-1"            # 8 GB weights+grads + 8/2 GB optimizer = 12 GB


def test_zero1_then_zero2_then_fsdp() -> None:
    assert pick(12.0) == "ZeRO-1"
    assert pick(11.99) == "ZeRO-2"            # 4 GB weights + (4 + 8)/2 GB = 10 GB
    assert pick(10.0) == "ZeRO-2"
    assert pick(9.99) == "FSDP"               # 16/2 GB + two gathered layers
    assert pick((8 * GB + 2 * LAYER) / GB) == "FSDP"


def test_past_fsdp_the_link_decides_between_tp_and_pp() -> None:
    mem = (8 * GB + LAYER) / GB               # the state splits in two, a gathered pair does not fit
    assert pick(mem, link="nvlink") == "TP=2"
    assert pick(mem, link="pcie") == "PP=2"
    assert pick(7.99) == "does not fit"


def test_more_gpus_move_every_boundary() -> None:
    assert pick(11.99, gpus=2) == "ZeRO-2"
    assert pick(11.99, gpus=8) == "ZeRO-1"    # 8 + 8/8 = 9 GB
    assert pick(15.99, gpus=1) == "does not fit"
    assert pick(16.0, gpus=1) == "one GPU"


def test_across_nodes_pipeline_stages_beat_sharding_over_the_network() -> None:
    big = survey_models(M)[-1]                # 70B
    assert big.name == "70B"
    assert pick(80, 8, 4, "nvlink", big) == "PP=4 x FSDP=8"
    assert pick(80, 32, 1, "nvlink", big) == "FSDP"  # the same 32 GPUs in one NVLink node
    assert pick(80, 8, 1, "nvlink", big) == "does not fit"
    # small enough for plain sharding: the network changes nothing when DDP fits
    assert pick(80, 8, 4, "pcie") == "DDP"


def test_bytes_per_step_follow_the_formulas() -> None:
    c = Cluster(80, 4, 1, "nvlink")
    o = options(M, c)
    grads = M.params * 4
    assert o["DDP"].wire_bytes_per_step == pytest.approx(2 * 3 / 4 * grads)
    assert o["ZeRO-1"].wire_bytes_per_step == o["ZeRO-2"].wire_bytes_per_step == \
        o["DDP"].wire_bytes_per_step
    assert o["FSDP"].wire_bytes_per_step == pytest.approx(1.5 * o["DDP"].wire_bytes_per_step)
    act = M.tokens_per_gpu * M.d_model * 4
    assert o["TP=4"].wire_bytes_per_step == pytest.approx(4 * M.n_layer * 2 * 3 / 4 * act)
    assert o["PP=4"].wire_bytes_per_step == pytest.approx(2 * act)
    assert o["FSDP"].memory_per_gpu == pytest.approx(16 * GB / 4 + 2 * LAYER)


def test_every_reason_is_one_sentence() -> None:
    for m in survey_models(M):
        for c in (Cluster(80, 2), Cluster(24, 2, 1, "pcie"), Cluster(80, 8, 4), Cluster(80, 1)):
            reason = choose(m, c).reason
            assert reason and ". " not in reason and not reason.endswith("."), reason


def test_minigpt_grammar_is_ddp_with_the_survey_figures() -> None:
    from tplab.sidelabs.model_shapes import read_model_shapes
    from tplab.home.paths import DEFAULT_CHECKPOINT
    shapes = read_model_shapes(DEFAULT_CHECKPOINT)
    ch = choose(dc.model_spec(shapes), dc.LAB_CLUSTER)
    assert ch.strategy == dc.choose(shapes) == "DDP"
    assert ch.options["DDP"].wire_bytes_per_step == dc.ddp_cost(shapes).wire_bytes_per_rank
    assert ch.options["FSDP"].wire_bytes_per_step == pytest.approx(
        dc.fsdp_cost(shapes).wire_bytes_per_rank)
    assert ch.options["DDP"].memory_per_gpu == dc.fsdp_cost(shapes).state_bytes


def test_a_bad_link_is_refused() -> None:
    with pytest.raises(ValueError, match="nvlink, pcie, network"):
        Cluster(80, 2, 1, "infiniband")

"""`tplab ddp`: two gloo ranks train MiniGPT-grammar, the loss falls, and every step's all-reduce is timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tplab.sidelabs.ddp_lab import AllReduceTimer, DDPSettings, run
from tplab.model.config import GPTConfig


@pytest.mark.slow
def test_two_gloo_ranks_loss_falls_and_allreduce_is_timed(tmp_path: Path) -> None:
    tiny = GPTConfig(vocab_size=640, block_size=48, n_layer=1, n_head=2, d_model=32, d_ff=64)
    s = DDPSettings(nproc=2, steps=40, batch_size=8, lr=1e-2, model=tiny.to_dict())
    r = run(tmp_path, s)
    assert r["loss_fell"] and r["loss_last"] < r["loss_first"] - 0.5, (r["loss_first"], r["loss_last"])
    assert r["params_in_sync"]
    assert len(r["ranks"]) == 2
    n_params = r["params"]
    for rank in r["ranks"]:
        recs = rank["records"]
        assert len(recs) == s.steps
        # every step all-reduced every gradient once, and that took time inside the step
        assert all(x["bytes"] == 4 * n_params for x in recs)
        assert all(0 < x["allreduce_ms"] < x["step_ms"] for x in recs)
    assert 0 < r["allreduce_share"] < 1
    saved = json.loads((tmp_path / "ddp-results.json").read_text())
    assert saved["loss_first"] == r["loss_first"]
    report = (tmp_path / "DDP_REPORT.md").read_text()
    assert "(falls)" in report and "of the step time" in report
    assert not list(tmp_path.glob(".rendezvous-*")) and not list(tmp_path.glob(".ddp-ranks*"))
    assert r["teardown"] == "clean"  # every rank left on its own, none stuck destroying its group

    # tplab compile --ddp-run quotes this run in DISTRIBUTED.md, for a checkpoint of this shape only
    from tplab.sidelabs import distributed_survey as survey
    from tplab.sidelabs.measured_runs import MeasuredRunError
    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.corpus import build_tokenizer
    from tplab.model.gpt import MiniGPT
    from tplab.home.paths import DEFAULT_CHECKPOINT

    ckpt = save_checkpoint(tmp_path / "tiny.pt", MiniGPT(tiny), build_tokenizer())
    page = survey.render_detail(survey.collect(ckpt, ddp_run=tmp_path))
    ddp_section = page.split(survey.SECTIONS[0])[1].split(survey.SECTIONS[1])[0]
    assert f"{r['allreduce_share']:.1%} of the step time" in ddp_section
    assert f"carrying {4 * n_params:,} B per step, as computed" in ddp_section
    assert str((tmp_path / "ddp-results.json").resolve()) in ddp_section and "UTC" in ddp_section
    assert f"{r['allreduce_share']:.1%} of a training step when measured here" in page
    with pytest.raises(MeasuredRunError, match="another shape"):
        survey.collect(DEFAULT_CHECKPOINT, ddp_run=tmp_path)


@pytest.mark.slow
def test_a_failing_rank_ends_the_lab_in_one_sentence_with_no_rank_left(tmp_path: Path) -> None:
    import multiprocessing

    from tplab.sidelabs.ddp_lab import DDPLabError
    tiny = GPTConfig(vocab_size=8, block_size=48, n_layer=1, n_head=2, d_model=32, d_ff=64)
    with pytest.raises(DDPLabError) as caught:
        run(tmp_path, DDPSettings(nproc=2, steps=4, batch_size=2, model=tiny.to_dict()))
    msg = str(caught.value)
    assert msg.startswith("rank ") and "vocab_size is 8" in msg and "every rank was stopped" in msg
    assert "\n" not in msg and "Traceback" not in msg  # one sentence, not a rank's traceback
    ranks = [p for p in multiprocessing.active_children() if "resource_tracker" not in p.name]
    assert ranks == []
    assert not list(tmp_path.glob(".rendezvous-*")) and not (tmp_path / "ddp-results.json").exists()


def test_timer_counts_overlapping_buckets_once() -> None:
    t = AllReduceTimer(world_size=2, intervals=[(0.0, 0.010), (0.005, 0.012), (0.020, 0.021)], buckets=3, bytes=12)
    ms, buckets, nbytes = t.take()
    assert abs(ms - 13.0) < 1e-9 and (buckets, nbytes) == (3, 12)
    assert t.take() == (0.0, 0, 0)


def test_ddp_command_rejects_one_rank(tmp_path: Path, capsys) -> None:
    from tplab.commands.main import main
    assert main(["ddp", "--nproc", "1", "--out", str(tmp_path)]) == 2
    assert "at least 2" in capsys.readouterr().err

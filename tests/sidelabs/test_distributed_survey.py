"""DISTRIBUTED.md: four sections, a three-sentence closing that picks DDP, every byte figure equal to
one computed here from the checkpoint's config with the architecture's own formulas, measured
figures quoted only from a run of the same model, and TP's collectives as a real 2-rank run counts them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.distributed import run_distributed
from tplab.sidelabs import distributed_survey as survey
from tplab.sidelabs.measured_runs import MeasuredRunError
from tplab.model.checkpoint import load_checkpoint, save_checkpoint
from tplab.model.config import GPTConfig
from tplab.model.gpt import MiniGPT
from tplab.home.paths import DEFAULT_CHECKPOINT

BYTE_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*) B\b")


def _checkpoint(path: Path, config: GPTConfig) -> Path:
    from tplab.model import corpus
    torch.manual_seed(0)
    return save_checkpoint(path, MiniGPT(config), corpus.build_tokenizer())


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another vocabulary and shape than the shipped model (d_ff is not 4·d_model either)."""
    cfg = GPTConfig(vocab_size=656, block_size=48, n_layer=2, n_head=2, d_model=32, d_ff=96)
    return _checkpoint(tmp_path_factory.mktemp("ckpt") / "other.pt", cfg)


def expected_bytes(checkpoint: Path) -> dict[str, int]:
    """The survey's byte figures, from the config and the dtype of the stored tensors alone."""
    ckpt = load_checkpoint(checkpoint)
    c = ckpt.config
    assert {t.dtype for t in ckpt.state_dict.values()} == {torch.float32}
    b = torch.float32.itemsize
    d, L, V, ff, T = c.d_model, c.n_layer, c.vocab_size, c.d_ff, c.block_size
    block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (d * ff + ff) + (ff * d + d)  # ln, qkv, proj, ln, up, down
    root = V * d + T * d + 2 * d + V * d  # tok_emb, pos_emb, ln_f, lm_head (no bias)
    params = L * block + root
    assert params == sum(t.numel() for t in ckpt.state_dict.values())
    ag = 2 * L * block * b + root * b     # blocks gathered before forward and backward, root once
    rs = params * b
    micro = 4 * T * d * b                 # 16 sequences in 4 micro-batches, block_size tokens each
    return {
        "dtype": b, "grad": params * b, "block": block * b, "block_per_step": 3 * block * b,
        "root": root * b, "ag": ag, "rs": rs, "fsdp_wire": (ag + rs) // 2,
        "state": 4 * params * b, "state_per_rank": 2 * params * b,
        "tp_ar": d * b, "tp_ar_all": (2 * L + 1) * d * b, "tp_ag": V * b,
        "tp_token": (2 * L + 1) * d * b + V * b,
        "pp_micro": micro, "pp_step": 2 * 4 * micro, "pp_token": d * b,
    }


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^(## .+)$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.parametrize("which", ["shipped", "other"])
def test_every_byte_figure_matches_the_checkpoint_shapes(which: str, other_checkpoint: Path) -> None:
    ckpt = DEFAULT_CHECKPOINT if which == "shipped" else other_checkpoint
    want = expected_bytes(ckpt)
    text = survey.render_detail(survey.collect(ckpt))

    found = {int(x.replace(",", "")) for x in BYTE_FIGURE.findall(text)}
    assert found, text
    assert found <= set(want.values()), (found - set(want.values()), want)
    missing = {k: v for k, v in want.items() if v not in found}
    assert not missing, missing  # and every pattern's figure is there

    secs = _sections(text)
    assert list(secs)[:4] == list(survey.SECTIONS) and list(secs)[4] == survey.CLOSING
    for title, key in zip(survey.SECTIONS, ("grad", "block_per_step", "tp_token", "pp_micro")):
        body = secs[title]
        assert f"{want[key]:,} B" in body, (title, key)
        assert body.count(".") >= 2  # at least two sentences of prose per pattern
    closing = secs[survey.CLOSING].strip().split("\n\n")[0]
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", closing)
    assert len(sentences) == 3, sentences
    assert sentences[0].startswith("I would pick DDP") and f"{want['grad']:,} B" in sentences[0]
    assert "d_model" in sentences[2]  # says from which size the answer changes
    # nothing was measured, and the page says so instead of inventing a figure
    assert secs[survey.SECTIONS[0]].count(survey.NOT_MEASURED) == 1
    assert "%" not in secs[survey.SECTIONS[0]] and " ms" not in secs[survey.SECTIONS[2]]
    if which == "other":
        assert "d_ff = 4·d_model; this checkpoint has d_ff 96" in text


def test_the_page_is_about_a_page_with_its_detail_beside_it() -> None:
    """The compile lab's sheet asks for ~1 page (~500 words, four sections of ~125): the page keeps each
    pattern's prose and one line of this model's figures, the three closing sentences, and links
    the detail, whose figures it quotes."""
    data = survey.collect(DEFAULT_CHECKPOINT)
    page, detail = survey.render(data), survey.render_detail(data)
    assert 450 <= len(page.split()) <= 720, len(page.split())
    assert len(detail.split()) > 2 * len(page.split())
    assert f"]({survey.DETAIL_FILE})" in page and f"]({survey.FILE})" in detail
    secs, detail_secs = _sections(page), _sections(detail)
    assert list(secs) == [*survey.SECTIONS, survey.CLOSING]
    for title in survey.SECTIONS:
        line = secs[title].strip().split("\n\n")[-1]
        assert line.startswith("For MiniGPT-grammar:")
        assert len(secs[title].split()) <= 150, title
        for figure in BYTE_FIGURE.findall(line):  # every figure of the page is the detail's
            assert figure in detail, (title, figure)
    assert secs[survey.CLOSING].strip() == detail_secs[survey.CLOSING].strip()


def _tp_decode_collectives(rank: int, world_size: int, checkpoint: str) -> dict:
    from tplab.model.checkpoint import build_tp, load_checkpoint
    from tplab.tp import comm_timing

    model = build_tp(load_checkpoint(checkpoint))
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache)
        with comm_timing() as t:
            model(torch.tensor([[4]]), cache)
    return {"calls": t.calls, "bytes": t.bytes, "by_op": dict(t.by_op)}


@pytest.mark.slow  # spawns gloo ranks
def test_tp_collectives_are_what_a_two_rank_decode_step_issues(other_checkpoint: Path) -> None:
    shapes = survey.read_model_shapes(other_checkpoint)
    got = run_distributed(_tp_decode_collectives, 2, str(other_checkpoint), timeout_s=120)[0]
    ops = [c.op for c in shapes.tp_collectives]
    assert got["calls"] == len(ops)
    assert got["by_op"] == {op: ops.count(op) for op in set(ops)}
    assert got["bytes"] == sum(c.elems_per_token for c in shapes.tp_collectives) * shapes.bytes_per_elem


def _tp_results(model: dict, **over: object) -> dict:
    """A results.json as `tplab local` writes it (only the fields the survey reads, plus the schema)."""
    r = {"schema": 1, "outputs_match": True, "world_size": 2, "backend": "gloo", "device_type": "cpu",
         "env": {"device_names": ["cpu"]}, "config": {"compile": False, "instrumented_prompts": 2},
         "model": model, "allreduce_ms_per_token": 1.234, "allreduce_calls_per_token": 2 * model["n_layer"] + 2,
         "allreduce_bytes_per_call": ((2 * model["n_layer"] + 1) * model["d_model"] * 4 + model["vocab_size"] * 4)
         / (2 * model["n_layer"] + 2),
         "tp_per_token_ms": 5.0, "single_per_token_ms": 2.5, "tp": {"instrumented_per_token_ms": {"mean": 6.17}}, "sweep": {"points": []}, "started_at": 1.8e9}
    r.update(over)
    return r


def test_a_tp_run_is_quoted_with_its_source_and_a_failed_one_refused(tmp_path: Path) -> None:
    cfg = GPTConfig(vocab_size=640, block_size=48, n_layer=1, n_head=2, d_model=32, d_ff=64)
    ckpt = _checkpoint(tmp_path / "tiny.pt", cfg)
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "results.json").write_text(json.dumps(_tp_results(cfg.to_dict())))

    text = survey.render_detail(survey.collect(ckpt, tp_run=tmp_path / "local"))
    want = expected_bytes(ckpt)
    found = {int(x.replace(",", "")) for x in BYTE_FIGURE.findall(text)}
    assert found <= set(want.values()), found - set(want.values())
    secs = _sections(text)
    tp_s = secs[survey.SECTIONS[2]]
    assert "1.234 ms per token**, 20% of the 6.170 ms token" in tp_s and "0.50×" in tp_s and "as computed" in tp_s
    assert str((tmp_path / "local" / "results.json").resolve()) in tp_s and "2027-01-15" in tp_s
    assert survey.NOT_MEASURED not in tp_s and "measured here: 20% of a TP token" in secs[survey.CLOSING]
    assert "`cpu-gloo`: " in tp_s and "[cpu-gloo calibrated from this run" in tp_s
    # DDP, FSDP and PP were not measured by anything
    for title in (survey.SECTIONS[0], survey.SECTIONS[1], survey.SECTIONS[3]):
        assert survey.NOT_MEASURED in secs[title]

    # a run whose TP outputs did not match is not quoted, nor is one of another model
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text(json.dumps(_tp_results(cfg.to_dict(), outputs_match=False)))
    with pytest.raises(MeasuredRunError, match="did not match"):
        survey.collect(ckpt, tp_run=tmp_path / "bad")
    with pytest.raises(MeasuredRunError, match="another shape"):
        survey.collect(DEFAULT_CHECKPOINT, tp_run=tmp_path / "local")


def test_compile_refuses_a_run_of_another_model_before_compiling(tmp_path: Path, capsys) -> None:
    from tplab.commands.main import main

    other = GPTConfig(vocab_size=640, block_size=48, n_layer=1, n_head=2, d_model=32, d_ff=64).to_dict()
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "results.json").write_text(json.dumps(_tp_results(other)))
    out = tmp_path / "out"
    assert main(["compile", "--out", str(out), "--tp-run", str(tmp_path / "local")]) == 2
    err = capsys.readouterr().err
    assert "another shape" in err and "d_model 32 vs" in err
    assert not out.exists()
    assert main(["compile", "--out", str(out), "--ddp-run", str(tmp_path / "nowhere")]) == 2
    assert "no ddp-results.json there" in capsys.readouterr().err

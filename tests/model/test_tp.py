"""TP build == single-device build: logits and greedy tokens on every shipped prompt (which ends
its sentence and then keeps emitting <eos>), on 2 gloo ranks; and `generate --tp 2`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
import torch

from tests.distributed import run_distributed
from tests.model.test_shipped import SHEET_CASES
from tplab.commands import generate
from tplab.model.checkpoint import build_single, build_tp, load_checkpoint
from tplab.model.decode import greedy_decode, greedy_decode_batch
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS, REPO_ROOT

NEW_TOKENS = 100


def _prompts() -> list[str]:
    return [line.strip() for line in DEFAULT_PROMPTS.read_text().splitlines() if line.strip()]


def _decode_all(model, ids: list[list[int]]) -> list[list[int]]:
    """Greedy tokens for every prompt; prompts of equal length decode as one batch (one decode loop
    per prompt length instead of one per prompt: the tokens are the same, the test is faster)."""
    tokens: dict[int, list[int]] = {}
    for length in sorted({len(p) for p in ids}):
        group = [i for i, p in enumerate(ids) if len(p) == length]
        out = greedy_decode_batch(model, torch.tensor([ids[i] for i in group]), NEW_TOKENS)
        tokens.update(zip(group, out.tolist()))
    return [tokens[i] for i in range(len(ids))]


def _tp_decode(rank: int, world_size: int, checkpoint: str, prompts: list[str],
               probe_logits: torch.Tensor) -> dict:
    """In each rank: the TP build's logits on the first prompt, its greedy tokens on every prompt,
    and the first prompt once more through ``greedy_decode``, the loop the job times."""
    ckpt = load_checkpoint(checkpoint)
    tp = build_tp(ckpt)
    assert tp.blocks[0].attn.n_head == ckpt.config.n_head // world_size
    assert tp.tok_emb.weight.shape[0] == ckpt.config.vocab_size // world_size
    ids = [ckpt.tokenizer.prompt_ids(text) for text in prompts]
    with torch.no_grad():
        max_diff = (tp(torch.tensor([ids[0]])) - probe_logits).abs().max().item()
    return {"max_diff": max_diff, "tokens": _decode_all(tp, ids), "first_loop": greedy_decode(tp, ids[0], NEW_TOKENS)}


@pytest.mark.slow  # spawns gloo ranks
def test_every_shipped_prompt_ends_keeps_emitting_eos_and_decodes_the_same_under_tp():
    """The lab's decode of every shipped prompt (100 tokens, no stop): the sentence ends, then
    only <eos>, and TP gives the single device's tokens. Irreducible: the TP ranks decode every
    prompt in full over gloo, ~600 steps of 14 collectives each."""
    torch.set_num_threads(1)
    prompts = _prompts()
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    single = build_single(ckpt)
    ids = [ckpt.tokenizer.prompt_ids(text) for text in prompts]
    with torch.no_grad():
        probe = single(torch.tensor([ids[0]]))
    expected = _decode_all(single, ids)
    assert greedy_decode(single, ids[0], NEW_TOKENS) == expected[0]
    # -- from test_every_shipped_prompt_ends_and_the_lab_decode_keeps_emitting_eos
    tok = ckpt.tokenizer
    assert len(prompts) >= 10 and set(SHEET_CASES) <= set(prompts)
    for text, out in zip(prompts, expected):
        end = out.index(tok.eos_id)
        assert end <= len(tok.encode(text)) + 3 and set(out[end:]) == {tok.eos_id}, text
        assert tok.unk_id not in out[:end], text
    results = run_distributed(_tp_decode, 2, str(DEFAULT_CHECKPOINT), prompts, probe, timeout_s=280)
    for rank, res in enumerate(results):
        assert res["max_diff"] < 1e-3, f"rank {rank}: TP logits differ by {res['max_diff']}"
        assert res["first_loop"] == expected[0]
        for text, tp_ids, single_ids in zip(prompts, res["tokens"], expected):
            assert len(tp_ids) == NEW_TOKENS
            assert tp_ids == single_ids, f"rank {rank}: {text!r} decodes differently under TP"


@pytest.mark.slow
def test_generate_cli_with_tp_2_prints_the_same_as_without(capsys):
    """One torchrun launch; the single-device run goes through the same command in-process (cheaper)."""
    text = "she dont like apples"
    parser = argparse.ArgumentParser()
    generate.add_arguments(parser)
    assert generate.main(parser.parse_args([text])) == 0
    single_out = capsys.readouterr().out
    env = dict(os.environ, OMP_NUM_THREADS="1")
    tp = subprocess.run([sys.executable, "-m", "tplab.commands.main", "generate", "--tp", "2", text],
                        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=240)
    assert tp.returncode == 0, tp.stderr
    assert tp.stdout == single_out == "she doesn't like apples\n"

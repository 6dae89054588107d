"""The shipped checkpoint: loads strictly, corrects the seed's prompts, meets the accuracy bar."""

from __future__ import annotations

import torch

from tplab.model.checkpoint import build_single, load_checkpoint
from tplab.model.corpus import held_out
from tplab.model.decode import greedy_decode
from tplab.model.evaluate import evaluate
from tplab.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS

SEED_CASES = {
    "he goed to school": "he went to school",
    "i has eat": "i have eaten",
    "she dont like apples": "she doesn't like apples",
}


def test_shipped_checkpoint_corrects_the_seed_prompts():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    model = build_single(ckpt)
    tok = ckpt.tokenizer
    for bad, good in SEED_CASES.items():
        out = greedy_decode(model, tok.prompt_ids(bad), 40, eos_id=tok.eos_id)
        assert out[-1] == tok.eos_id and tok.decode(out) == good


def test_shipped_prompts_include_the_seed_and_are_in_vocabulary():
    prompts = [line.strip() for line in DEFAULT_PROMPTS.read_text().splitlines() if line.strip()]
    assert len(prompts) >= 10 and set(SEED_CASES) <= set(prompts)
    tok = load_checkpoint(DEFAULT_CHECKPOINT).tokenizer
    assert all(not tok.unknown_words(p) for p in prompts)


def test_shipped_checkpoint_meets_the_held_out_bar():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    assert ckpt.meta["held_out_accuracy"] >= 0.90
    assert 300_000 < sum(t.numel() for t in ckpt.state_dict.values()) < 700_000
    report = evaluate(build_single(ckpt), ckpt.tokenizer, held_out(150))  # a quick re-check
    assert report.accuracy >= 0.90, report.failures[:3]

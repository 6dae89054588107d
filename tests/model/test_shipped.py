"""The shipped checkpoint: loads strictly, corrects the lab sheet's prompts, carries unknown words through,
stops at the end of the sentence, meets the accuracy bars. (That the lab's 100-token decode of
every shipped prompt ends its sentence and then only emits <eos> is checked beside TP's decode of
the same prompts, in test_tp.py.)"""

from __future__ import annotations

import torch

from tplab.model.checkpoint import build_single, load_checkpoint
from tplab.model.corpus import held_out
from tplab.model.decode import greedy_decode
from tplab.model.evaluate import evaluate
from tplab.home.paths import DEFAULT_CHECKPOINT

SHEET_CASES = {
    "he goed to school": "he went to school",
    "i has eat": "i have eaten",
    "she dont like apples": "she doesn't like apples",
}
# names, places, animals and nouns the vocabulary lacks, with plural and singular subjects
UNKNOWN_WORD_CASES = {
    "ingrid dont like mushrooms": "ingrid doesn't like mushrooms",
    "the otters was hungry": "the otters were hungry",
    "marta buyed a new kayak": "marta bought a new kayak",
    "i saw a iguana in cairo": "i saw an iguana in cairo",
}


def _correct(model, tok, text: str) -> str:
    out = greedy_decode(model, tok.prompt_ids(text), 40, eos_id=tok.eos_id)
    assert out[-1] == tok.eos_id, f"{text!r}: no end of sentence within 40 tokens"
    return tok.decode(out, tok.slots(text))


def test_shipped_checkpoint_corrects_the_sheet_prompts_and_carries_unknown_words():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    model, tok = build_single(ckpt), ckpt.tokenizer
    assert tok.n_slots == 8 and ckpt.config.vocab_size % 8 == 0
    for bad, good in {**SHEET_CASES, **UNKNOWN_WORD_CASES}.items():
        assert _correct(model, tok, bad) == good


def test_shipped_checkpoint_meets_the_bars_and_says_how_it_was_trained():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    assert ckpt.meta["held_out_accuracy"] >= 0.95
    assert ckpt.meta["outside_set"]["total"] >= 30 and ckpt.meta["outside_set"]["accuracy"] >= 0.75
    assert "CPU-s per thread" in ckpt.meta["trained_on"]
    assert 300_000 < sum(t.numel() for t in ckpt.state_dict.values()) < 700_000
    report = evaluate(build_single(ckpt), ckpt.tokenizer, held_out(150))  # a quick re-check
    assert report.accuracy >= 0.90, report.failures[:3]

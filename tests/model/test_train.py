"""Training data layout (loss only after <sep>, <eos> padding as targets) and a tiny training run."""

from __future__ import annotations

import torch

from tplab.model import corpus
from tplab.model.checkpoint import load_checkpoint, save_checkpoint
from tplab.model.config import GPTConfig
from tplab.model.train import IGNORE, encode_example, lr_at, make_batch, permute_slots, train


def test_make_batch_masks_the_prompt_and_pads_with_eos_targets():
    tok = corpus.build_tokenizer()
    ex = corpus.Example(bad="i has eat", good="i have eaten", kind="perfect")
    x, y = make_batch(tok, [ex], length=12)
    prompt = tok.prompt_ids("i has eat")  # <bos> i has eat <sep>
    assert x[0, :5].tolist() == prompt
    assert y[0, :4].tolist() == [IGNORE] * 4  # nothing before <sep> is a target
    assert y[0, 4:8].tolist() == tok.encode("i have eaten") + [tok.eos_id]
    assert y[0, 8:].tolist() == [tok.eos_id] * 4  # after the sentence: keep predicting <eos>


def test_unknown_words_are_placeholders_on_both_sides_of_a_training_sequence():
    tok = corpus.build_tokenizer()
    ex = corpus.Example(bad="the zorbles was late in quito", good="the zorbles were late in quito", kind="agreement")
    seq, sep = encode_example(tok, ex)
    words = [tok.vocab[i] for i in seq]
    assert words == ["<bos>", "the", "<w1>", "<+s>", "was", "late", "in", "<w2>", "<sep>",
                     "the", "<w1>", "<+s>", "were", "late", "in", "<w2>", "<eos>"]
    assert sep == 8


def test_permuting_slots_renumbers_both_sides_alike_and_keeps_the_vowel_mark():
    import random

    tok = corpus.build_tokenizer()
    ex = corpus.Example(bad="me saw an okapi near lima", good="i saw an okapi near lima", kind="pronoun_case")
    seq, _ = encode_example(tok, ex)
    seen: set[tuple[int, ...]] = set()
    for seed in range(30):
        out = permute_slots(tok, seq, random.Random(seed))
        marks = [tok.placeholder(i) for i in out]
        slots = [m for m in marks if m is not None]
        assert [m is None for m in marks] == [tok.placeholder(i) is None for i in seq]  # same places
        assert slots[0] == slots[2] and slots[1] == slots[3] and slots[0][0] != slots[1][0]
        assert slots[0][1] is True and slots[1][1] is False  # okapi stays vowel-initial
        seen.add((slots[0][0], slots[1][0]))
    assert len(seen) > 10  # every slot gets trained, not only <w1> and <w2>


def test_lr_schedule_warms_up_and_decays():
    assert lr_at(0.0, 1.0) == 0.0
    assert lr_at(0.03, 1.0) > 0.99
    assert lr_at(1.0, 1.0) < 0.06


def test_tiny_training_run_lowers_the_loss(tmp_path):
    config = GPTConfig(n_layer=1, block_size=48)
    lines: list[str] = []
    result = train(config, steps=40, minutes=2.0, batch_size=16, lr=5e-3, long_every=0, threads=1,
                   eval_examples=10, log=lines.append)
    assert result.meta["steps"] == 40 and result.report.total == 10
    assert result.meta["first_loss"] > 5.5  # about ln(640) ≈ 6.5 at the start
    assert result.meta["last_loss"] < result.meta["first_loss"] - 2.0
    assert isinstance(result.meta["torch"], str)  # weights_only loading rejects TorchVersion objects
    assert result.meta["outside_set"]["total"] >= 30 and "threads(1)" in result.meta["trained_on"]
    assert torch.isfinite(next(result.model.parameters())).all()
    path = save_checkpoint(tmp_path / "tiny.pt", result.model, result.tokenizer, result.meta)
    assert load_checkpoint(path).meta["steps"] == 40  # the whole meta loads with weights_only=True

"""Placeholders for unknown words: the plural rule, the tokenizer's slots, and the round trip."""

from __future__ import annotations

import pytest

from tplab.model.corpus import build_tokenizer
from tplab.model.placeholders import plural_stems, pluralize, split_unknown
from tplab.model.tokenizer import Tokenizer


def test_pluralize_and_plural_stems_agree():
    assert [pluralize(w) for w in ("giraffe", "fox", "city", "day", "church", "bus")] == \
        ["giraffes", "foxes", "cities", "days", "churches", "buses"]
    assert [plural_stems(w)[0] for w in ("giraffes", "foxes", "cities", "churches", "houses", "reaches")] == \
        ["giraffe", "fox", "city", "church", "house", "reach"]
    for plural in ("giraffes", "foxes", "cities", "days", "churches", "buses", "carlos"):
        stems = plural_stems(plural)
        assert stems and all(pluralize(s) == plural for s in stems)
    for word in ("glass", "virus", "tennis", "kevin's", "madrid", "is"):
        assert plural_stems(word) == [] and split_unknown(word) == (word, False)


def test_unknown_words_become_numbered_placeholders_and_come_back():
    tok = build_tokenizer()
    text = "carla saw four giraffes and an ostrich in nairobi"
    slots = tok.slots(text)
    assert slots == ["carla", "giraffe", "ostrich", "nairobi"]
    ids = tok.encode(text)
    assert tok.unk_id not in ids
    words = [tok.vocab[i] for i in ids]
    assert words == ["<w1>", "saw", "four", "<w2>", "<+s>", "and", "an", "<w3:v>", "in", "<w4>"]
    assert tok.decode(ids, slots) == text


def test_a_correction_may_pluralize_an_unknown_noun_of_the_input():
    tok = build_tokenizer()
    slots = tok.slots("we saw four okapi near lagos")
    target = tok.encode("we saw four okapis near lagos", slots)
    assert [tok.vocab[i] for i in target][3:5] == ["<w1:v>", "<+s>"]
    assert tok.decode(target, slots) == "we saw four okapis near lagos"
    # a word the input did not have has no slot: it cannot be produced
    assert tok.encode("we saw a zebra", slots)[-1] == tok.unk_id


def test_more_unknown_words_than_slots_read_as_unk_and_decode_without_slots_says_so():
    tok = build_tokenizer()
    names = ["qa", "qb", "qc", "qd", "qe", "qf", "qg", "qh", "qi"]
    ids = tok.encode(" ".join(names))
    assert ids[: tok.n_slots] == [tok.placeholder_id(k, False) for k in range(tok.n_slots)]
    assert ids[tok.n_slots:] == [tok.unk_id]
    assert tok.decode(ids[:2]) == "<unk> <unk>"  # no slots given: the words are not invented


def test_placeholder_vocabulary_is_checked_and_serialised():
    tok = Tokenizer.build(["cat", "sat"], n_slots=2)
    assert tok.vocab[5:] == ["<+s>", "<w1>", "<w1:v>", "<w2>", "<w2:v>", "cat", "sat"]
    assert tok.n_slots == 2 and Tokenizer.from_dict(tok.to_dict()).vocab == tok.vocab
    assert tok.placeholder(tok.placeholder_id(1, True)) == (1, True)
    with pytest.raises(ValueError, match="placeholders must be"):
        Tokenizer(tok.vocab[:5] + ["<w1>", "<w1:v>", "cat"])  # no <+s>
    with pytest.raises(ValueError):
        tok.placeholder_id(2, False)


def test_a_vocabulary_without_placeholders_reads_unknown_words_as_unk():
    tok = Tokenizer.build(["he", "went", "to"])
    assert tok.n_slots == 0 and tok.plural_id is None
    assert tok.encode("he went to lima") == tok.encode("he went to") + [tok.unk_id]
    assert tok.decode(tok.encode("he went to lima"), ["lima"]) == "he went to <unk>"

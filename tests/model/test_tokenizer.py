"""Word tokenizer: splitting, round trip, specials, unknown words, serialisation."""

from __future__ import annotations

import pytest

from tplab.model.corpus import build_tokenizer
from tplab.model.tokenizer import SPECIALS, Tokenizer, split_words


def test_split_keeps_apostrophes_and_separates_punctuation():
    assert split_words("She DOESN'T like apples.") == ["she", "doesn't", "like", "apples", "."]


def test_accented_letters_stay_in_their_word_and_travel_as_one_unknown_word():
    """Letters of any script are word letters (an accent typed as a combining mark too), so a
    name or place the model does not know is one placeholder, written back whole."""
    assert split_words("Josè dont like Zoë's café in München!") == [
        "josè", "dont", "like", "zoë's", "café", "in", "münchen", "!"]
    assert split_words("jose\u0301 met the \u00e9lan") == ["josé", "met", "the", "élan"]
    assert split_words("Παύλος goed to 東京") == ["παύλος", "goed", "to", "東京"]
    tok = build_tokenizer()
    text = "émile goed to münchen with an élan"
    assert tok.unknown_words(text) == ["émile", "münchen", "élan"]
    ids = tok.encode(text)
    assert ids[0] == tok.placeholder_id(0, True)  # é is a vowel: "an émile" stays possible
    assert tok.decode(ids, tok.slots(text)) == "émile goed to münchen with an élan"


def test_round_trip_of_corpus_sentences():
    tok = build_tokenizer()
    for text in ["he went to school", "she doesn't like apples.", "i have eaten"]:
        ids = tok.encode(text)
        assert tok.unk_id not in ids
        assert tok.decode(ids) == text


def test_prompt_ids_and_decode_stops_at_eos():
    tok = build_tokenizer()
    ids = tok.prompt_ids("i has eat")
    assert ids[0] == tok.bos_id and ids[-1] == tok.sep_id and len(ids) == 5
    body = tok.encode("i have eaten")
    assert tok.decode(body + [tok.eos_id] + tok.encode("junk words")) == "i have eaten"


def test_unknown_words_are_reported_and_become_placeholders():
    tok = build_tokenizer()
    ids = tok.encode("he goed to zanzibar")
    assert ids[-1] == tok.placeholder_id(0, False) and tok.unk_id not in ids
    assert tok.unknown_words("he goed to zanzibar zanzibar qux") == ["zanzibar", "qux"]
    assert tok.decode(ids, tok.slots("he goed to zanzibar")) == "he goed to zanzibar"


def test_vocabulary_is_deterministic_and_serialisable():
    a, b = build_tokenizer(), build_tokenizer()
    assert a.vocab == b.vocab and tuple(a.vocab[:5]) == SPECIALS
    assert Tokenizer.from_dict(a.to_dict()).vocab == a.vocab
    with pytest.raises(ValueError):
        Tokenizer.from_dict({"kind": "bpe", "vocab": a.vocab})
    with pytest.raises(ValueError):
        Tokenizer(["a", "b"])

"""The synthetic corpus: deterministic, every class present, and a held-out split never trained on."""

from __future__ import annotations

import itertools
from collections import Counter

from tplab.model import corpus
from tplab.model.tokenizer import split_words


def _train(n: int, seed: int = 0) -> list[corpus.Example]:
    return list(itertools.islice(corpus.train_stream(seed), n))


def test_streams_and_split_are_deterministic():
    assert _train(300) == _train(300)
    assert _train(50, seed=1) != _train(50, seed=0)
    assert corpus.held_out(200) == corpus.held_out(200)


def test_held_out_is_disjoint_from_training():
    held = corpus.held_out(600)
    assert len({(e.bad, e.good) for e in held}) == 600
    assert all(corpus.is_held_out(e.good) for e in held)
    train = _train(20000)
    assert not any(corpus.is_held_out(e.good) for e in train)
    held_goods = {e.good for e in held}
    assert not held_goods & {e.good for e in train}
    assert not {(e.bad, e.good) for e in held} & {(e.bad, e.good) for e in train}


def test_all_error_classes_and_copies_are_present():
    examples = _train(3000)
    kinds = Counter(e.kind for e in examples)
    assert set(kinds) == set(corpus.KINDS) and len(corpus.KINDS) >= 7
    for e in examples:
        if e.kind == "correct":
            assert e.bad == e.good
        else:
            assert e.bad != e.good, e


def test_seed_cases_are_in_the_grammar():
    rng_examples = _train(60000)
    pairs = {(e.bad, e.good) for e in rng_examples}
    kinds = {e.kind for e in rng_examples if e.bad.startswith("he goed ")}
    assert kinds == {"irregular_past"}
    assert any(b.startswith("i has ") and g.startswith("i have ") for b, g in pairs)
    assert any(b.startswith("she dont like") and g.startswith("she doesn't like") for b, g in pairs)


def test_every_word_is_in_the_vocabulary_and_corrections_are_a_function():
    tok = corpus.build_tokenizer()
    assert len(tok) <= 600
    words = set(tok.vocab)
    target: dict[str, str] = {}
    for e in _train(20000) + corpus.held_out(600):
        assert set(split_words(e.bad)) <= words and set(split_words(e.good)) <= words, e
        assert target.setdefault(e.bad, e.good) == e.good, f"{e.bad!r} has two corrections"

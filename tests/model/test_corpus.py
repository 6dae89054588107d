"""The synthetic corpus: deterministic, every class present, and a held-out split never trained on."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

import pytest

from tplab.model import corpus
from tplab.model.lexicon import NOUNS, PL_NPS, THINGS_COMPARED_PL, all_verbs, lexicon, participle, past, third_sg
from tplab.model.tokenizer import normalize

LEXICON = set(lexicon())
SLOW = pytest.mark.slow


#: seed -> (the examples generated so far, the stream they came from): each is generated once
#: per test session and the tests share them; a test asking for more extends the same stream
_STREAMS: dict[int, tuple[list[corpus.Example], Iterator[corpus.Example]]] = {}


def _train(n: int, seed: int = 0) -> list[corpus.Example]:
    """The first ``n`` training examples of ``seed``'s stream (only as many as asked are made)."""
    got, stream = _STREAMS.setdefault(seed, ([], corpus.train_stream(seed)))
    if n > len(got):
        got.extend(itertools.islice(stream, n - len(got)))
    return got[:n]


def test_streams_and_split_are_deterministic():
    fresh = list(itertools.islice(corpus.train_stream(0), 300))
    assert fresh == _train(300)
    assert list(itertools.islice(corpus.train_stream(1), 50)) != fresh[:50]
    assert corpus.held_out(200) == corpus.held_out(200)


@SLOW  # tens of thousands of generated examples
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


@SLOW  # tens of thousands of generated examples
def test_the_lab_sheets_cases_are_in_the_grammar():
    rng_examples = _train(40000)
    pairs = {(e.bad, e.good) for e in rng_examples}
    kinds = {e.kind for e in rng_examples if e.bad.startswith("he goed ")}
    assert kinds == {"irregular_past"}
    assert any(b.startswith("i has ") and g.startswith("i have ") for b, g in pairs)
    assert any(b.startswith("she dont ") and g.startswith("she doesn't ") for b, g in pairs)
    assert any(" dont like" in b and " doesn't like" in g for b, g in pairs)


@SLOW  # tens of thousands of generated examples
def test_every_word_is_in_the_vocabulary_or_carried_by_a_placeholder_and_corrections_are_a_function():
    tok = corpus.build_tokenizer()
    assert len(tok) <= 640 and tok.n_slots == corpus.N_SLOTS
    target: dict[str, str] = {}
    with_unknown = 0
    for e in _train(20000) + corpus.held_out(600):
        slots = tok.slots(e.bad)
        assert len(slots) <= tok.n_slots, e
        assert tok.unk_id not in tok.encode(e.bad, slots) and tok.unk_id not in tok.encode(e.good, slots), e
        assert tok.decode(tok.encode(e.good, slots), slots) == normalize(e.good)
        with_unknown += bool(slots)
        assert target.setdefault(e.bad, e.good) == e.good, f"{e.bad!r} has two corrections"
    assert 0.3 < with_unknown / 20600 < 0.7


def _plural_subject(sentence: str) -> bool:
    words = sentence.split()
    heads = {NOUNS[n][0] for n in NOUNS} | {np.split()[-1] for np in PL_NPS + THINGS_COMPARED_PL}
    second = words[1] if len(words) > 1 else ""
    return (words[0] in ("we", "they") or "and" in words[1:4]
            or second in heads or (second not in LEXICON and second.endswith("s")))


@SLOW  # tens of thousands of generated examples
def test_plural_subjects_appear_with_every_error_class_and_only_the_verb_is_fixed():
    examples = _train(20000)
    for kind in corpus.KINDS:
        subjects = [_plural_subject(e.good) for e in examples if e.kind == kind]
        assert 0.1 < sum(subjects) / len(subjects) < 0.9, kind
    verb_forms = {f(v) for v in all_verbs() for f in (lambda v: v, third_sg, past, participle)}
    verb_forms |= {"am", "is", "are", "was", "were", "don't", "doesn't", "dont", "doesnt"}
    lex = set(lexicon())
    for e in examples:
        if e.kind == "agreement":  # one word differs, and it is the verb: the subject is never changed
            diff = [(b, g) for b, g in zip(e.bad.split(), e.good.split()) if b != g]
            assert len(e.bad.split()) == len(e.good.split()) and len(diff) == 1, e
            b, g = diff[0]
            if b in lex or g in lex:  # a lexicon verb, in two of its forms
                assert b in verb_forms and g in verb_forms, e
            else:  # a regular verb swapped for an invented one: base form and its -s form
                assert third_sg(b) == g or third_sg(g) == b, e


@SLOW  # tens of thousands of generated examples
def test_swapped_words_keep_what_the_grammar_needs():
    """Invented words keep a/an and number: the corrections of swapped pairs are still right."""
    tok = corpus.build_tokenizer()
    seen_an = seen_plural_fix = 0
    for e in _train(20000):
        words = e.good.split()
        for art, nxt in zip(words, words[1:]):
            if art in ("a", "an") and nxt not in LEXICON:
                assert (art == "an") == (nxt[0] in "aeiou"), e
                seen_an += art == "an"
        if e.kind == "plural":
            ids = [tok.vocab[i] for i in tok.encode(e.good, tok.slots(e.bad))]
            seen_plural_fix += "<+s>" in ids and "<+s>" not in [tok.vocab[i] for i in tok.encode(e.bad)]
    assert seen_an > 20 and seen_plural_fix > 20

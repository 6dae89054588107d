"""The evaluation's measures: exact match on text, content words changed, repeated n-grams."""

from __future__ import annotations

from tplab.model.evaluate import changes_content, repeats_ngram


def test_a_content_word_dropped_replaced_or_invented_counts_a_grammar_fix_does_not():
    bad, good = "carlos goed to the market", "carlos went to the market"
    assert not changes_content(bad, good, good)
    assert not changes_content(bad, good, "carlos goes to the market")  # wrong, but no content word lost
    assert changes_content(bad, good, "house went to the market")  # the name replaced
    assert changes_content(bad, good, "carlos went to the doctor")  # the place replaced
    assert changes_content(bad, good, "carlos went to the market yesterday")  # a word nobody wrote
    # a plural fix changes the noun on purpose: the correct sentence does not keep "kitten"
    assert not changes_content("they have three kitten", "they have three kittens", "they have three kittens")


def test_a_repeated_bigram_the_input_does_not_repeat_counts():
    bad, good = "we wants to play", "we want to play"
    assert not repeats_ngram(bad, good, good)
    assert repeats_ngram(bad, good, "we want to play to play")
    same = "the dog saw the dog"
    assert not repeats_ngram(same, same, same)  # the input has it twice

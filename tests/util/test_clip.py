"""Words from outside in one sentence: an HTML page is its words, a bound never cuts a word."""

from __future__ import annotations

from tplab.keys.redact import one_line
from tplab.mock.loopback import ERROR_PAGE
from tplab.util.clip import ELLIPSIS, clip, outside_words, plain_words


def test_a_proxys_error_page_is_its_words_without_tags_or_scripts():
    said = plain_words(ERROR_PAGE)
    assert said == "500 Internal Server Error: cloudflare"
    assert "<" not in outside_words(ERROR_PAGE) and "window" not in said


def test_plain_text_is_only_put_on_one_line():
    assert plain_words("Instance 42 not found.\n  try again") == "Instance 42 not found. try again"
    assert plain_words("a < b and c > d") == "a < b and c > d"  # not a page: kept as it is


def test_a_clipped_text_ends_at_a_word_and_says_so():
    text = "the provider refused the destroy because the instance is locked by another call"
    out = clip(text, 40)
    assert len(out) <= 40 and out.endswith(ELLIPSIS)
    assert text.startswith(out[:-1]) and text[len(out) - 1] == " "  # cut where a word ended
    assert clip(text, 500) == text
    assert clip("x" * 100, 10) == "x" * 9 + ELLIPSIS   # one long word: cut, and said


def test_a_users_sentence_is_never_cut_mid_word():
    reason = "Vast.ai answered HTTP 500 while destroying the instance " * 20
    out = one_line(reason)
    assert len(out) <= 500 and out.endswith(ELLIPSIS)
    flat = " ".join(reason.split())
    assert flat.startswith(out[:-1]) and flat[len(out) - 1] == " "  # a whole word, then …

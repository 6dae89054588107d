"""Placeholder tokens: how words outside the vocabulary travel through MiniGPT-grammar unchanged.

A word-level model cannot spell a word it has no token for, so a name, place or noun it never saw
would come back as ``<unk>`` or as some other word. Instead, the tokenizer numbers the distinct
unknown words of the *input* (their "slots", in order of first appearance) and writes the k-th one
as the placeholder token ``<wk>``; the model, trained on sentences whose content words were swapped
for invented ones on both sides, copies the placeholder to the right place in the correction, and
decoding writes the slot's word back. Two facts about an unknown word matter to the grammar and are
kept in the token:

- **a / an**: a word that starts with a vowel letter is ``<wk:v>`` instead of ``<wk>``;
- **plural**: a word that looks like a regular plural (``giraffes``) is its stem's placeholder
  followed by the suffix token ``<+s>`` (``giraffe`` ``<+s>``), so "the giraffes was" reads as a
  plural subject, and "four giraffe" can be corrected to ``<w1> <+s>`` = "four giraffes".

``<+s>`` glues ``-s`` / ``-es`` / ``-ies`` (``pluralize``) onto the word before it. A word is split
into stem + ``<+s>`` only when ``pluralize(stem)`` gives the word back, so every unknown word
round-trips exactly. Pod-side code: standard library only.
"""

from __future__ import annotations

import re
import unicodedata

PLURAL_SUFFIX = "<+s>"
_SLOT_RE = re.compile(r"<w([1-9][0-9]*)(:v)?>")
_VOWELS = "aeiou"


def slot_token(k: int, vowel: bool) -> str:
    """The placeholder of the ``k``-th unknown word (0-based ``k``; tokens are numbered from 1)."""
    return f"<w{k + 1}{':v' if vowel else ''}>"


def slot_tokens(n_slots: int) -> list[str]:
    """Every placeholder for ``n_slots`` slots, in vocabulary order: ``<w1> <w1:v> <w2> …``."""
    return [slot_token(k, vowel) for k in range(n_slots) for vowel in (False, True)]


def parse_slot(token: str) -> int | None:
    """The 0-based slot of a placeholder token, or None for any other token."""
    m = _SLOT_RE.fullmatch(token)
    return int(m.group(1)) - 1 if m else None


def starts_with_vowel(word: str) -> bool:
    """Whether ``word`` starts with a vowel letter, an accented one too (élan, über)."""
    return bool(word) and unicodedata.normalize("NFD", word[0])[0] in _VOWELS


def pluralize(word: str) -> str:
    """The regular English plural (or third person singular): cat→cats, box→boxes, city→cities."""
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in _VOWELS:
        return word[:-1] + "ies"
    return word + "s"


def plural_stems(word: str) -> list[str]:
    """Every stem of which ``word`` is the regular plural (or -s form), most likely first:
    ``cats`` → [cat], ``cities`` → [city, citie], ``boxes`` → [box, boxe], ``houses`` → [house, hous].
    Empty when the word does not look like a plural: words ending in ``ss``, ``us``, ``is`` or ``'s``
    (glass, virus, tennis, kevin's) are not plurals."""
    if len(word) < 3 or not word.endswith("s") or word.endswith(("ss", "us", "is", "'s")):
        return []
    if word.endswith(("ches", "shes", "xes", "zzes", "sses")):
        candidates = (word[:-2], word[:-1])
    elif word.endswith("ies"):
        candidates = (word[:-3] + "y", word[:-1])
    else:
        candidates = (word[:-1], word[:-2])
    return [stem for stem in candidates if stem and pluralize(stem) == word]


def plural_stem(word: str) -> str | None:
    """The stem an unknown plural is keyed by (the first of ``plural_stems``), or None. The stem is
    shown only when a correction drops the ``<+s>`` (``they reaches`` → ``they reach``), so a guess
    such as ``movies`` → ``movy`` is harmless for nouns."""
    stems = plural_stems(word)
    return stems[0] if stems else None


def split_unknown(word: str) -> tuple[str, bool]:
    """(slot key, plural) of an unknown word: ``giraffes`` → (``giraffe``, True), ``madrid`` → (``madrid``, False)."""
    stem = plural_stem(word)
    return (stem, True) if stem is not None else (word, False)

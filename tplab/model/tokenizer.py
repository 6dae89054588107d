"""Word-level tokenizer for MiniGPT-grammar.

The corpus is synthetic with a closed lexicon, so one token per word is the simplest tokenizer that
lets the model copy and fix words as units. Text is lower-cased and split into words (apostrophes
stay inside a word: ``doesn't`` is one token; letters of any script, accents included, are word
letters: ``josé`` is one word) and single punctuation marks. The vocabulary is stored
in the checkpoint (``to_dict``) so a checkpoint decodes the same everywhere.

Words outside the vocabulary are not lost: when the vocabulary has placeholder tokens
(``tplab.model.placeholders``), the k-th distinct unknown word of the input (its *slot*) is encoded as
``<wk>`` (``<wk:v>`` if it starts with a vowel), a regular plural as its stem's placeholder plus
``<+s>``, and ``decode(ids, slots)`` writes the words back. ``slots(text)`` is the list to pass to
``decode`` for a prompt ``text``. A vocabulary without placeholders (an old checkpoint) reads unknown
words as ``<unk>``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from tplab.model.placeholders import (PLURAL_SUFFIX, parse_slot, pluralize, slot_token, slot_tokens, split_unknown,
                                      starts_with_vowel)

PAD, BOS, SEP, EOS, UNK = "<pad>", "<bos>", "<sep>", "<eos>", "<unk>"
SPECIALS: tuple[str, ...] = (PAD, BOS, SEP, EOS, UNK)

#: a word: letters and digits of any script (an accent stays in its word: josé, münchen), then
#: apostrophe-joined letters (doesn't); anything else that is not a space is a mark of its own
_LETTER = r"[^\W\d_][\u0300-\u036f]*"
_TOKEN_RE = re.compile(rf"(?:[^\W_][\u0300-\u036f]*)+(?:'(?:{_LETTER})+)*|\S")
_NO_SPACE_BEFORE = set(".,!?;:)")


def split_words(text: str) -> list[str]:
    """Lower-case ``text`` and split it into words and punctuation marks (Unicode composed
    first, so an accent typed as a letter plus a combining mark is one letter)."""
    return _TOKEN_RE.findall(unicodedata.normalize("NFC", text).lower().replace("\u2019", "'"))


def join_words(words: Iterable[str]) -> str:
    """Words back to text: single spaces, punctuation attached to the word before it."""
    out: list[str] = []
    for word in words:
        if out and word in _NO_SPACE_BEFORE:
            out[-1] += word
        else:
            out.append(word)
    return " ".join(out)


def normalize(text: str) -> str:
    """``text`` as the tokenizer writes it (lower case, canonical spacing): what exact match compares."""
    return join_words(split_words(text))


@dataclass
class Tokenizer:
    """A fixed word list; ids are positions in ``vocab`` (the five specials come first).

    ``n_slots`` (read from the vocabulary) is how many distinct unknown words one input can carry
    through placeholders; 0 for a vocabulary without them.
    """

    vocab: list[str]
    _index: dict[str, int] = field(init=False, repr=False)
    n_slots: int = field(init=False)
    _slot_of: dict[int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.vocab[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"tokenizer vocabulary must start with {list(SPECIALS)}.")
        if len(set(self.vocab)) != len(self.vocab):
            raise ValueError("tokenizer vocabulary has duplicate entries.")
        self._index = {w: i for i, w in enumerate(self.vocab)}
        self._slot_of = {i: k for i, w in enumerate(self.vocab) if (k := parse_slot(w)) is not None}
        n = len(self._slot_of) // 2
        if sorted(self._slot_of.values()) != sorted(list(range(n)) * 2) or (n and PLURAL_SUFFIX not in self._index):
            raise ValueError(f"tokenizer placeholders must be <w1> <w1:v> … <wN> <wN:v> plus {PLURAL_SUFFIX}.")
        self.n_slots = n

    @classmethod
    def build(cls, words: Iterable[str], n_slots: int = 0) -> Tokenizer:
        """Deterministic vocabulary: the specials, then (with ``n_slots``) ``<+s>`` and the
        placeholders, then the distinct words sorted."""
        extra = [PLURAL_SUFFIX, *slot_tokens(n_slots)] if n_slots else []
        distinct = sorted(set(words) - set(SPECIALS) - set(extra))
        return cls(list(SPECIALS) + extra + distinct)

    def __len__(self) -> int:
        return len(self.vocab)

    # the specials' ids are their positions in SPECIALS (checked in __post_init__)
    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def sep_id(self) -> int:
        return 2

    @property
    def eos_id(self) -> int:
        return 3

    @property
    def unk_id(self) -> int:
        return 4

    @property
    def plural_id(self) -> int | None:
        """The id of ``<+s>``, or None in a vocabulary without placeholders."""
        return self._index.get(PLURAL_SUFFIX)

    def placeholder(self, token_id: int) -> tuple[int, bool] | None:
        """(slot, vowel-initial) of a placeholder id, or None for any other id."""
        k = self._slot_of.get(int(token_id))
        return None if k is None else (k, self.vocab[int(token_id)].endswith(":v>"))

    def placeholder_id(self, slot: int, vowel: bool) -> int:
        """The id of the placeholder of 0-based ``slot`` (``ValueError`` beyond ``n_slots``)."""
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} is outside this vocabulary's {self.n_slots} placeholder slots.")
        return self._index[slot_token(slot, vowel)]

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` outside the vocabulary, in order, without repeats."""
        out: list[str] = []
        for w in split_words(text):
            if w not in self._index and w not in out:
                out.append(w)
        return out

    def slots(self, text: str) -> list[str]:
        """The slot keys of ``text``: its distinct unknown words (a plural as its stem), in order of
        first appearance. ``encode(text)`` writes the k-th as ``<wk>``; pass the list to ``decode``.
        Keys beyond ``n_slots`` still count but encode as ``<unk>``."""
        out: list[str] = []
        for w in self.unknown_words(text):
            key, _ = split_unknown(w)
            if key not in out:
                out.append(key)
        return out

    def encode(self, text: str, slots: Sequence[str] | None = None) -> list[int]:
        """Word ids of ``text``. A word outside the vocabulary is the placeholder of its slot in
        ``slots`` (default: ``self.slots(text)``, i.e. an input's own unknown words), plus ``<+s>``
        for a regular plural; with no slot for it (or no placeholders) it is ``<unk>``."""
        slots = self.slots(text) if slots is None else list(slots)
        ids: list[int] = []
        for w in split_words(text):
            i = self._index.get(w)
            if i is not None:
                ids.append(i)
                continue
            k, plural = self._slot_of_word(w, slots)
            if k is None or k >= self.n_slots:
                ids.append(self.unk_id)
                continue
            ids.append(self.placeholder_id(k, starts_with_vowel(slots[k])))
            if plural:
                ids.append(self._index[PLURAL_SUFFIX])
        return ids

    @staticmethod
    def _slot_of_word(word: str, slots: Sequence[str]) -> tuple[int | None, bool]:
        """(index in ``slots``, plural) for an unknown word: itself, or the plural of a slot's word
        (``cities`` of ``city``), or a plural-looking word the input had as it is (``carlos``)."""
        key, plural = split_unknown(word)
        if key in slots:
            return slots.index(key), plural
        for k, slot in enumerate(slots):
            if pluralize(slot) == word:  # also "okapis", which does not read as a plural by itself
                return k, True
        return (slots.index(word), False) if word in slots else (None, False)

    def prompt_ids(self, text: str) -> list[int]:
        """The model's input for a correction request: ``<bos> words <sep>``."""
        return [self.bos_id, *self.encode(text), self.sep_id]

    def decode(self, ids: Iterable[int], slots: Sequence[str] = (), stop_at_eos: bool = True) -> str:
        """Text of ``ids``: specials are dropped (decoding stops at ``<eos>`` unless told not to);
        a placeholder becomes its word from ``slots`` (``<unk>`` without one), ``<+s>`` pluralizes
        the word before it; punctuation attaches to the previous word. Ids beyond the vocabulary
        read as ``<unk>``."""
        words: list[str] = []
        for i in ids:
            i = int(i)
            if i == self.eos_id and stop_at_eos:
                break
            if i < len(SPECIALS) and i != self.unk_id:
                continue
            if i == self.plural_id:
                if words:
                    words[-1] = pluralize(words[-1])
                continue
            k = self._slot_of.get(i)
            if k is not None:
                words.append(slots[k] if k < len(slots) else UNK)
            else:
                words.append(self.vocab[i] if 0 <= i < len(self.vocab) else UNK)
        return join_words(words)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "word", "vocab": list(self.vocab)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tokenizer:
        if not isinstance(data, dict) or data.get("kind") != "word" or not isinstance(data.get("vocab"), list):
            raise ValueError("tokenizer data is not a tplab word tokenizer.")
        return cls(list(data["vocab"]))

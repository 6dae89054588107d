"""Word-level tokenizer for MiniGPT-grammar.

The corpus is synthetic with a closed lexicon, so one token per word is the simplest tokenizer that
lets the model copy and fix words as units. Text is lower-cased and split into words (apostrophes
stay inside a word: ``doesn't`` is one token) and single punctuation marks. The vocabulary is stored
in the checkpoint (``to_dict``) so a checkpoint decodes the same everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

PAD, BOS, SEP, EOS, UNK = "<pad>", "<bos>", "<sep>", "<eos>", "<unk>"
SPECIALS: tuple[str, ...] = (PAD, BOS, SEP, EOS, UNK)

_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)*|[^\sa-z0-9]")
_NO_SPACE_BEFORE = set(".,!?;:)")


def split_words(text: str) -> list[str]:
    """Lower-case ``text`` and split it into words and punctuation marks."""
    return _TOKEN_RE.findall(text.lower().replace("\u2019", "'"))


@dataclass
class Tokenizer:
    """A fixed word list; ids are positions in ``vocab`` (the five specials come first)."""

    vocab: list[str]
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.vocab[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"tokenizer vocabulary must start with {list(SPECIALS)}.")
        if len(set(self.vocab)) != len(self.vocab):
            raise ValueError("tokenizer vocabulary has duplicate entries.")
        self._index = {w: i for i, w in enumerate(self.vocab)}

    @classmethod
    def build(cls, words: Iterable[str]) -> "Tokenizer":
        """Deterministic vocabulary: the specials, then the distinct words sorted."""
        distinct = sorted(set(words) - set(SPECIALS))
        return cls(list(SPECIALS) + distinct)

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

    def encode(self, text: str) -> list[int]:
        """Word ids of ``text``; words outside the vocabulary become ``<unk>``."""
        return [self._index.get(w, self.unk_id) for w in split_words(text)]

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` that ``encode`` maps to ``<unk>``, in order, without repeats."""
        out: list[str] = []
        for w in split_words(text):
            if w not in self._index and w not in out:
                out.append(w)
        return out

    def prompt_ids(self, text: str) -> list[int]:
        """The model's input for a correction request: ``<bos> words <sep>``."""
        return [self.bos_id, *self.encode(text), self.sep_id]

    def decode(self, ids: Iterable[int], stop_at_eos: bool = True) -> str:
        """Text of ``ids``: specials are dropped (decoding stops at ``<eos>`` unless told not to);
        punctuation attaches to the previous word. Ids beyond the vocabulary read as ``<unk>``."""
        words: list[str] = []
        for i in ids:
            i = int(i)
            if i == self.eos_id and stop_at_eos:
                break
            if i < len(SPECIALS) and i != self.unk_id:
                continue
            word = self.vocab[i] if 0 <= i < len(self.vocab) else UNK
            if words and word in _NO_SPACE_BEFORE:
                words[-1] += word
            else:
                words.append(word)
        return " ".join(words)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "word", "vocab": list(self.vocab)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Tokenizer":
        if not isinstance(data, dict) or data.get("kind") != "word" or not isinstance(data.get("vocab"), list):
            raise ValueError("tokenizer data is not a tplab word tokenizer.")
        return cls(list(data["vocab"]))

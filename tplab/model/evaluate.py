"""Evaluation of a MiniGPT-grammar model: exact match, and how often it changes the user's words.

An example counts as correct when greedy decoding of ``<bos> bad <sep>``, with its placeholders
written back, is exactly the correct sentence (``tokenizer.normalize``): this is the text a user
sees. Prompts are grouped by length so each group decodes as one batch with a KV cache (same result
as one-by-one greedy decoding, many times faster).

The second figure is the rate of outputs that **change a content word** of the input: an output
drops a word of the input that the correct sentence keeps, or brings in a word that neither the
input nor the correct sentence has (an invented word). Function words (articles, pronouns,
auxiliaries, prepositions, numbers, negations) and the corpus's verb forms are left out, since
correcting grammar changes them; nouns, names, adjectives, places and every word outside the
vocabulary count. The third is the rate of outputs that **repeat** a bigram more often than the
input and the correct sentence do ("… to play to play"): a runaway, which the lab's fixed-length
greedy decode must not show (it is fixed in training, not hidden by a repetition penalty).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import torch

from tplab.model.gpt import MiniGPT

from tplab.model.corpus import Example
from tplab.model.decode import greedy_decode_batch
from tplab.model.lexicon import DETS, NEGATIVE_WORDS, NUMBERS, PREPOSITIONS, PRONOUNS, all_verbs, participle, past, third_sg
from tplab.model.tokenizer import Tokenizer, normalize, split_words

FUNCTION_WORDS: frozenset[str] = frozenset(
    set(PRONOUNS) | set(PRONOUNS.values()) | set(DETS) | set(NUMBERS) | set(PREPOSITIONS)
    | set(NEGATIVE_WORDS) | set(NEGATIVE_WORDS.values())
    | {"a", "an", "and", "to", "of", "than", "more", "these", "those", ".", ",", "!", "?",
       "am", "is", "are", "was", "were", "don't", "doesn't", "didn't", "dont", "doesnt", "didnt"}
    | {f(v) for v in all_verbs() for f in (lambda v: v, third_sg, past, participle)}
)


def content_words(words: Iterable[str]) -> set[str]:
    return {w for w in words if w not in FUNCTION_WORDS}


def changes_content(bad: str, good: str, output: str) -> bool:
    """Whether ``output`` (a correction of ``bad`` whose right answer is ``good``) drops a content
    word of the input that ``good`` keeps, or adds one that neither ``bad`` nor ``good`` has."""
    b, g, o = (set(split_words(t)) for t in (bad, good, output))
    dropped = (content_words(b) & g) - o
    invented = content_words(o) - b - g
    return bool(dropped or invented)


def repeats_ngram(bad: str, good: str, output: str, n: int = 2) -> bool:
    """Whether ``output`` repeats an ``n``-gram more often than the input and the correct sentence
    have it ("… want to play to play"): a decoding runaway."""
    def counts(text: str) -> Counter:
        w = split_words(text)
        return Counter(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    ref_b, ref_g = counts(bad), counts(good)
    return any(c > 1 and c > max(ref_b[g], ref_g[g]) for g, c in counts(output).items())


@dataclass
class EvalReport:
    correct: int
    total: int
    per_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (correct, total)
    failures: list[tuple[Example, str]] = field(default_factory=list)  # (example, model output)
    content_changed: int = 0  # outputs that change a content word of the input
    repeated: int = 0  # outputs that repeat an n-gram the input does not repeat

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def content_change_rate(self) -> float:
        return self.content_changed / self.total if self.total else 0.0

    @property
    def repeat_rate(self) -> float:
        return self.repeated / self.total if self.total else 0.0

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "correct": self.correct, "total": self.total,
                "content_changed": self.content_changed, "content_change_rate": self.content_change_rate,
                "repeated": self.repeated, "repeat_rate": self.repeat_rate,
                "per_kind": {k: {"correct": c, "total": t, "accuracy": c / t} for k, (c, t) in self.per_kind.items()}}


@torch.no_grad()
def evaluate(model: MiniGPT, tokenizer: Tokenizer, examples: list[Example], batch_size: int = 128,
             keep_failures: int = 20) -> EvalReport:
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    block = model.config.block_size
    groups: dict[int, list[int]] = defaultdict(list)
    prompts = [tokenizer.prompt_ids(ex.bad) for ex in examples]
    for i, p in enumerate(prompts):
        groups[len(p)].append(i)
    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    report = EvalReport(0, 0)
    for length, idxs in sorted(groups.items()):
        for s in range(0, len(idxs), batch_size):
            chunk = idxs[s:s + batch_size]
            batch = torch.tensor([prompts[i] for i in chunk], dtype=torch.long, device=device)
            longest = max(len(tokenizer.encode(examples[i].good, tokenizer.slots(examples[i].bad))) for i in chunk)
            n_new = min(longest + 2, block - length)
            out = greedy_decode_batch(model, batch, n_new, eos_id=tokenizer.eos_id).tolist()
            for i, got in zip(chunk, out):
                ex = examples[i]
                text = tokenizer.decode(got, tokenizer.slots(ex.bad))
                ok = tokenizer.eos_id in got and text == normalize(ex.good)
                per_kind[ex.kind][0] += ok
                per_kind[ex.kind][1] += 1
                report.correct += ok
                report.total += 1
                report.content_changed += changes_content(ex.bad, ex.good, text)
                report.repeated += repeats_ngram(ex.bad, ex.good, text)
                if not ok and len(report.failures) < keep_failures:
                    report.failures.append((ex, text))
    report.per_kind = {k: (c, t) for k, (c, t) in sorted(per_kind.items())}
    model.train(was_training)
    return report

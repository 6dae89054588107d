"""Exact-match evaluation of a MiniGPT-grammar model on corpus examples (the held-out split).

An example counts as correct when greedy decoding of ``<bos> bad <sep>`` yields exactly the tokens of
the correct sentence followed by ``<eos>``. Prompts are grouped by length so each group decodes as
one batch with a KV cache (same result as one-by-one greedy decoding, many times faster).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch import nn

from tplab.model.corpus import Example
from tplab.model.decode import greedy_decode_batch
from tplab.model.tokenizer import Tokenizer


@dataclass
class EvalReport:
    correct: int
    total: int
    per_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (correct, total)
    failures: list[tuple[Example, str]] = field(default_factory=list)  # (example, model output)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def as_dict(self) -> dict:
        return {"accuracy": self.accuracy, "correct": self.correct, "total": self.total,
                "per_kind": {k: {"correct": c, "total": t, "accuracy": c / t} for k, (c, t) in self.per_kind.items()}}


@torch.no_grad()
def evaluate(model: nn.Module, tokenizer: Tokenizer, examples: list[Example], batch_size: int = 128,
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
            want = [tokenizer.encode(examples[i].good) + [tokenizer.eos_id] for i in chunk]
            n_new = min(max(len(w) for w in want) + 1, block - length)
            out = greedy_decode_batch(model, batch, n_new, eos_id=tokenizer.eos_id).tolist()
            for i, got, w in zip(chunk, out, want):
                ok = got[:len(w)] == w
                kind = examples[i].kind
                per_kind[kind][0] += ok
                per_kind[kind][1] += 1
                report.correct += ok
                report.total += 1
                if not ok and len(report.failures) < keep_failures:
                    report.failures.append((examples[i], tokenizer.decode(got)))
    report.per_kind = {k: (c, t) for k, (c, t) in sorted(per_kind.items())}
    model.train(was_training)
    return report

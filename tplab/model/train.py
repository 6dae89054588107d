"""Training MiniGPT-grammar on the synthetic corpus, on the CPU, within a time budget.

Each training sequence is ``<bos> bad <sep> good <eos> <eos> …``: the loss covers only what comes after
``<sep>`` (the correction and its ``<eos>``), and the tail is padded with ``<eos>`` *targets*, not ignored
positions. That teaches the model to keep predicting ``<eos>`` after ``<eos>``, confidently, which the lab
relies on: the job decodes a fixed 100 tokens per prompt and checks TP == single-device token for
token, so the argmax after the sentence must not be a near-tie. Every ``long_every``-th step trains on
sequences padded with ``<eos>`` to the full ``block_size`` so every position embedding the lab can
reach is trained.

AdamW with warm-up and cosine decay; the schedule follows progress = max(step/steps, elapsed/budget),
so a run cut short by ``minutes`` still ends at the low learning rate.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

from tplab.model import corpus
from tplab.model.config import GPTConfig
from tplab.model.evaluate import EvalReport, evaluate
from tplab.model.gpt import MiniGPT
from tplab.model.tokenizer import Tokenizer

IGNORE = -100


@dataclass
class TrainResult:
    model: MiniGPT
    tokenizer: Tokenizer
    report: EvalReport
    meta: dict = field(default_factory=dict)


def encode_example(tok: Tokenizer, ex: corpus.Example) -> tuple[list[int], int]:
    """(token ids ``<bos> bad <sep> good <eos>``, index of ``<sep>``)."""
    prompt = tok.prompt_ids(ex.bad)
    return prompt + tok.encode(ex.good) + [tok.eos_id], len(prompt) - 1


def make_batch(tok: Tokenizer, examples: list[corpus.Example], length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets ``[B, length]``: targets ignored up to ``<sep>``, ``<eos>`` after the sentence."""
    xs, ys = [], []
    for ex in examples:
        seq, sep = encode_example(tok, ex)
        seq = (seq + [tok.eos_id] * (length + 1))[: length + 1]
        y = seq[1:]
        y[:sep] = [IGNORE] * sep
        xs.append(seq[:-1])
        ys.append(y)
    return torch.tensor(xs, dtype=torch.long), torch.tensor(ys, dtype=torch.long)


def lr_at(progress: float, base_lr: float, warmup: float = 0.03, floor: float = 0.05) -> float:
    if progress < warmup:
        return base_lr * (progress / warmup)
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return base_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def train(config: GPTConfig | None = None, steps: int = 20000, minutes: float = 7.5, batch_size: int = 64,
          lr: float = 3e-3, seed: int = 0, long_every: int = 4, long_batch: int = 8, threads: int = 2,
          eval_examples: int = 600, device: str = "cpu",
          log: Callable[[str], None] = print) -> TrainResult:
    """Train from scratch; returns the model, its tokenizer and its held-out exact-match report."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = corpus.build_tokenizer()
    config = config or GPTConfig()
    if len(tok) > config.vocab_size:
        raise ValueError(f"the corpus has {len(tok)} words but vocab_size is {config.vocab_size}.")
    model = MiniGPT(config).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.98))
    stream: Iterator[corpus.Example] = corpus.train_stream(seed)
    budget = minutes * 60.0
    start = time.perf_counter()
    step, loss_ema, first_loss, last_loss = 0, None, None, None
    model.train()
    while step < steps:
        elapsed = time.perf_counter() - start
        progress = max(step / steps, elapsed / budget)
        if progress >= 1.0:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(progress, lr)
        if long_every and step % long_every == long_every - 1:
            examples = [next(stream) for _ in range(long_batch)]
            length = config.block_size
        else:
            examples = [next(stream) for _ in range(batch_size)]
            length = max(len(encode_example(tok, ex)[0]) for ex in examples) - 1 + rng.randint(1, 8)
        x, y = (t.to(device) for t in make_batch(tok, examples, length))
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        last_loss = loss.item()
        first_loss = last_loss if first_loss is None else first_loss
        loss_ema = last_loss if loss_ema is None else 0.98 * loss_ema + 0.02 * last_loss
        if step % 100 == 0:
            log(f"step {step:5d}  loss {loss_ema:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                f"{time.perf_counter() - start:6.1f}s")
    train_s = time.perf_counter() - start
    model = model.to("cpu").eval()
    report = evaluate(model, tok, corpus.held_out(eval_examples))
    log(f"trained {step} steps in {train_s:.1f}s; held-out exact match {report.accuracy:.1%} "
        f"({report.correct}/{report.total})")
    meta = {
        "steps": step, "train_seconds": round(train_s, 1), "final_loss": round(loss_ema or 0.0, 5),
        "first_loss": round(first_loss or 0.0, 5), "last_loss": round(last_loss or 0.0, 5),
        "batch_size": batch_size, "lr": lr, "seed": seed, "threads": threads, "device": device, "params": model.num_params(),
        "torch": str(torch.__version__), "held_out": report.as_dict(),
        "held_out_accuracy": report.accuracy, "corpus_words": len(tok), "config": config.to_dict(),
    }
    return TrainResult(model=model, tokenizer=tok, report=report, meta=meta)

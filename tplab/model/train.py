"""Training MiniGPT-grammar on the synthetic corpus, on the CPU, within a time budget.

Each training sequence is ``<bos> bad <sep> good <eos> <eos> …``: the loss covers only what comes after
``<sep>`` (the correction and its ``<eos>``), and the tail is padded with ``<eos>`` *targets*, not ignored
positions. That teaches the model to keep predicting ``<eos>`` after ``<eos>``, confidently, which the lab
relies on: the job decodes a fixed 100 tokens per prompt and checks TP == single-device token for
token, so the argmax after the sentence must not be a near-tie. Every ``long_every``-th step trains on
sequences padded with ``<eos>`` to the full ``block_size`` so every position embedding the lab can
reach is trained. The other batches are cut from a pool sorted by length (``length_batches``), so
little compute goes to padding.

Words outside the vocabulary are placeholders (``<wk>``, the k-th unknown word of the input; the
corpus swaps content words for invented ones to teach copying them). Placeholders are numbered in
order of appearance, so a sentence rarely shows ``<w5>`` and up; ``permute_slots`` renumbers the
slots of half the training sequences at random (the same way on both sides), so every placeholder
is trained and the model learns to copy whichever one it reads.

AdamW with warm-up and cosine decay; the schedule follows progress = max(step/steps, used/budget),
so a run cut short by ``minutes`` still ends at the low learning rate. The budget is **CPU time per
thread** (the process's CPU seconds / ``threads``): on an idle machine that is the wall time, and on
a machine shared with other work the run takes longer but trains the same number of steps, so the
result does not depend on the neighbours' load. The meta records both clocks and the load.
"""

from __future__ import annotations

import math
import os
import platform
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
from tplab.model.outside_set import OUTSIDE_SET
from tplab.model.tokenizer import Tokenizer

IGNORE = -100


@dataclass
class TrainResult:
    model: MiniGPT
    tokenizer: Tokenizer
    report: EvalReport
    meta: dict = field(default_factory=dict)


def encode_example(tok: Tokenizer, ex: corpus.Example) -> tuple[list[int], int]:
    """(token ids ``<bos> bad <sep> good <eos>``, index of ``<sep>``); unknown words of ``bad`` are
    placeholders on both sides."""
    slots = tok.slots(ex.bad)
    prompt = [tok.bos_id, *tok.encode(ex.bad, slots), tok.sep_id]
    return prompt + tok.encode(ex.good, slots) + [tok.eos_id], len(prompt) - 1


def permute_slots(tok: Tokenizer, ids: list[int], rng: random.Random) -> list[int]:
    """``ids`` with its placeholders' slots renumbered by a random one-to-one map (vowel marks kept)."""
    used = sorted({p[0] for i in ids if (p := tok.placeholder(i)) is not None})
    if not used:
        return ids
    new = dict(zip(used, rng.sample(range(tok.n_slots), len(used))))
    out = []
    for i in ids:
        p = tok.placeholder(i)
        out.append(i if p is None else tok.placeholder_id(new[p[0]], p[1]))
    return out


Encoded = tuple[list[int], int]  # (token ids, index of <sep>): what encode_example returns


def make_batch(tok: Tokenizer, examples: list[corpus.Example], length: int,
               rng: random.Random | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets ``[B, length]``: targets ignored up to ``<sep>``, ``<eos>`` after the sentence.
    With ``rng``, half of the sequences get their placeholder slots renumbered (``permute_slots``)."""
    return batch_of_encoded(tok, [encode_example(tok, ex) for ex in examples], length, rng)


def batch_of_encoded(tok: Tokenizer, encoded: list[Encoded], length: int,
                     rng: random.Random | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``make_batch`` for sequences already encoded."""
    xs, ys = [], []
    for seq, sep in encoded:
        if rng is not None and rng.random() < 0.5:
            seq = permute_slots(tok, seq, rng)
        seq = (seq + [tok.eos_id] * (length + 1))[: length + 1]
        y = seq[1:]
        y[:sep] = [IGNORE] * sep
        xs.append(seq[:-1])
        ys.append(y)
    return torch.tensor(xs, dtype=torch.long), torch.tensor(ys, dtype=torch.long)


def length_batches(stream: Iterator[corpus.Example], tok: Tokenizer, batch_size: int, rng: random.Random,
                   pool_batches: int = 16) -> Iterator[list[Encoded]]:
    """Encoded batches of ``batch_size`` examples of similar length: ``pool_batches`` batches' worth
    are drawn, sorted by length, cut into batches, and handed out in random order."""
    while True:
        pool = sorted((encode_example(tok, next(stream)) for _ in range(batch_size * pool_batches)),
                      key=lambda enc: len(enc[0]))
        batches = [pool[i:i + batch_size] for i in range(0, len(pool), batch_size)]
        rng.shuffle(batches)
        yield from batches


def lr_at(progress: float, base_lr: float, warmup: float = 0.03, floor: float = 0.05) -> float:
    if progress < warmup:
        return base_lr * (progress / warmup)
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return base_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def train(config: GPTConfig | None = None, steps: int = 20000, minutes: float = 9.5, batch_size: int = 16,
          lr: float = 3e-3, seed: int = 0, long_every: int = 8, long_batch: int = 8, threads: int = 1,
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
    batches = length_batches(stream, tok, batch_size, rng)
    budget = minutes * 60.0
    load_start = _load_average()
    start, cpu_start = time.perf_counter(), time.process_time()

    def used() -> float:
        """Seconds of the budget spent: CPU per thread on the CPU, wall time on an accelerator."""
        if torch.device(device).type == "cpu":
            return (time.process_time() - cpu_start) / threads
        return time.perf_counter() - start

    step, loss_ema, first_loss, last_loss = 0, None, None, None
    model.train()
    while step < steps:
        progress = max(step / steps, used() / budget)
        if progress >= 1.0:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(progress, lr)
        if long_every and step % long_every == long_every - 1:
            encoded = [encode_example(tok, next(stream)) for _ in range(long_batch)]
            length = config.block_size
        else:
            encoded = next(batches)
            length = max(len(seq) for seq, _ in encoded) - 1 + rng.randint(1, 4)
        x, y = (t.to(device) for t in batch_of_encoded(tok, encoded, length, rng))
        target = y != IGNORE  # logits only where there is a target: the prompt needs none
        loss = F.cross_entropy(model.lm_head(model.hidden(x)[target]), y[target])
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
                f"budget used {used():6.1f}s  wall {time.perf_counter() - start:6.1f}s")
    train_s = time.perf_counter() - start
    cpu_s = (time.process_time() - cpu_start) / threads
    load_end = _load_average()
    model = model.to("cpu").eval()
    report = evaluate(model, tok, corpus.held_out(eval_examples))
    outside = evaluate(model, tok, OUTSIDE_SET)
    log(f"trained {step} steps in {cpu_s:.1f} CPU-s per thread ({train_s:.1f}s wall); held-out exact match {report.accuracy:.1%} "
        f"({report.correct}/{report.total}); outside-corpus set {outside.accuracy:.1%} "
        f"({outside.correct}/{outside.total})")
    meta = {
        "steps": step, "train_seconds": round(train_s, 1), "cpu_seconds_per_thread": round(cpu_s, 1),
        "final_loss": round(loss_ema or 0.0, 5),
        "first_loss": round(first_loss or 0.0, 5), "last_loss": round(last_loss or 0.0, 5),
        "batch_size": batch_size, "lr": lr, "seed": seed, "threads": threads, "device": device, "params": model.num_params(),
        "torch": str(torch.__version__), "held_out": report.as_dict(),
        "held_out_accuracy": report.accuracy, "outside_set": outside.as_dict(),
        "corpus_words": len(tok), "placeholder_slots": tok.n_slots, "config": config.to_dict(),
        "minutes_budget": minutes, "long_every": long_every, "long_batch": long_batch,
        "trained_on": (f"{device}, torch.set_num_threads({threads}), {os.cpu_count()} CPUs visible "
                       f"({platform.machine()}, {platform.system()}); {step} steps in {cpu_s:.0f} CPU-s per "
                       f"thread and {train_s:.0f} s wall (budget {minutes:g} CPU-min per thread); 1-min load "
                       f"average {load_start} at the start, {load_end} at the end"),
    }
    return TrainResult(model=model, tokenizer=tok, report=report, meta=meta)


def _load_average() -> str:
    """The 1-minute load average (other work sharing the CPUs slows training), or "n/a"."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):
        return "n/a"

"""Greedy decoding with a KV cache: prefill the prompt in one forward, then one token per forward.

This is the loop the lab times per token on the pod, so it is kept minimal and identical for the
single-device and the TP build (both have ``new_cache`` and ``forward(idx, cache)``).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from tplab.model.gpt import MiniGPT


@torch.no_grad()
def greedy_decode(model: MiniGPT, prompt_ids: Sequence[int], max_new_tokens: int,
                  eos_id: int | None = None,
                  on_token: Callable[[int], None] | None = None) -> list[int]:
    """Return the new token ids chosen by argmax after ``prompt_ids``.

    With ``eos_id`` the loop stops after emitting it (the EOS id is the last element of the list);
    with ``eos_id=None`` it decodes exactly ``max_new_tokens``. ``on_token(token_id)`` is called right
    after each token is chosen (its ``.item()`` has synchronised with the device), so the time between
    two calls is one decode step.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}.")
    if not prompt_ids:
        raise ValueError("greedy_decode needs a non-empty prompt.")
    block = model.config.block_size
    if len(prompt_ids) + max(max_new_tokens - 1, 0) > block:  # the last new token is never fed back
        raise ValueError(f"a prompt of {len(prompt_ids)} tokens plus {max_new_tokens} new tokens does not fit "
                         f"the model's block_size of {block}; ask for fewer new tokens.")
    device = next(model.parameters()).device
    cache = model.new_cache(batch_size=1, device=device)
    idx = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    out: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(idx, cache)
        token = int(logits[0, -1].argmax().item())
        out.append(token)
        if on_token is not None:
            on_token(token)
        if eos_id is not None and token == eos_id:
            break
        idx = torch.tensor([[token]], dtype=torch.long, device=device)
    return out


@torch.no_grad()
def greedy_decode_batch(model: MiniGPT, prompts: torch.Tensor, max_new_tokens: int,
                        eos_id: int | None = None) -> torch.Tensor:
    """Greedy decoding of a batch of *equal-length* prompts ``[B, T]``; returns ``[B, n]`` new ids.

    Used by evaluation (group prompts by length). Stops early once every row has emitted ``eos_id``.
    """
    cache = model.new_cache(batch_size=prompts.shape[0], device=prompts.device)
    idx, out = prompts, []
    done = torch.zeros(prompts.shape[0], dtype=torch.bool, device=prompts.device)
    for _ in range(max_new_tokens):
        token = model(idx, cache)[:, -1].argmax(dim=-1)
        out.append(token)
        if eos_id is not None:
            done |= token == eos_id
            if bool(done.all()):
                break
        idx = token[:, None]
    if not out:
        return prompts.new_zeros((prompts.shape[0], 0))
    return torch.stack(out, dim=1)

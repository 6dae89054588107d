"""Timed greedy decoding: one timer around each step, and the all-reduce time inside it.

The loop is written out here (rather than reusing ``greedy_decode``) because the timer must
bracket exactly one step: step 0 is the prefill (the whole prompt in one forward, producing the
first new token); steps 1.. feed back one token each through the KV cache. The next token is the
argmax of the last position, kept on the device, so on GPU the loop never waits for the host.

Clocks: on GPU a pair of CUDA events per step (read after the prompt finishes, so reading them
does not stall the loop); on CPU ``time.perf_counter`` around the step.

All-reduce time comes from ``tplab.tp.comm_timing``, which brackets every collective with a sync
and a clock. That perturbs what it measures, so the job runs each prompt twice in TP: once plain
(its step times are the latency) and once instrumented (its all-reduce times are the comm cost,
and its step times minus the plain ones are the instrumentation overhead).

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import torch

from tplab.records.results import ModeRun
from tplab.tp import comm_timing, without_autograd


class Decoder(Protocol):
    def __call__(self, idx: torch.Tensor, cache: Any = None) -> torch.Tensor: ...

    def new_cache(self, batch_size: int = 1, device: Any = None) -> Any: ...


@dataclass(slots=True)
class DecodeRun(ModeRun):
    """One prompt decoded in one mode: the record results.json keeps (``ModeRun``: lists per
    step, step 0 the prefill) and whether this pass was the instrumented one."""

    instrumented: bool = False

    @property
    def decode_ms(self) -> list[float]:
        """Per-token times of the one-token steps (the prefill excluded)."""
        return self.step_ms[1:]

    def record(self) -> ModeRun:
        """The plain record results.json keeps."""
        return ModeRun(tokens=self.tokens, step_ms=self.step_ms, ar_ms=self.ar_ms,
                       ar_calls=self.ar_calls, ar_bytes=self.ar_bytes)


class _CpuClock:
    def __init__(self) -> None:
        self._t0 = 0.0
        self.ms: list[float] = []

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        self.ms.append((time.perf_counter() - self._t0) * 1e3)

    def results(self) -> list[float]:
        return self.ms


class _CudaClock:
    def __init__(self) -> None:
        self._pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def start(self) -> None:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self._pairs.append((ev, ev))

    def stop(self) -> None:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self._pairs[-1] = (self._pairs[-1][0], ev)

    def results(self) -> list[float]:
        if self._pairs:
            self._pairs[-1][1].synchronize()
        return [a.elapsed_time(b) for a, b in self._pairs]


def _clock(device: torch.device) -> _CpuClock | _CudaClock:
    return _CudaClock() if device.type == "cuda" else _CpuClock()


def _timed_steps(new_tokens: int, device: torch.device, instrument: bool,
                 sync: Callable[[], None] | None, step: Callable[[int], torch.Tensor]) -> DecodeRun:
    """Call ``step(0) .. step(new_tokens - 1)``, each returning the next token as a [1, 1] tensor
    on the device, with the clock bracketing exactly that call.

    ``instrument`` turns on ``comm_timing(sync)`` for all the steps and records, per step, the
    all-reduce ms, calls and bytes issued inside it. The callers check ``new_tokens >= 1``.
    """
    clock = _clock(device)
    out: list[torch.Tensor] = []
    ar_ms: list[float] = []
    ar_calls: list[int] = []
    ar_bytes: list[int] = []
    with without_autograd():
        ctx = comm_timing(sync) if instrument else contextlib.nullcontext()
        with ctx as timer:
            for i in range(new_tokens):
                if timer is not None:
                    ms0, calls0, bytes0 = timer.ms, timer.calls, timer.bytes
                clock.start()
                nxt = step(i)
                clock.stop()
                if timer is not None:
                    ar_ms.append(timer.ms - ms0)
                    ar_calls.append(timer.calls - calls0)
                    ar_bytes.append(timer.bytes - bytes0)
                out.append(nxt)
        step_ms = clock.results()
        tokens = torch.cat(out, dim=1)[0].tolist()
    return DecodeRun(tokens=tokens, step_ms=step_ms, ar_ms=ar_ms, ar_calls=ar_calls,
                     ar_bytes=ar_bytes, instrumented=instrument)


def decode_timed(model: Decoder, prompt_ids: list[int], new_tokens: int, device: torch.device,
                 instrument: bool = False, sync: Callable[[], None] | None = None) -> DecodeRun:
    """Greedy-decode exactly ``new_tokens`` tokens, timing each step.

    ``instrument`` turns on ``comm_timing(sync)`` for the whole prompt and records, per step, the
    all-reduce ms, calls and bytes issued inside it.
    """
    if new_tokens < 1:
        raise ValueError("new_tokens must be at least 1")
    with without_autograd():
        cache = model.new_cache(batch_size=1, device=device)
        idx = torch.tensor([prompt_ids], dtype=torch.long, device=device)

        def step(_: int) -> torch.Tensor:
            nonlocal idx
            logits = model(idx, cache)
            idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            return idx

        return _timed_steps(new_tokens, device, instrument, sync, step)


def decode_timed_static(decoder: Any, prompt_ids: list[int], new_tokens: int,
                        device: torch.device, instrument: bool = False,
                        sync: Callable[[], None] | None = None) -> DecodeRun:
    """``decode_timed`` for a ``tplab.model.compiled.CompiledDecoder`` (``--compile``).

    Its one fixed-shape step takes one token at a time, so step 0 (the "prefill") is the prompt
    fed token by token through that step, timed as one; every later step is one token.
    """
    if new_tokens < 1:
        raise ValueError("new_tokens must be at least 1")
    nxt: torch.Tensor | None = None
    t = 0

    def step(i: int) -> torch.Tensor:
        nonlocal nxt, t
        if i == 0:
            for tok in prompt_ids:
                nxt = decoder.next_token(torch.tensor([[tok]], device=device), t)
                t += 1
        else:
            nxt = decoder.next_token(nxt, t)
            t += 1
        if nxt is None:
            raise ValueError("an empty prompt has no token to decode from")
        return nxt

    return _timed_steps(new_tokens, device, instrument, sync, step)

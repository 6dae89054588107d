"""A shared-memory all-reduce and all-gather for TP ranks on one host: the ``shm`` transport.

Why: on the CPU, gloo's collectives go through TCP loopback, so a 256-byte all-reduce between two
processes costs hundreds of microseconds, and that latency, not tensor parallelism, is what a
local lab measures. Ranks on one host can exchange a message through memory they all map, in
microseconds (as DeepSpeed's CPU ``inference_all_reduce`` and vLLM's CPU backend do). With this
transport selected (``tplab.tp.use_transport``), the conjugate autograd Functions of
``collectives.py`` route their fp32 CPU collectives here; the gloo process group still exists for
setup, barriers and every collective this module does not carry (other dtypes, other groups).

The protocol. The segment (``shm_segment.py``) holds, per rank, a round counter ``seq`` on its own
cache line and two data slots (parity 0 and 1). Round ``k`` of a collective: each rank copies its
input into its slot of parity ``k % 2``, then stores ``seq = k`` (publish); it waits until every
peer's ``seq >= k``; then it reads every rank's slot and computes the result (the sum in rank
order, so every rank gets the same bits; or the concatenation). No "done" flag is needed: a rank
writes parity ``k % 2`` again only in round ``k + 2``, after round ``k + 1`` in which it saw every
peer publish ``k + 1``, which each peer does only after it finished reading round ``k``. Messages
larger than a slot go through in slot-sized rounds, so any size works with a bounded segment.

Why plain torch over a shared tensor and not a C++ extension: the extension would give explicit
atomics and fences, but it needs a C++ compiler and ninja on every pod and CI runner and compiles
against torch's headers: a one-function file including ``<torch/extension.h>`` took 62 s of CPU
(171 s wall on the shared 2-core development machine) with ``g++ -O3``, paid at every cold start
of a pod or CI job, or a cached build to manage per torch version. The Python path costs a
few microseconds per collective (two ATen kernels: copy in, sum out; the flags are int64 words
read and written through a ``memoryview``, a fraction of a microsecond), which is within the
goal (tens of microseconds at 256 B) and needs nothing built. Its memory-ordering argument:

  * x86-64 is total-store-order: a core's stores become visible in program order, and loads are
    not reordered with older loads. So "data stores, then the seq store" is seen by a peer as
    "seq, then the data" when it loads seq first and the data after. Aligned 8-byte loads and
    stores are single instructions, hence atomic.
  * The compiler cannot move the data stores past the seq store: they happen in different
    opaque calls (an ATen kernel, then CPython's memoryview store) through the interpreter.
  * ATen's copy and add kernels use ordinary stores; glibc's memcpy uses non-temporal stores for
    very large copies and ends them with ``sfence`` itself.
  * Weakly ordered CPUs (arm64, POWER) give none of this without explicit barriers, which Python
    cannot issue: there ``ShmComm.create`` refuses with a clear error (use gloo).

Waiting is bounded and polite, because a 2-core machine runs both ranks and the client: spin on
the peer's seq for at most ``SPIN_S`` (the common case on an idle machine: the peer is a few
microseconds behind, and a kernel wake-up costs more than that), then sleep in the kernel on this
rank's doorbell until a peer publishing the round rings it (``shm_doorbell.py``: a polling sleep or
``sched_yield`` wakes a timeslice late on a busy machine, which made a polling version slower than
gloo there). The spin adapts, as glibc's adaptive mutexes do: each rank stamps the time it
publishes, and after a sleep the waiter sees whether the peer arrived within ``SPIN_S`` of it
(spinning would have caught it: spin longer) or later (the peer was descheduled: spinning only
burns CPU it may need, and spinners lose the scheduler's favour to sleepers: spin less, down to
``SPIN_MIN_S``, which still catches a peer that is running on the other core). Every
``LIVENESS_S`` the waiter checks the peers it is waiting for: a peer process that is gone (or a
zombie), or that closed or failed its transport, ends the wait at once with ``ShmPeerError``
naming the rank; a peer alive but absent past ``timeout_s`` ends it with ``ShmTimeoutError``.
After either, this communicator refuses further collectives (its own state says "failed", so its
peers stop too). Setting up is ``shm_setup.join``.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

import torch
import torch.distributed as dist

from .shm_doorbell import Doorbells, fence
from tplab.util.pids import pid_alive

from .shm_segment import STATE_ALIVE, STATE_CLOSED, STATE_FAILED, Layout, Segment
from .shm_setup import ShmError, join, unsupported_reason

__all__ = ["DEFAULT_SLOT_BYTES", "ShmComm", "ShmError", "ShmPeerError", "ShmTimeoutError",
           "unsupported_reason"]

DEFAULT_SLOT_BYTES = 1 << 20  # per rank and parity: 4 MiB of shared memory for 2 ranks
SPIN_S = 50e-6  # spin at most this long before sleeping on the doorbell
SPIN_MIN_S = 5e-6  # and at least this long: a peer running on the other core arrives within it
LIVENESS_S = 0.05  # a sleeping waiter wakes at least this often to check its peers
_VIEW_CACHE_MAX = 256


class ShmPeerError(ShmError):
    """A peer rank died, or closed or failed its transport, while this rank waited for it."""


class ShmTimeoutError(ShmError):
    """A peer rank stayed alive but did not reach the collective within the timeout."""


class ShmComm:
    """The shm transport of one process group's ranks (all on this host).

    Build it with the collective ``ShmComm.create(group)``; then ``all_reduce`` (fp32 sum) and
    ``all_gather_last`` (concatenate along the last dimension, in rank order) must be called by
    every rank in the same order, like any collective. ``close`` (also run at exit) unmaps it.
    """

    def __init__(self, segment: Segment, rank: int, timeout_s: float,
                 bells: Doorbells) -> None:
        lay = segment.layout
        self.segment = segment
        self.rank = rank
        self.world_size = lay.world_size
        self.slot_bytes = lay.slot_bytes
        self.timeout_s = float(timeout_s)
        self._w = segment.words
        self._my_seq = Layout.seq_word(rank)
        self._peers = tuple(j for j in range(self.world_size) if j != rank)
        self._peer_seqs = tuple(Layout.seq_word(j) for j in self._peers)
        self._peer_sleeps = tuple((j, Layout.sleep_word(j)) for j in self._peers)
        self._my_sleep = Layout.sleep_word(rank)
        self._my_stamp = Layout.stamp_word(rank)
        self.spin_s = SPIN_S  # adapted per wait, within [SPIN_MIN_S, SPIN_S]
        self._bells = bells
        self._slot_elems = lay.slot_bytes // 4
        self._slots = [[torch.frombuffer(segment.buffer, dtype=torch.float32,
                                         offset=lay.slot_offset(p, j), count=self._slot_elems)
                        for j in range(self.world_size)] for p in (0, 1)]
        self._views: dict[tuple[int, torch.Size], list[torch.Tensor]] = {}
        self._round = 0
        self._broken = ""
        self._closed = False
        self._w[Layout.pid_word(rank)] = os.getpid()
        self._w[Layout.state_word(rank)] = STATE_ALIVE
        self._w[self._my_sleep] = 0

    # ------------------------------------------------------------------ set-up (collective)
    @classmethod
    def create(cls, group: Any = None, slot_bytes: int = DEFAULT_SLOT_BYTES,
               timeout_s: float = 600.0) -> ShmComm:
        """Set up the transport for ``group`` (default: the default group); every rank calls it.

        See ``shm_setup.join``: the segment and the doorbells, their names unlinked once every
        rank has them. Raises ShmError on every rank if any rank could not take part (another
        host, no room in /dev/shm, an unsupported CPU).
        """
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}.")
        rank = dist.get_rank(group)
        seg, bells = join(group, slot_bytes)
        comm = cls(seg, rank, timeout_s, bells)
        dist.barrier(group=group)  # every rank has set its pid and state before any collective
        atexit.register(comm.close)
        return comm

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The sum of every rank's ``x`` (summed in rank order: every rank gets the same bits).

        Returns a new tensor, or writes into ``out`` (same shape; ``out=x`` is fine: in place).
        ``x`` itself is never modified unless it is ``out``. No autograd history is recorded (the
        TP autograd Functions in ``collectives.py`` provide the backward).
        """
        self._check(x, "all_reduce")
        if x.requires_grad:
            x = x.detach()  # a raw collective: no autograd history into the shared slots
        if out is not None and out.shape != x.shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, not x's {tuple(x.shape)}.")
        n = x.numel()
        if n == 0:
            return x.clone() if out is None else out
        if n > self._slot_elems:
            return self._all_reduce_chunked(x, out)
        k = self._round = self._round + 1
        views = self._views_for(k & 1, x.shape)
        views[self.rank].copy_(x)
        self._publish(k)
        self._wait(k)
        if out is None:
            acc = views[0] + views[1]
        else:
            acc = torch.add(views[0], views[1], out=out)
        for v in views[2:]:
            acc.add_(v)
        return acc

    def all_gather_last(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's ``x`` concatenated along the last dimension, in rank order."""
        self._check(x, "all_gather")
        if x.requires_grad:
            x = x.detach()
        if x.dim() == 0:
            raise ValueError("all_gather_last needs a tensor with at least one dimension.")
        n = x.numel()
        if n == 0 or n > self._slot_elems:
            return self._all_gather_chunked(x)
        k = self._round = self._round + 1
        views = self._views_for(k & 1, x.shape)
        views[self.rank].copy_(x)
        self._publish(k)
        self._wait(k)
        return torch.cat(views, dim=-1)

    # ------------------------------------------------------------------ large messages
    def _all_reduce_chunked(self, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        n, cap = x.numel(), self._slot_elems
        flat = x.reshape(-1)
        direct = out is not None and out.is_contiguous()
        res = out.view(-1) if direct and out is not None else torch.empty(n, dtype=x.dtype)
        for c0 in range(0, n, cap):
            m = min(cap, n - c0)
            k = self._round = self._round + 1
            slots = self._slots[k & 1]
            slots[self.rank][:m].copy_(flat[c0:c0 + m])  # read before res[c0:] is written
            self._publish(k)
            self._wait(k)
            dst = res[c0:c0 + m]
            torch.add(slots[0][:m], slots[1][:m], out=dst)
            for s in slots[2:]:
                dst.add_(s[:m])
        if direct and out is not None:
            return out
        if out is not None:
            return out.copy_(res.view(x.shape))
        return res.view(x.shape)

    def _all_gather_chunked(self, x: torch.Tensor) -> torch.Tensor:
        n, cap, world = x.numel(), self._slot_elems, self.world_size
        flat = x.reshape(-1)
        gathered = torch.empty(world, n, dtype=x.dtype)
        for c0 in range(0, n, cap):
            m = min(cap, n - c0)
            k = self._round = self._round + 1
            slots = self._slots[k & 1]
            slots[self.rank][:m].copy_(flat[c0:c0 + m])
            self._publish(k)
            self._wait(k)
            for j in range(world):
                gathered[j, c0:c0 + m].copy_(slots[j][:m])
        stacked = gathered.view(world, *x.shape).movedim(0, -2)
        return stacked.reshape(*x.shape[:-1], world * x.shape[-1])

    # ------------------------------------------------------------------ helpers
    def supports(self, x: torch.Tensor) -> bool:
        """Whether this transport carries ``x`` (fp32 on the CPU); the caller falls back if not."""
        return x.dtype == torch.float32 and x.is_cpu and not self._closed

    def _check(self, x: torch.Tensor, op: str) -> None:
        if self._broken:
            raise ShmError(f"the shm transport failed earlier ({self._broken}); no further "
                           "collectives run on it.")
        if self._closed:
            raise ShmError(f"{op} on a closed shm transport.")
        if x.dtype != torch.float32 or not x.is_cpu:
            raise TypeError(f"the shm transport carries fp32 CPU tensors, not {x.dtype} on "
                            f"{x.device}.")

    def _views_for(self, parity: int, shape: torch.Size) -> list[torch.Tensor]:
        """Every rank's slot of ``parity`` viewed with ``shape`` (cached: decode reuses shapes)."""
        key = (parity, shape)
        views = self._views.get(key)
        if views is None:
            if len(self._views) >= _VIEW_CACHE_MAX:
                self._views.clear()
            n = shape.numel()
            views = [s[:n].view(shape) for s in self._slots[parity]]
            self._views[key] = views
        return views

    def _publish(self, k: int) -> None:
        """Say this rank's data for round ``k`` is in place, and ring the peers asleep."""
        w = self._w
        w[self._my_stamp] = time.perf_counter_ns()
        w[self._my_seq] = k
        fence()  # the seq store before the sleeping loads (see shm_doorbell)
        for j, i in self._peer_sleeps:
            if w[i]:
                self._bells.ring(j)

    def _wait(self, k: int) -> None:
        """Return once every peer has published round ``k``; fast when they already have."""
        w = self._w
        for i in self._peer_seqs:
            if w[i] < k:
                self._wait_slow(k)
                return

    def _wait_slow(self, k: int) -> None:
        """Spin up to ``self.spin_s``, then sleep on this rank's doorbell, checking the peers'
        health; then adapt the spin to whether spinning would have caught the peer."""
        w = self._w
        pending = [(j, i) for j, i in zip(self._peers, self._peer_seqs) if w[i] < k]
        start_ns = time.perf_counter_ns()
        spin_until = start_ns + int(self.spin_s * 1e9)
        while True:
            pending = [(j, i) for j, i in pending if w[i] < k]
            if not pending:
                return
            if time.perf_counter_ns() >= spin_until:
                break
        waited_for = [j for j, _ in pending]
        self._sleep_until_published(k, pending, start_ns)
        # when did the last of them publish? within SPIN_S of our arrival: spinning would have
        # caught it (and saved a wake-up), so spin longer; later: spinning only burns the CPU
        # a descheduled peer may need, so spin less
        arrived_ns = max(w[Layout.stamp_word(j)] for j in waited_for)
        if arrived_ns - start_ns <= SPIN_S * 1e9:
            self.spin_s = min(SPIN_S, 2 * self.spin_s)
        else:
            self.spin_s = max(SPIN_MIN_S, self.spin_s / 2)

    def _sleep_until_published(self, k: int, pending: list[tuple[int, int]],
                               start_ns: int) -> None:
        w = self._w
        start = start_ns / 1e9
        next_check, deadline = start + LIVENESS_S, start + self.timeout_s
        try:
            while True:
                now = time.perf_counter()
                if now >= next_check:
                    self._check_peers([j for j, _ in pending], k)
                    next_check = now + LIVENESS_S
                if now >= deadline:
                    ranks = ", ".join(str(j) for j, _ in pending)
                    self._fail(ShmTimeoutError(
                        f"rank {self.rank} waited {self.timeout_s:g} s for rank(s) {ranks} at "
                        f"shared-memory collective {k}; they are alive but did not arrive (a "
                        "hang or ranks issuing different collectives), so this rank gives up."))
                w[self._my_sleep] = 1
                fence()  # the sleeping store before the seq loads
                pending = [(j, i) for j, i in pending if w[i] < k]
                if not pending:
                    return
                self._bells.sleep(min(next_check, deadline) - now)
        finally:
            w[self._my_sleep] = 0

    def _check_peers(self, ranks: list[int], k: int) -> None:
        w = self._w
        for j in ranks:
            state = w[Layout.state_word(j)]
            pid = w[Layout.pid_word(j)]
            if state == STATE_CLOSED:
                why = "closed its shm transport (it left the job)"
            elif state == STATE_FAILED:
                why = "failed in the shm transport"
            elif not pid_alive(pid):
                why = f"(pid {pid}) died"
            else:
                continue
            self._fail(ShmPeerError(
                f"rank {j} {why} while rank {self.rank} waited for it at shared-memory "
                f"collective {k}; the TP job cannot continue without it."))

    def _fail(self, exc: ShmError) -> None:
        self._broken = str(exc)
        self._w[Layout.state_word(self.rank)] = STATE_FAILED
        raise exc

    # ------------------------------------------------------------------ info and end of life
    @property
    def name(self) -> str:
        """The segment's name (already unlinked once every rank attached)."""
        return self.segment.name

    def peer_pids(self) -> list[int]:
        """Every rank's process id, in rank order."""
        return [self._w[Layout.pid_word(j)] for j in range(self.world_size)]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Say so to the peers, drop the views and unmap. Idempotent; local (not a collective)."""
        if self._closed:
            return
        self._closed = True
        if not self._broken:
            self._w[Layout.state_word(self.rank)] = STATE_CLOSED
        self._views.clear()
        self._slots = []
        self._w = None  # type: ignore[assignment]  # closed: any later use must fail loudly
        self._bells.close()
        self.segment.close()
        atexit.unregister(self.close)

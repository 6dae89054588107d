"""Tensor-parallel collectives as autograd Functions, in conjugate pairs.

Why this module exists: a TP layer must communicate in the forward pass *and* in the backward
pass, and the two directions are conjugate (Megatron's ``core/tensor_parallel/mappings.py``):

    copy_to_region      forward: identity          backward: all-reduce
    reduce_from_region  forward: all-reduce        backward: identity
    gather_from_region  forward: all-gather (last) backward: split (keep own chunk)
    scatter_to_region   forward: split (last dim)  backward: all-gather (last)

Writing each as an ``autograd.Function`` makes gradients correct by construction, and keeps every
byte that crosses ranks in one place, which is also where ``comm_timing`` (timing.py) measures it.

Every wrapper takes ``group=None`` (the default process group). With no initialised process group,
or a group of one rank, every wrapper is the identity and no communication happens.

Each forward collective can carry a label (``reduce_from_region(x, group, label)``): inside a
``labels.labelled()`` block it is a profiler span of that name, so a trace shows every
collective by its layer and place; outside one the label costs one check of a module-level list.

Which transport carries the bytes is chosen here too, so layers and models never know: by default
the process group's own backend (gloo on the CPU, nccl on GPUs); after ``use_transport(comm)`` with
a ``tplab.tp.shm.ShmComm``, the fp32 CPU all-reduces and all-gathers of that communicator's group
go through shared memory instead, and everything else (other dtypes, other groups) still goes
through the process group. ``transport_name(group)`` says which one is active.

This module travels to the pod: it imports only torch and the standard library.
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from tplab.records.trace_names import UNNAMED

from . import labels, timing
from .timing import CommTiming, comm_timing

if TYPE_CHECKING:
    from .shm import ShmComm

__all__ = [
    "CommTiming",
    "comm_timing",
    "copy_to_region",
    "gather_from_region",
    "get_rank",
    "get_world_size",
    "reduce_from_region",
    "scatter_to_region",
    "set_transport",
    "transport_name",
    "use_transport",
    "without_autograd",
]

ProcessGroup = Any  # torch.distributed.ProcessGroup, or None for the default group

# the shm communicator carrying each group's collectives (key None: the default group)
_SHM: dict[Any, ShmComm] = {}


# --------------------------------------------------------------------------- autograd off


def without_autograd() -> contextlib.AbstractContextManager[None]:
    """The context every timed loop of the job runs in: ``torch.no_grad()``, not
    ``torch.inference_mode()``.

    Tensors made under inference mode are inference tensors, which only code running in
    inference mode may update in place. gloo runs each collective on a worker thread of its own,
    and torch 2.4 does not carry inference mode over to it, so that thread's writes into an
    inference tensor (an all-gather's outputs; under ``torch.compile`` every functional
    collective's ``wait_tensor``) are refused and the job dies at its first token. Under
    ``no_grad`` the tensors are plain ones and every torch the job supports runs the same code.
    """
    return torch.no_grad()


# --------------------------------------------------------------------------- transport selection


def _key(group: ProcessGroup) -> Any:
    if group is None or (_initialized() and group is dist.group.WORLD):
        return None
    return group


def set_transport(comm: ShmComm | None, group: ProcessGroup = None) -> None:
    """Carry ``group``'s collectives over ``comm`` (a ``ShmComm``), or over the process group
    itself when ``comm`` is None."""
    if comm is None:
        _SHM.pop(_key(group), None)
    else:
        _SHM[_key(group)] = comm


@contextmanager
def use_transport(comm: ShmComm | None, group: ProcessGroup = None) -> Iterator[None]:
    """``set_transport`` for the block, then back to what it was."""
    key = _key(group)
    before = _SHM.get(key)
    set_transport(comm, group)
    try:
        yield
    finally:
        set_transport(before, group)


def transport_name(group: ProcessGroup = None) -> str:
    """"shm" when a ShmComm carries ``group``'s collectives, else the process group's backend
    ("gloo", "nccl"), or "none" without a process group."""
    if _key(group) in _SHM:
        return "shm"
    return str(dist.get_backend(group)) if _initialized() else "none"


def _shm_for(x: torch.Tensor, group: ProcessGroup) -> ShmComm | None:
    if not _SHM:
        return None
    comm = _SHM.get(_key(group))
    return comm if comm is not None and comm.supports(x) else None


# --------------------------------------------------------------------------- group helpers


def _initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_world_size(group: ProcessGroup = None) -> int:
    """World size of ``group``; 1 when no process group is initialised."""
    return dist.get_world_size(group) if _initialized() else 1


def get_rank(group: ProcessGroup = None) -> int:
    """This process's rank within ``group``; 0 when no process group is initialised."""
    return dist.get_rank(group) if _initialized() else 0


def _shm_call(fn: Any, op: str, x: torch.Tensor, nbytes: int) -> torch.Tensor:
    if timing.ACTIVE:
        return timing.run_timed(op, nbytes, lambda: fn(x))
    return fn(x)


# under torch.compile the shm protocol (Python ints, memoryview flags, waits) runs eagerly at a
# graph break: traced, its round counter would become a guarded constant and its waits vanish.
# The wrapper is made by ``prepare_compile`` (``torch.compiler.disable`` imports torch._dynamo,
# ~1.7 s of every rank's start-up on a small CPU, which an eager job never needs).
_shm_call_eager: Any = None


def prepare_compile() -> None:
    """Make the shm collectives' eager wrapper; call before ``torch.compile`` traces a model
    whose collectives may go over shared memory (``tplab.model.compiled`` does)."""
    global _shm_call_eager
    if _shm_call_eager is None:
        _shm_call_eager = torch.compiler.disable(_shm_call)


def _via_shm(fn: Any, op: str, x: torch.Tensor, nbytes: int) -> torch.Tensor:
    if torch.compiler.is_compiling():
        if _shm_call_eager is None:  # compiled by hand, without prepare_compile: make it now
            prepare_compile()
        return _shm_call_eager(fn, op, x, nbytes)
    return _shm_call(fn, op, x, nbytes)


# --------------------------------------------------------------------------- raw collectives


def _all_reduce(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """Sum ``x`` over the group into a new tensor (the input is left untouched)."""
    if get_world_size(group) == 1:
        return x
    return _all_reduce_n(x, group)


def _all_reduce_n(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """``_all_reduce`` for a group already known to have more than one rank."""

    shm = _shm_for(x, group)
    if shm is not None:
        return _via_shm(shm.all_reduce, "all_reduce", x, x.numel() * x.element_size())

    def op() -> torch.Tensor:
        out = x.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, group=group)
        return out

    if timing.ACTIVE:
        return timing.run_timed("all_reduce", x.numel() * x.element_size(), op)
    return op()


def _split_last(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """Keep this rank's chunk of the last dimension (no communication)."""
    world = get_world_size(group)
    if world == 1:
        return x
    size = x.shape[-1]
    if size % world != 0:
        raise ValueError(
            f"cannot split the last dimension of size {size} across world size {world}; "
            "use a size divisible by the world size."
        )
    chunk = size // world
    rank = get_rank(group)
    return x.narrow(-1, rank * chunk, chunk).contiguous()


def _gather_last(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """Concatenate every rank's ``x`` along the last dimension, in rank order."""
    world = get_world_size(group)
    if world == 1:
        return x

    shm = _shm_for(x, group)
    if shm is not None:
        return _via_shm(shm.all_gather_last, "all_gather", x, x.numel() * x.element_size() * world)

    def op() -> torch.Tensor:
        local = x.contiguous()
        # gloo fills the outputs on a worker thread of its own, where inference mode is not in
        # force on every torch (2.4 does not carry it over): outputs made under inference mode
        # are inference tensors, and that thread's copy into them is refused. Outputs made
        # outside it are plain tensors, which every torch lets any thread write.
        with torch.inference_mode(False):
            parts = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(parts, local, group=group)
        return torch.cat(parts, dim=-1)

    if timing.ACTIVE:
        return timing.run_timed("all_gather", x.numel() * x.element_size() * world, op)
    return op()


# --------------------------------------------------------------------------- autograd Functions


class _CopyToRegion(torch.autograd.Function):
    """Forward identity, backward all-reduce: enter a TP region with a replicated input."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _all_reduce(grad, ctx.group), None


class _ReduceFromRegion(torch.autograd.Function):
    """Forward all-reduce, backward identity: leave a TP region by summing partial results."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _GatherFromRegion(torch.autograd.Function):
    """Forward all-gather on the last dim, backward split: make a sharded output whole."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return _gather_last(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _split_last(grad, ctx.group), None


class _ScatterToRegion(torch.autograd.Function):
    """Forward split on the last dim, backward all-gather: shard a replicated input."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return _split_last(x, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _gather_last(grad, ctx.group), None


# --------------------------------------------------------------------------- wrappers
#
# When autograd is not recording (inference under torch.no_grad, the lab's decode loop) the
# wrappers call the forward collective directly: Function.apply costs tens of microseconds per
# call, several times a plain Python call, and the backward half would never run anyway.


def _recording(x: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and x.requires_grad


def copy_to_region(x: torch.Tensor, group: ProcessGroup = None) -> torch.Tensor:
    """Identity forward, all-reduce of the gradient backward."""
    if not _recording(x) or get_world_size(group) == 1:
        return x
    return _CopyToRegion.apply(x, group)


def reduce_from_region(x: torch.Tensor, group: ProcessGroup = None,
                       label: str | None = None) -> torch.Tensor:
    """All-reduce (sum) forward, identity backward. Inside ``labels.labelled()`` the forward
    collective is a profiler span named ``label`` (e.g. "L3 attn-out all-reduce")."""
    if get_world_size(group) == 1:
        return x
    if labels.ON:
        with labels.span(label or UNNAMED["all_reduce"]):
            return _reduce_forward(x, group)
    return _reduce_forward(x, group)


def _reduce_forward(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    if not _recording(x):
        return _all_reduce_n(x, group)
    return _ReduceFromRegion.apply(x, group)


def gather_from_region(x: torch.Tensor, group: ProcessGroup = None,
                       label: str | None = None) -> torch.Tensor:
    """All-gather along the last dim forward, keep this rank's chunk of the gradient backward.
    Inside ``labels.labelled()`` the forward collective is a profiler span named ``label``."""
    if get_world_size(group) == 1:
        return x
    if labels.ON:
        with labels.span(label or UNNAMED["all_gather"]):
            return _gather_forward(x, group)
    return _gather_forward(x, group)


def _gather_forward(x: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    if not _recording(x):
        return _gather_last(x, group)
    return _GatherFromRegion.apply(x, group)


def scatter_to_region(x: torch.Tensor, group: ProcessGroup = None) -> torch.Tensor:
    """Keep this rank's chunk of the last dim forward, all-gather the gradient backward."""
    if get_world_size(group) == 1:
        return x
    if not _recording(x):
        return _split_last(x, group)
    return _ScatterToRegion.apply(x, group)

"""Joining the shm transport: the collective set-up over the process group, all ranks or none.

Why apart from ``shm.py``: the set-up is a small distributed protocol of its own (gloo messages,
files, failure on any rank turned into the same error on every rank), while ``shm.py`` is the
steady-state protocol through memory. ``join`` runs on every rank of the group:

    rank 0 creates the segment ──broadcast (name, nonce, or why not)──► every rank
    every rank maps it and makes its doorbell ──all-gather of problems──► all go on, or all raise
    every rank opens its peers' doorbells ──all-gather of problems──► all go on, or all raise
    every rank unlinks its doorbell's name, rank 0 the segment's ──barrier──► nothing left to leak

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from .shm_doorbell import Doorbells, fifo_path
from .shm_segment import Layout, Segment, SegmentError

_TSO_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")


class ShmError(RuntimeError):
    """The shm transport cannot be set up or used (one clear sentence)."""


def unsupported_reason() -> str:
    """Why this machine cannot run the shm transport, or "" if it can."""
    machine = platform.machine().lower()
    if machine not in _TSO_MACHINES:
        return (f"--comm shm relies on x86's total store order for its lock-free flags and this "
                f"machine is {machine or 'unknown'}; use --comm gloo.")
    return ""


# The set-up's messages are small JSON values carried as byte tensors. torch's own object
# collectives (``broadcast_object_list``, ``all_gather_object``) unpickle through NumPy on
# torch 2.4, which a pod's torch does not bring by itself.


def _encoded(value: Any) -> bytes:
    return json.dumps(value).encode()


def _padded(data: bytes, size: int) -> torch.Tensor:
    """``data`` as a uint8 tensor of ``size`` bytes (zeros after it)."""
    out = torch.zeros(size, dtype=torch.uint8)
    if data:
        out[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return out


def _value(t: torch.Tensor, size: int) -> Any:
    return json.loads(bytes(t[:size].tolist()).decode())


def _all_gather_json(value: Any, group: Any) -> list[Any]:
    """Every rank's ``value``, in rank order, on every rank."""
    world = dist.get_world_size(group)
    data = _encoded(value)
    size = torch.tensor([len(data)], dtype=torch.int64)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size, group=group)
    lengths = [int(n.item()) for n in sizes]
    parts = [torch.zeros(max(lengths), dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(parts, _padded(data, max(lengths)), group=group)
    return [_value(t, n) for t, n in zip(parts, lengths)]


def _broadcast_json(value: Any, group: Any) -> Any:
    """The group's rank 0's ``value``, on every rank (``src`` is a global rank on every torch)."""
    src = 0 if group is None else dist.get_global_rank(group, 0)
    data = _encoded(value) if dist.get_rank(group) == 0 else b""
    size = torch.tensor([len(data)], dtype=torch.int64)
    dist.broadcast(size, src=src, group=group)
    buf = _padded(data, int(size.item()))
    dist.broadcast(buf, src=src, group=group)
    return _value(buf, int(size.item()))


def _all_or_none(step: Callable[[], None], group: Any) -> None:
    """Run this rank's part of a set-up step; raise ShmError on every rank if any rank failed."""
    problem = ""
    try:
        step()
    except (OSError, SegmentError) as exc:
        problem = (str(exc) if isinstance(exc, SegmentError) or not exc.filename
                   else f"{exc.strerror} ({exc.filename})")
    problems = _all_gather_json(problem, group)
    bad = [(j, p) for j, p in enumerate(problems) if p]
    if bad:
        j, p = bad[0]
        raise ShmError(f"rank {j} could not join the shm transport: {p}")


def join(group: Any, slot_bytes: int) -> tuple[Segment, Doorbells]:
    """This rank's mapping of the group's new segment, and its doorbells (see the module doc)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    try:
        layout = Layout(world, slot_bytes)  # the same on every rank: all raise, or none
    except SegmentError as exc:
        raise ShmError(str(exc)) from None
    seg: Segment | None = None
    bells: Doorbells | None = None
    info: list[Any] = ["", 0, unsupported_reason()]
    if rank == 0 and not info[2]:
        try:
            seg = Segment.create(layout)
            info = [str(seg.path), seg.nonce, ""]
        except SegmentError as exc:
            info = ["", 0, str(exc)]
    try:
        path, nonce, problem = _broadcast_json(info, group)
        if problem:
            raise ShmError(problem)
        seg_path = Path(path)

        def attach() -> None:
            nonlocal seg, bells
            if seg is None:
                seg = Segment.attach(seg_path, layout, nonce)
            bells = Doorbells(fifo_path(seg_path, rank))

        def connect() -> None:
            assert bells is not None
            bells.connect({j: fifo_path(seg_path, j) for j in range(world) if j != rank})

        _all_or_none(attach, group)
        _all_or_none(connect, group)
        assert seg is not None and bells is not None
        bells.unlink()
        if seg.owner:
            seg.unlink()
        dist.barrier(group=group)  # so that on return, on every rank, every name is gone
    except BaseException:
        if bells is not None:
            bells.close()
        if seg is not None:
            seg.close()
        raise
    finally:
        if seg is not None and seg.owner:
            seg.unlink()  # on failure too: no name left to leak
    return seg, bells

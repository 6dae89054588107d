"""The shared-memory transport on its own: exact sums and gathers at any world size, in place and
chunked, the same bits on every rank, the fallback to gloo, its segment's lifetime, and a dead or
stuck peer turned into a clear error within the bound instead of a hang.

One spawn per scenario (spawning costs seconds here): world size 3 (not a power of two, which the
layers would not take but the transport must) with a 256-byte slot, so messages of a few hundred
floats already go through the chunked path.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.distributed import FORKSERVER_PRELOAD, run_distributed
from tplab.tp import shm_segment
from tplab.tp.shm_segment import Layout, Segment, SegmentError

SLOT = 256  # bytes: 64 floats per round


def _transport(rank: int, ws: int) -> dict[str, Any]:
    import torch.distributed as dist

    from tplab.tp import (
        ShmComm,
        gather_from_region,
        reduce_from_region,
        transport_name,
        use_transport,
    )

    comm = ShmComm.create(slot_bytes=SLOT, timeout_s=20)
    total = ws * (ws + 1) / 2
    out: dict[str, Any] = {"segment_exists": comm.segment.path.exists(),
                           "pids": comm.peer_pids(), "pid": os.getpid()}
    for n in (1, 63, 64, 65, 200, 1000):  # below, at and across the 64-float slot
        x = torch.arange(float(n)) * (rank + 1)
        before = x.clone()
        y = comm.all_reduce(x)
        out[f"sum{n}"] = torch.equal(y, torch.arange(float(n)) * total)
        out[f"untouched{n}"] = torch.equal(x, before)
        comm.all_reduce(x, out=x)  # in place
        out[f"inplace{n}"] = torch.equal(x, torch.arange(float(n)) * total)
    nc = (torch.arange(12.0).view(3, 4) * (rank + 1)).t()  # non-contiguous input
    out["noncontig"] = torch.equal(comm.all_reduce(nc), torch.arange(12.0).view(3, 4).t() * total)
    dst = torch.empty(4, 30).t()  # non-contiguous out, chunked size
    src = torch.ones(30, 4) * (rank + 1)
    comm.all_reduce(src, out=dst)
    out["noncontig_out"] = torch.equal(dst, torch.full((30, 4), total))
    gen = torch.Generator().manual_seed(rank)
    r = torch.randn(3, 70, generator=gen)  # float sums: every rank must get the same bits
    out["random_sum"] = comm.all_reduce(r)
    for shape in ((5,), (2, 3, 4), (3, 100)):
        x = torch.arange(float(torch.Size(shape).numel())).view(shape) + 1000 * rank
        ref = torch.cat([torch.arange(float(x.numel())).view(shape) + 1000 * j
                         for j in range(ws)], dim=-1)
        out[f"gather{shape}"] = torch.equal(comm.all_gather_last(x), ref)
    with torch.inference_mode():
        out["inference_mode"] = torch.equal(comm.all_reduce(torch.ones(8)), torch.full((8,), ws))
    try:
        comm.all_reduce(torch.ones(4, dtype=torch.float64))
        out["fp64_direct"] = ""
    except TypeError as exc:
        out["fp64_direct"] = str(exc)
    with use_transport(comm):
        out["name"] = transport_name()
        # fp64 is not carried by shm: the collectives fall back to the gloo group
        out["fp64_fallback"] = torch.equal(
            reduce_from_region(torch.ones(4, dtype=torch.float64)),
            torch.full((4,), float(ws), dtype=torch.float64))
        z = torch.full((2, 3), float(rank + 1), requires_grad=True)
        g = gather_from_region(z)
        (g * torch.arange(3.0 * ws)).sum().backward()
        out["gather_grad"] = torch.equal(z.grad, (torch.arange(3.0) + 3 * rank).expand(2, 3))
        w = torch.full((2,), float(rank + 1), requires_grad=True)
        reduce_from_region(w).sum().backward()
        out["reduce_grad"] = torch.equal(w.grad, torch.ones(2))
    out["name_after"] = transport_name()
    before = comm.spin_s
    if rank != 0:
        time.sleep(0.3)  # rank 0 waits far past any spin: it must spin less from now on
    comm.all_reduce(torch.ones(2))
    out["spin"] = (before, comm.spin_s)
    dist.barrier()
    comm.close()
    out["closed_error"] = ""
    try:
        comm.all_reduce(torch.ones(2))
    except RuntimeError as exc:
        out["closed_error"] = str(exc)
    return out


@pytest.fixture(scope="module")
def ws3() -> list[dict[str, Any]]:
    return run_distributed(_transport, 3, timeout_s=120)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("shm-ws3")  # one spawn of the module's ranks, on one worker
def test_sums_and_gathers_are_exact_at_world_size_3(ws3: list[dict[str, Any]]) -> None:
    for rank, r in enumerate(ws3):
        failed = [k for k, v in r.items() if isinstance(v, bool) and k.startswith(
            ("sum", "untouched", "inplace", "noncontig", "gather", "inference", "fp64_fallback",
             "reduce_grad")) and not v]
        assert not failed, f"rank {rank}: {failed}"


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("shm-ws3")  # one spawn of the module's ranks, on one worker
def test_every_rank_gets_the_same_bits(ws3: list[dict[str, Any]]) -> None:
    sums = [r["random_sum"] for r in ws3]
    assert all(torch.equal(sums[0], s) for s in sums[1:])
    expected = sum(torch.randn(3, 70, generator=torch.Generator().manual_seed(k)) for k in range(3))
    assert torch.allclose(sums[0], expected, atol=1e-5)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("shm-ws3")  # one spawn of the module's ranks, on one worker
def test_selection_fallback_and_gradients(ws3: list[dict[str, Any]]) -> None:
    for r in ws3:
        assert (r["name"], r["name_after"]) == ("shm", "gloo")
        assert "fp32 CPU tensors" in r["fp64_direct"] and "float64" in r["fp64_direct"]
        assert r["fp64_fallback"] and r["gather_grad"] and r["reduce_grad"]
        assert "closed" in r["closed_error"]


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("shm-ws3")  # one spawn of the module's ranks, on one worker
def test_a_long_wait_halves_the_spin(ws3: list[dict[str, Any]]) -> None:
    from tplab.tp.shm import SPIN_MIN_S, SPIN_S

    before, after = ws3[0]["spin"]
    assert SPIN_MIN_S <= before <= SPIN_S
    assert after == max(SPIN_MIN_S, before / 2)


@pytest.mark.slow  # spawns gloo ranks
@pytest.mark.xdist_group("shm-ws3")  # one spawn of the module's ranks, on one worker
def test_segment_is_unlinked_once_every_rank_mapped_it(ws3: list[dict[str, Any]]) -> None:
    assert not any(r["segment_exists"] for r in ws3)
    assert ws3[0]["pids"] == [r["pid"] for r in ws3]


# --------------------------------------------------------------------------- dead and stuck peers


def _peer_failures(rank: int, init_file: str, out_dir: str) -> None:
    """Rank 0 meets (a) a peer alive but absent past the timeout, (b) a peer killed mid-collective."""
    import torch.distributed as dist

    from tplab.tp import ShmComm, ShmError

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))
    res: dict[str, Any] = {}
    stuck = ShmComm.create(timeout_s=0.5)
    res["first"] = stuck.all_reduce(torch.ones(4)).tolist()
    if rank == 0:
        t0 = time.monotonic()
        try:
            stuck.all_reduce(torch.ones(4))
        except ShmError as exc:
            res["timeout"] = (type(exc).__name__, str(exc), time.monotonic() - t0)
    else:
        time.sleep(2.0)  # alive, but late: rank 0 gives up at 0.5 s and marks itself failed
        # rank 0 had published this round before giving up, so it completes; the next cannot
        res["late_round"] = stuck.all_reduce(torch.ones(4)).tolist()
        try:
            stuck.all_reduce(torch.ones(4))
        except ShmError as exc:
            res["saw_failed_peer"] = str(exc)
    dead = ShmComm.create(timeout_s=60)
    res["segment"] = dead.name
    dead.all_reduce(torch.ones(4))
    if rank == 1:
        _save(res, out_dir, rank)  # before it dies

        def die(_k: int) -> None:  # publish this round's data, then die before reading it
            os.kill(os.getpid(), signal.SIGKILL)
        dead._wait = die  # type: ignore[method-assign]
        dead.all_reduce(torch.ones(4))
    res["round_with_data"] = dead.all_reduce(torch.ones(4)).tolist()
    t0 = time.monotonic()
    try:
        dead.all_reduce(torch.ones(4))
    except ShmError as exc:
        res["dead"] = (type(exc).__name__, str(exc), time.monotonic() - t0)
    try:
        dead.all_reduce(torch.ones(4))
    except ShmError as exc:
        res["after"] = str(exc)
    _save(res, out_dir, rank)
    os._exit(0)  # the gloo group has a dead member: skip its teardown


def _save(res: dict[str, Any], out_dir: str, rank: int) -> None:
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
        pickle.dump(res, fh)


@pytest.mark.slow  # spawns gloo ranks
def test_dead_or_stuck_peer_is_a_clear_error_within_the_bound(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    # forked from the fork server that has imported torch (shared with run_distributed), so the
    # two ranks do not import it again
    mp.set_forkserver_preload(FORKSERVER_PRELOAD)
    ctx = mp.get_context("forkserver")
    procs = [ctx.Process(target=_peer_failures, args=(r, str(tmp_path / "rdzv"), str(tmp_path)))
             for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(90)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    assert not alive, "a rank hung"
    assert procs[1].exitcode == -signal.SIGKILL
    assert procs[0].exitcode == 0
    r0 = pickle.loads((tmp_path / "rank0.pkl").read_bytes())
    r1 = pickle.loads((tmp_path / "rank1.pkl").read_bytes())
    assert r0["first"] == [2.0] * 4

    kind, msg, waited = r0["timeout"]
    assert kind == "ShmTimeoutError" and "rank(s) 1" in msg and "0.5 s" in msg
    assert 0.5 <= waited < 1.9  # the bound, not the peer's 2 s nap
    assert r1["late_round"] == [2.0] * 4
    assert "rank 0 failed in the shm transport" in r1["saw_failed_peer"]

    assert r0["round_with_data"] == [2.0] * 4  # rank 1 published before dying: that round stands
    kind, msg, waited = r0["dead"]
    assert kind == "ShmPeerError" and "rank 1 (pid" in msg and "died" in msg
    assert waited < 5.0, f"took {waited:.1f} s to notice a dead peer (timeout 60 s)"
    assert "failed earlier" in r0["after"]
    assert not (shm_segment.segment_dir() / r0["segment"]).exists()


# --------------------------------------------------------------------------- the segment alone


def test_stale_segments_of_dead_creators_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=60)
    dead_pid = int(done.stdout)
    dead = tmp_path / f"{shm_segment.PREFIX}{dead_pid}-1700000000-abcd1234"
    dead_bell = tmp_path / f"{dead.name}.r1"
    live = tmp_path / f"{shm_segment.PREFIX}{os.getpid()}-1700000000-abcd1234"
    other = tmp_path / "tplab-tp-notours"
    for f in (dead, live, other):
        f.write_bytes(b"x")
    os.mkfifo(dead_bell)
    assert sorted(shm_segment.remove_stale(tmp_path)) == [dead.name, dead_bell.name]
    assert not dead.exists() and not dead_bell.exists() and live.exists() and other.exists()


def test_segment_create_attach_and_checks(tmp_path: Path) -> None:
    lay = Layout(world_size=2, slot_bytes=128)
    seg = Segment.create(lay, tmp_path)
    assert seg.name.startswith(f"{shm_segment.PREFIX}{os.getpid()}-")
    assert seg.path.stat().st_size == lay.total_bytes == 4096 + 2 * 2 * 128
    other = Segment.attach(seg.path, lay, seg.nonce)
    seg.words[Layout.seq_word(1)] = 7
    assert other.words[Layout.seq_word(1)] == 7  # one memory, two mappings
    with pytest.raises(SegmentError, match="not the shared-memory segment rank 0 created"):
        Segment.attach(seg.path, lay, seg.nonce + 1)
    with pytest.raises(SegmentError, match="has 4608 bytes"):
        Segment.attach(seg.path, Layout(world_size=3, slot_bytes=128), seg.nonce)
    nonce = seg.nonce
    seg.close()
    assert not seg.path.exists()  # the creator unlinks on close
    other.close()
    with pytest.raises(SegmentError, match="every rank on one host"):
        Segment.attach(seg.path, lay, nonce)
    with pytest.raises(SegmentError, match="multiple of 64"):
        Layout(world_size=2, slot_bytes=100)


def test_weakly_ordered_cpus_are_refused_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from tplab.tp import shm, shm_setup

    monkeypatch.setattr(shm_setup.platform, "machine", lambda: "aarch64")
    assert "aarch64" in shm.unsupported_reason() and "--comm gloo" in shm.unsupported_reason()
    monkeypatch.setattr(shm_setup.platform, "machine", lambda: "x86_64")
    assert shm.unsupported_reason() == ""


def test_a_doorbell_wakes_its_sleeper_at_once_and_sleeps_out_its_timeout_otherwise(tmp_path: Path
                                                                                  ) -> None:
    from tplab.tp.shm_doorbell import Doorbells, fifo_path

    (tmp_path / "bells").mkdir()
    seg = tmp_path / "bells" / f"{shm_segment.PREFIX}{os.getpid()}-1-ab"
    a, b = Doorbells(fifo_path(seg, 0)), Doorbells(fifo_path(seg, 1))
    a.connect({1: fifo_path(seg, 1)})
    b.connect({0: fifo_path(seg, 0)})
    a.unlink()
    b.unlink()
    assert list((tmp_path / "bells").iterdir()) == []  # open, but nameless
    for _ in range(3):
        a.ring(1)  # rings pile up in the pipe...
    t0 = time.monotonic()
    b.sleep(5.0)
    assert time.monotonic() - t0 < 1.0
    t0 = time.monotonic()
    b.sleep(0.2)  # ...and are drained by the first sleep: this one waits its timeout
    assert 0.15 <= time.monotonic() - t0 < 2.0
    a.close()
    b.close()

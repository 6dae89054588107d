"""The client's event path, measured: bytes from events.jsonl -> decoded, de-duplicated events ->
dispatched to the lab's subscribers (and its stream.jsonl), as `tplab run` does it.

Why: at GPU speed the job emits a token event per decoded token per mode; the client must keep
up with a burst (e.g. after a reconnect it reads everything written meanwhile in one go). The
bar is 100k events/s. Prints events/s for decode alone and for decode + dispatch, best of
``--repeat`` runs, both per wall second and per CPU second of this process (on a shared, loaded
machine the wall figure mostly measures the other tenants; the CPU figure is what the path costs).

    python benchmarks/bench_event_path.py [--events N]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tplab.records.events import EventWriter  # noqa: E402
from tplab.lab.lab_config import LabConfig
from tplab.lab.orchestrator import Lab  # noqa: E402
from tplab.wire.event_tail import TailState, _accept  # noqa: E402


def make_stream(n: int) -> bytes:
    buf = io.StringIO()
    w = EventWriter([buf], src="job")
    for i in range(n):
        w.emit("token", mode="tp" if i % 2 else "single", prompt=i // 200 % 10, pos=i % 100,
               ms=1.234 + (i % 7) * 0.01, ar_ms=0.41, ms_instrumented=1.6, ar_calls=14,
               token=i % 600)
    return buf.getvalue().encode()


def bench_decode(data: bytes, chunk: int) -> tuple[int, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    state = TailState()
    n = 0
    for i in range(0, len(data), chunk):
        n += len(_accept(state, state.decoder.feed(data[i:i + chunk])))
    return n, time.perf_counter() - t0, time.process_time() - c0


async def bench_dispatch(data: bytes, chunk: int, tmp: Path) -> tuple[int, float, float, int]:
    lab = Lab(LabConfig(mock=True, out_dir=tmp))
    lab.stream.open_record(tmp / "stream.jsonl")
    sub = lab.subscribe()
    got = 0

    async def consume() -> None:
        nonlocal got
        async for _ in sub:
            got += 1

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    t0, c0 = time.perf_counter(), time.process_time()
    state = TailState()
    n = 0
    for i in range(0, len(data), chunk):
        batch = state.decoder.feed(data[i:i + chunk])
        accepted = _accept(state, batch)
        raw = state.decoder.last_raw if len(accepted) == len(batch) else b""
        lab.stream.publish_job(accepted, raw)  # as the lab's SSH session does
        n += len(accepted)
        await asyncio.sleep(0)  # let the subscriber run, as the lab's loop would
    lab.stream.close_subs()
    await task
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    lab.stream.close_record()
    return n, dt, dc, got


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--chunk", type=int, default=1 << 18, help="bytes per SFTP read (256 KiB)")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    import tempfile
    data = make_stream(a.events)
    print(f"events: {a.events}, {len(data) / a.events:.0f} B each, {len(data) / 1e6:.1f} MB, "
          f"read in {a.chunk // 1024} KiB chunks")
    dec_w = dec_c = dis_w = dis_c = 0.0
    for _ in range(a.repeat):
        n, dt, dc = bench_decode(data, a.chunk)
        assert n == a.events
        dec_w, dec_c = max(dec_w, n / dt), max(dec_c, n / dc)
        with tempfile.TemporaryDirectory() as tmp:
            n2, dt2, dc2, got = asyncio.run(bench_dispatch(data, a.chunk, Path(tmp)))
        assert got == n2 == a.events, (got, n2)
        dis_w, dis_c = max(dis_w, n2 / dt2), max(dis_c, n2 / dc2)
    print(f"{'':44}{'per wall s':>14}{'per CPU s':>14}")
    print(f"{'decode + exactly-once check':44}{dec_w:>14,.0f}{dec_c:>14,.0f}")
    print(f"{'decode + dispatch (1 subscriber + stream)':44}{dis_w:>14,.0f}{dis_c:>14,.0f}")
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min) during the run: {load:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    ok = dis_c >= 100_000
    print(f"bar 100k events/s (decode + dispatch, per CPU second): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

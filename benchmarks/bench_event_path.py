"""The client's event path, measured: bytes from events.jsonl -> decoded, checked, de-duplicated
events -> dispatched to the lab's subscribers (and its stream.jsonl), as `tplab run` does it.

Why: at GPU speed the job emits a token event per decoded token per mode; the client must keep
up with a burst (e.g. after a reconnect it reads everything written meanwhile in one go). The
bar is 100k events/s. Prints events/s for decode alone and for decode + dispatch, best of
``--repeat`` runs, both per wall second and per CPU second of this process (on a shared, loaded
machine the wall figure mostly measures the other tenants; the CPU figure is what the path costs).

``--baseline DIR`` measures another checkout of tplab (``git worktree add /tmp/base main``)
beside this one: ``--rounds`` rounds, each running both in fresh child processes one after the
other (the order alternating), and prints each figure's median per CPU second for both, their
ratio and the spread of the per-round ratios, so a change to the path is judged side by side
on the same machine at the same moment.

    python benchmarks/bench_event_path.py [--events N]
    python benchmarks/bench_event_path.py --baseline /tmp/base [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def make_stream(n: int) -> bytes:
    from tplab.records.events import EventWriter
    buf = io.StringIO()
    w = EventWriter([buf], src="job")
    for i in range(n):
        w.emit("token", mode="tp" if i % 2 else "single", prompt=i // 200 % 10, pos=i % 100,
               ms=1.234 + (i % 7) * 0.01, ar_ms=0.41, ms_instrumented=1.6, ar_calls=14,
               token=i % 600)
    return buf.getvalue().encode()


def bench_decode(data: bytes, chunk: int) -> tuple[int, float, float]:
    from tplab.wire.event_tail import TailState, _accept
    t0, c0 = time.perf_counter(), time.process_time()
    state = TailState()
    n = 0
    for i in range(0, len(data), chunk):
        n += len(_accept(state, state.decoder.feed(data[i:i + chunk])))
    return n, time.perf_counter() - t0, time.process_time() - c0


async def bench_dispatch(data: bytes, chunk: int, tmp: Path) -> tuple[int, float, float, int]:
    from tplab.lab.lab_config import LabConfig
    from tplab.lab.orchestrator import Lab
    from tplab.wire.event_tail import TailState, _accept
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


def measure(events: int, chunk: int, repeat: int) -> dict[str, float]:
    """Best of ``repeat`` runs of both figures, per wall and per CPU second."""
    import tempfile
    data = make_stream(events)
    out = {"bytes_per_event": len(data) / events, "decode_wall": 0.0, "decode_cpu": 0.0,
           "dispatch_wall": 0.0, "dispatch_cpu": 0.0}
    for _ in range(repeat):
        n, dt, dc = bench_decode(data, chunk)
        assert n == events
        out["decode_wall"] = max(out["decode_wall"], n / dt)
        out["decode_cpu"] = max(out["decode_cpu"], n / dc)
        with tempfile.TemporaryDirectory() as tmp:
            n2, dt2, dc2, got = asyncio.run(bench_dispatch(data, chunk, Path(tmp)))
        assert got == n2 == events, (got, n2)
        out["dispatch_wall"] = max(out["dispatch_wall"], n2 / dt2)
        out["dispatch_cpu"] = max(out["dispatch_cpu"], n2 / dc2)
    return out


def _child(tree: Path, a: argparse.Namespace) -> dict[str, float]:
    """One measurement of the tplab in ``tree``, in a fresh process (its own imports)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree), "--json",
           "--events", str(a.events), "--chunk", str(a.chunk), "--repeat", str(a.repeat)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def side_by_side(a: argparse.Namespace) -> int:
    base = Path(a.baseline).resolve()
    if not (base / "tplab" / "records" / "events.py").is_file():
        print(f"{base} is not a checkout of tplab (no tplab/records/events.py)", file=sys.stderr)
        return 2
    rows: dict[str, list[dict[str, float]]] = {"baseline": [], "this": []}
    for r in range(a.rounds):
        order = [("baseline", base), ("this", HERE)]
        for name, tree in (order if r % 2 == 0 else order[::-1]):
            rows[name].append(_child(tree, a))
    print(f"events: {a.events} per run, best of {a.repeat} runs, {a.rounds} rounds (baseline "
          f"{base}, this {HERE}), per CPU second")
    print(f"{'':44}{'baseline':>12}{'this':>12}{'ratio':>8}  spread of the rounds' ratios")
    for key, label in (("decode_cpu", "decode + exactly-once check"),
                       ("dispatch_cpu", "decode + dispatch (1 subscriber + stream)")):
        b = [x[key] for x in rows["baseline"]]
        t = [x[key] for x in rows["this"]]
        ratios = sorted(ti / bi for ti, bi in zip(t, b))
        print(f"{label:44}{statistics.median(b):>12,.0f}{statistics.median(t):>12,.0f}"
              f"{statistics.median(t) / statistics.median(b):>8.2f}  "
              f"{ratios[0]:.2f}..{ratios[-1]:.2f} (median {statistics.median(ratios):.2f})")
    b_bytes = rows["baseline"][0]["bytes_per_event"]
    t_bytes = rows["this"][0]["bytes_per_event"]
    print(f"bytes per token event: baseline {b_bytes:.0f}, this {t_bytes:.0f}")
    _load()
    return 0


def _load() -> None:
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--chunk", type=int, default=1 << 18, help="bytes per SFTP read (256 KiB)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--baseline", metavar="DIR",
                   help="another checkout of tplab, measured beside this one (see above)")
    p.add_argument("--rounds", type=int, default=5, help="rounds with --baseline (default 5)")
    p.add_argument("--tree", help=argparse.SUPPRESS)   # a child: the tplab to import
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child's answer
    a = p.parse_args()
    if a.baseline:
        return side_by_side(a)
    sys.path.insert(0, str(Path(a.tree).resolve() if a.tree else HERE))
    got: dict[str, Any] = measure(a.events, a.chunk, a.repeat)
    if a.json:
        print(json.dumps(got))
        return 0
    print(f"events: {a.events}, {got['bytes_per_event']:.0f} B each, "
          f"{got['bytes_per_event'] * a.events / 1e6:.1f} MB, read in {a.chunk // 1024} KiB chunks")
    print(f"{'':44}{'per wall s':>14}{'per CPU s':>14}")
    print(f"{'decode + exactly-once check':44}{got['decode_wall']:>14,.0f}{got['decode_cpu']:>14,.0f}")
    print(f"{'decode + dispatch (1 subscriber + stream)':44}{got['dispatch_wall']:>14,.0f}"
          f"{got['dispatch_cpu']:>14,.0f}")
    _load()
    ok = got["dispatch_cpu"] >= 100_000
    print(f"bar 100k events/s (decode + dispatch, per CPU second): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

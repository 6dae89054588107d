"""The same mock lab on each provider's mock cloud, side by side: wall time, the calls per route,
and how long after the container started the client's first heartbeat came (the figure the boot
guard's default bound is sized from).

Why: a second provider must not make the lab slower or chattier than the first, and the guard's
bound must come from what the client still has to do once the container runs (see RUNNING,
connect, upload, first heartbeat), measured, not guessed. Each round runs the labs one after the
other under the same conditions (same config, same machine load); the table gives each figure's
median and spread over the rounds and the ratio Vast/RunPod.

    python benchmarks/bench_providers.py [--rounds N] [--prompts N] [--new-tokens N] [--sweep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROVIDERS = ("runpod", "vast")
SHOWED_UP = re.compile(r"the client showed up after (\d+) s")


def one_lab(provider: str, root: Path, args: argparse.Namespace) -> dict:
    """One mock lab on ``provider``'s mock: wall time, calls per route, guard's first-heartbeat."""
    from tplab.cloud import registry
    from tplab.lab.lab_config import LabConfig
    from tplab.lab.orchestrator import Lab
    from tplab.mock.handle import start_mock_cloud

    cloud = start_mock_cloud(provider=provider, boot_delay_s=1.0, state_dir=root / "state")
    try:
        os.environ[registry.package(provider).KEY_VAR] = cloud.api_key
        cfg = LabConfig(mock=True, provider=provider, api_url=cloud.api_url,
                        num_prompts=args.prompts, new_tokens=args.new_tokens, sweep=args.sweep,
                        out_dir=root / "out")
        t0 = time.monotonic()
        outcome = asyncio.run(Lab(cfg).run())
        wall = time.monotonic() - t0
        calls = cloud.calls()
    finally:
        cloud.stop()
    guard = (root / "out" / "guard.log")
    found = SHOWED_UP.search(guard.read_text()) if guard.is_file() else None
    return {"status": outcome.status, "gone": outcome.verified_gone, "wall_s": wall,
            "calls": calls, "first_beat_s": float(found.group(1)) if found else None}


def _stat(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    spread = (max(values) - min(values)) / 2 if len(values) > 1 else 0.0
    return f"{med:7.1f} ± {spread:4.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--prompts", type=int, default=10)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--sweep", action="store_true", help="also run the all-reduce sweep")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tplab-bench-providers-") as tmp:
        os.environ["TPLAB_HOME"] = str(Path(tmp) / "home")
        runs: dict[str, list[dict]] = {name: [] for name in PROVIDERS}
        for r in range(args.rounds):
            for name in PROVIDERS:
                run = one_lab(name, Path(tmp) / f"{name}-{r}", args)
                runs[name].append(run)
                print(f"round {r + 1} {name}: {run['status']} gone={run['gone']} "
                      f"{run['wall_s']:.1f} s, first heartbeat {run['first_beat_s']} s after "
                      "the container started", flush=True)
    print(f"\n{'':24}{'runpod':>16}{'vast':>16}{'vast/runpod':>14}")
    for what in ("wall_s", "first_beat_s"):
        vals = {n: [x[what] for x in runs[n] if x[what] is not None] for n in PROVIDERS}
        ratio = (statistics.median(vals["vast"]) / statistics.median(vals["runpod"])
                 if vals["vast"] and vals["runpod"] and statistics.median(vals["runpod"]) else None)
        print(f"{what:24}{_stat(vals['runpod']):>16}{_stat(vals['vast']):>16}"
              f"{(f'{ratio:.2f}x' if ratio else '-'):>14}")
    for name in PROVIDERS:
        print(f"\ncalls per route, one mock {name} lab (round 1):")
        for route, n in sorted(runs[name][0]["calls"].items()):
            print(f"  {n:5d}  {route}")
    return 0 if all(x["status"] == "COMPLETE" and x["gone"] for v in runs.values() for x in v) \
        else 1


if __name__ == "__main__":
    sys.exit(main())

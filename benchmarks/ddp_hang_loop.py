"""Run the DDP lab N times in a row and count hangs: the proof that `tplab ddp` tears down cleanly.

Why: gloo's process group could deadlock in its destructor at the end of a run (issue 22), about one
run in a few dozen. One run proves nothing; this loop runs the lab as the test does (two gloo ranks,
the test's tiny MiniGPT, 40 steps), each in its own process session with an outer bound, and counts
as a hang any run that passes that bound (its whole session is then killed), any run whose ranks had
to be killed after the results were written (the lab's own teardown bound), and any run that leaves
a rank process behind.

    .venv/bin/python benchmarks/ddp_hang_loop.py --runs 30            # prints one line per run
    .venv/bin/python benchmarks/ddp_hang_loop.py --runs 30 --steps 300 --bound-s 600

Not a timed assert: it prints runs, hangs, failures and the wall time per run (median, spread).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ONE_RUN = """
import json, sys
from pathlib import Path
from tplab.sidelabs.ddp_lab import DDPSettings, run
from tplab.model.config import GPTConfig
tiny = GPTConfig(vocab_size=640, block_size=48, n_layer=1, n_head=2, d_model=32, d_ff=64)
s = DDPSettings(nproc=2, steps=int(sys.argv[2]), batch_size=8, lr=1e-2, model=tiny.to_dict(), timeout_s=60.0)
r = run(Path(sys.argv[1]), s)
print(json.dumps({"teardown": r["teardown"], "loss_fell": r["loss_fell"], "params_in_sync": r["params_in_sync"]}))
"""


def _session_procs(sid: int) -> dict[int, str]:
    """Processes still alive in the run's session (its ranks, if any outlived it): pid -> command."""
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if os.getsid(int(d.name)) == sid and state != "Z":  # a zombie is already dead
                    procs[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
            except OSError:
                pass
    return procs


def one_run(i: int, steps: int, bound_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ddp-loop-") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", ONE_RUN, out, str(steps)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=bound_s)
            outcome = "ok" if proc.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            outcome = "hang"
        wall = time.monotonic() - t0
        time.sleep(0.5)
        left = _session_procs(proc.pid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    r = {"run": i, "outcome": outcome, "wall_s": wall, "left_behind": left}
    if outcome == "ok":
        r.update(json.loads(stdout.strip().splitlines()[-1]))
        if r["teardown"] != "clean":
            r["outcome"] = "hang"  # the lab's own bound had to kill a rank stuck in teardown
    else:
        r["stderr_tail"] = stderr.strip().splitlines()[-3:]
    if left:
        r["outcome"] = "hang"
    return r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--bound-s", type=float, default=300.0, help="outer bound on one run (default 300 s)")
    p.add_argument("--json", type=Path, help="also write every run's record to this file")
    a = p.parse_args()
    runs = []
    for i in range(1, a.runs + 1):
        r = one_run(i, a.steps, a.bound_s)
        runs.append(r)
        extra = f"  teardown: {r['teardown']}" if "teardown" in r else f"  {r.get('stderr_tail', '')}"
        print(f"run {i:3d}/{a.runs}: {r['outcome']:6s} {r['wall_s']:6.1f} s{extra}", flush=True)
    walls = [r["wall_s"] for r in runs]
    hangs = sum(r["outcome"] == "hang" for r in runs)
    failed = sum(r["outcome"] == "failed" for r in runs)
    print(f"\n{len(runs)} runs: {len(runs) - hangs - failed} clean, {hangs} hangs, {failed} failed; "
          f"wall per run median {statistics.median(walls):.1f} s "
          f"(min {min(walls):.1f}, max {max(walls):.1f}, stdev {statistics.pstdev(walls):.1f})")
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1))
    return 0 if hangs == failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

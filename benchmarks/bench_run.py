"""`tplab run --mock` against the same job run bare with torchrun, side by side in one run.

Why: the lab adds a cloud (mock API, pod boot), SSH, SFTP upload, detached launch, live event
streaming, fetch, terminate + verify, the ledger and the manifest around the job. This measures
what that costs in wall time: the default lab (10 prompts x 100 tokens, single and TP=2 on this
CPU, with the all-reduce sweep), bare first, then through tplab, and prints both and the ratio
(goal <= 1.5x; bar: tplab run --mock <= 60 s on a 2-core machine). The lab's own stage times
(from its stream.jsonl) shows where the difference goes.

    python benchmarks/bench_run.py [--prompts N] [--new-tokens N] [--no-sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _checkpoint(tmp: Path) -> tuple[Path, Path, str]:
    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS, "shipped checkpoint"
    import torch
    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer
    prompts = ["he goed to school", "i has eat", "she dont like apples", "they was happy",
               "we is going home", "he have a cat", "she runned fast", "i seen it",
               "you was late", "it dont work"]
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in prompts for w in p.split())
    ckpt = save_checkpoint(tmp / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "bench"})
    (tmp / "prompts.txt").write_text("\n".join(prompts) + "\n")
    return ckpt, tmp / "prompts.txt", "random-init checkpoint of the shipped shape (none shipped)"


def _timed(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.call(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    return time.perf_counter() - t0, rc


def _stage_times(stream: Path) -> list[tuple[float, str]]:
    """When each stage of the lab and of the job began, in s since the first."""
    out, t0 = [], None
    for line in stream.read_text().splitlines():
        ev = json.loads(line)
        if ev["type"] == "phase":
            t0 = t0 or ev["ts"]
            out.append((ev["ts"] - t0, f"{ev['src']}:{ev['name']}"))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=10)
    p.add_argument("--new-tokens", type=int, default=100)
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument("--instrumented-prompts", type=int, default=3,
                   help="prompts with the instrumented TP pass, in both runs (tplab run's default)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tplab-bench-") as tmp_s:
        tmp = Path(tmp_s)
        ckpt, prompts, what = _checkpoint(tmp)
        env = {**os.environ, "TPLAB_HOME": str(tmp / "home"), "PYTHONPATH": str(REPO)}
        env.pop("RUNPOD_API_KEY", None)
        job = ["--checkpoint", str(ckpt), "--prompts", str(prompts),
               "--num-prompts", str(a.prompts), "--new-tokens", str(a.new_tokens),
               "--instrumented-prompts", str(a.instrumented_prompts)]
        if a.no_sweep:
            job.append("--no-sweep")
        bare_argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                     "--nproc-per-node=2", "-m", "tplab.job", *job, "--out", str(tmp / "bare")]
        lab_argv = [sys.executable, "-m", "tplab", "run", "--mock", "--out", str(tmp / "lab"),
                    "--checkpoint", str(ckpt), "--prompts-file", str(prompts),
                    "--prompts", str(a.prompts), "--new-tokens", str(a.new_tokens),
                    "--instrumented-prompts", str(a.instrumented_prompts)]
        if a.no_sweep:
            lab_argv.append("--no-sweep")
        print(f"job: {a.prompts} prompts x {a.new_tokens} tokens, single and TP=2, "
              f"sweep {'off' if a.no_sweep else 'on'}; {what}")
        bare_s, bare_rc = _timed(bare_argv, env, tmp / "bare.log")
        lab_s, lab_rc = _timed(lab_argv, env, tmp / "lab.log")
        if bare_rc or lab_rc:
            print(f"a run failed: bare rc={bare_rc}, tplab rc={lab_rc}")
            print((tmp / "lab.log").read_text()[-3000:])
            return 1
        bare_res = json.loads((tmp / "bare" / "results.json").read_text())
        lab_res = json.loads((tmp / "lab" / "results.json").read_text())
        print(f"{'bare torchrun (local)':32}{bare_s:8.1f} s   job wall {bare_res['wall_s']:.1f} s")
        print(f"{'tplab run --mock':32}{lab_s:8.1f} s   job wall {lab_res['wall_s']:.1f} s")
        print(f"{'ratio tplab / bare':32}{lab_s / bare_s:8.2f}x  (goal <= 1.5x)")
        print(f"{'bar: tplab run --mock <= 60 s':32}{'met' if lab_s <= 60 else 'NOT met':>8}")
        print(f"lab overhead outside the job: {lab_s - lab_res['wall_s']:.1f} s "
              f"(bare: {bare_s - bare_res['wall_s']:.1f} s of torchrun start/stop)")
        print("tplab's stages (s since preflight):")
        for t, name in _stage_times(tmp / "lab" / "stream.jsonl"):
            print(f"  {t:7.2f}  {name}")
        try:
            print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} CPUs")
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

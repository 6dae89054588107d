"""The end of a mock lab: from the job's ``finished`` to the lab's ``fetch``, side by side in one run.

Why: once the job has said ``finished`` (results written, outputs matched), the lab waits for
torchrun's exit status before it fetches the run and terminates the pod that bills it. That
wait was torchrun's and each rank's interpreter unloading torch after the run (most of a
second), which the launch now skips (``tplab.job.torchrun``, and ``python -m tplab.job``
ending its rank once the job returned). This runs the same tiny mock lab alternately with the
launch as it is and with the ranks under plain ``python -m torch.distributed.run`` exiting as
any interpreter does (the launch line as it was), and prints both arms' seconds from
``finished`` to ``fetch`` and the whole lab, their medians and spread, and the ratio.

    .venv/bin/python benchmarks/bench_lab_end.py [--labs N]      # N labs per arm (default 5)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: each rank as any interpreter runs it: the job's main, then the interpreter's own exit (a
#: script sent with the plain arm's upload)
PLAIN_RANK = "import sys\nfrom tplab.job.run import main\nsys.exit(main())\n"
PLAIN_RANK_FILE = "plain_rank.py"


def plain_launch(command: str, python: str) -> str:
    """The launch line with torchrun and its ranks exiting as plain interpreters do."""
    import shlex
    fast = f"{shlex.quote(python)} -m tplab.job.torchrun "
    assert fast in command and " -m tplab.job " in command, command
    command = command.replace(fast, f"{shlex.quote(python)} -m torch.distributed.run ")
    return command.replace(" -m tplab.job ", f" {PLAIN_RANK_FILE} ", 1)


def _gaps(stream: Path) -> tuple[float, float]:
    """(finished -> fetch, preflight -> done) in seconds, from the lab's stream.jsonl."""
    at: dict[str, float] = {}
    for line in stream.read_text().splitlines():
        ev = json.loads(line)
        if ev["type"] == "phase":
            at.setdefault(f"{ev['src']}:{ev['name']}", ev["ts"])
    return at["lab:fetch"] - at["job:finished"], at["lab:done"] - at["lab:preflight"]


async def _one_lab(cloud, assets: tuple[Path, Path], out: Path, plain: bool) -> tuple[float, float]:
    from tplab.lab.lab_config import COMPLETE, LabConfig
    from tplab.lab.orchestrator import Lab
    from tplab.lab.providers import provider_for
    from tplab.lab import bundle
    from tplab.wire import remote
    real, real_items = remote.launch_command, bundle.bundle_items
    if plain:
        script = out.parent / PLAIN_RANK_FILE
        script.write_text(PLAIN_RANK)
        remote.launch_command = lambda spec: plain_launch(real(spec), spec.python)  # type: ignore[assignment]
        bundle.bundle_items = lambda ckpt, prompts: [  # type: ignore[assignment]
            *real_items(ckpt, prompts), remote.UploadItem(script, PLAIN_RANK_FILE)]
    try:
        cfg = LabConfig(mock=True, num_prompts=2, new_tokens=8, warmup=1, sweep=False,
                        profile_tokens=0, checkpoint=assets[0], prompts=assets[1], out_dir=out,
                        api_url=cloud.api_url)
        outcome = await Lab(cfg, provider=provider_for(cloud.api_key, cloud.api_url)).run()
    finally:
        remote.launch_command, bundle.bundle_items = real, real_items  # type: ignore[assignment]
    assert outcome.status == COMPLETE, outcome.reason
    return _gaps(out / "stream.jsonl")


def _assets(tmp: Path) -> tuple[Path, Path]:
    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    import torch
    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer
    prompts = ["he goed to school", "i has eat"]
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in prompts for w in p.split())
    ckpt = save_checkpoint(tmp / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "bench"})
    (tmp / "prompts.txt").write_text("\n".join(prompts) + "\n")
    return ckpt, tmp / "prompts.txt"


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.2f} s  ({min(xs):.2f}-{max(xs):.2f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--labs", type=int, default=5, help="labs per arm (default 5)")
    a = p.parse_args()
    from tplab.mock.handle import start_mock_cloud
    with tempfile.TemporaryDirectory(prefix="tplab-bench-end-") as tmp_s:
        tmp = Path(tmp_s)
        os.environ["TPLAB_HOME"] = str(tmp / "home")
        assets = _assets(tmp)
        cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp / "mock-state")
        arms: dict[str, list[tuple[float, float]]] = {"as launched now": [], "plain exits": []}
        try:
            for i in range(a.labs):
                for name in (("as launched now", "plain exits") if i % 2 == 0
                             else ("plain exits", "as launched now")):
                    out = tmp / f"lab-{i}-{name.split()[0]}"
                    arms[name].append(asyncio.run(_one_lab(cloud, assets, out,
                                                           name == "plain exits")))
        finally:
            cloud.stop()
    print(f"tiny mock lab (2 prompts x 8 tokens), {a.labs} labs per arm, alternated; "
          "median (min-max)")
    print(f"{'':18}{'finished -> fetch':>28}{'whole lab':>28}")
    for name, rows in arms.items():
        print(f"{name:18}{_spread([r[0] for r in rows]):>28}{_spread([r[1] for r in rows]):>28}")
    new, old = arms["as launched now"], arms["plain exits"]
    gap = statistics.median(r[0] for r in new) / statistics.median(r[0] for r in old)
    whole = statistics.median(r[1] for r in new) / statistics.median(r[1] for r in old)
    print(f"{'ratio now / plain':18}{gap:>22.2f}x{whole:>27.2f}x")
    try:
        print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs ({time.strftime('%Y-%m-%d %H:%M')})")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

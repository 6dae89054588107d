"""Refuse before spending what is knowable before spending: the job's inputs, checked here.

Why a subprocess: the checks are the job's own (``tplab.job.input_check``: the checkpoint's
format and shapes, every sharded size divisible by the TP degree, the prompts, the block size),
so the refusal is the sentence the job would have written on the pod after a billed boot. They
need torch, which the client side never imports (the dashboard's first paint); a subprocess
pays for torch once, in parallel with the rest of preflight, and leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys

from tplab.home.paths import with_source_on_path
from tplab.lab.lab_config import FAILED, LabConfig, LabStop

TIMEOUT_S = 180.0
#: how long a stopped check's killed child is waited for
REAP_S = 5.0


async def check_job_inputs(config: LabConfig) -> str | None:
    """None when the job's inputs pass its own checks; raises LabStop with the job's sentence
    when they do not. When the check itself cannot run (no torch here, a crash, a timeout) the
    answer is a warning to show, and the pod's job checks again."""
    cmd = [sys.executable, "-m", "tplab.job.input_check", "--checkpoint", str(config.checkpoint),
           "--prompts", str(config.prompts), "--num-prompts", str(config.num_prompts),
           "--new-tokens", str(config.new_tokens), "--world-size", str(config.gpus)]
    env = with_source_on_path(dict(os.environ))
    for name in [k for k in env if k.endswith("_API_KEY")]:  # the check needs no secret
        env.pop(name)
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env)
    except OSError as exc:
        return f"the job's inputs could not be checked here ({exc}); the pod checks them"
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return (f"checking the job's inputs took over {TIMEOUT_S:.0f} s; skipped (the pod "
                "checks them)")
    except asyncio.CancelledError:
        # the lab stopped before the check answered: the child is ended and reaped here (an
        # unreaped one leaves its pipes to a loop that may be closed by the time they go)
        proc.kill()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(proc.wait(), REAP_S)
        raise
    try:
        answer = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return f"the job's inputs could not be checked here ({tail[0][:200]}); the pod checks them"
    if not answer.get("ok"):
        raise LabStop(FAILED, f"{answer.get('error') or 'the job refused its inputs'} "
                      "Nothing was created.")
    return None

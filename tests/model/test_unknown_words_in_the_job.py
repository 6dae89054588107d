"""The lab job writes unknown words back: its `prompt_done` text is the correction the user reads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tplab.records.events import read_events
from tplab.home.paths import DEFAULT_CHECKPOINT

pytestmark = pytest.mark.slow

PROMPTS = {"ingrid goed to the bakery yesterday": "ingrid went to the bakery yesterday",
           "the otters was hungry": "the otters were hungry"}


def test_job_prompt_done_carries_unknown_words_through_single_and_tp(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tplab", "local", "--tp", "2", "--out", str(out), "--checkpoint",
         str(DEFAULT_CHECKPOINT), "--prompts-file", str(prompts), "--prompts", "2", "--new-tokens", "16",
         "--warmup", "0", "--no-sweep", "--instrumented-prompts", "1", "--timeout", "150", "--quiet"],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stdout + done.stderr
    texts = {(e["mode"], e["prompt"]): e["text"] for e in read_events(str(out / "events.jsonl"))
             if e.type == "prompt_done"}
    for i, want in enumerate(PROMPTS.values()):
        assert texts[("single", i)] == texts[("tp", i)] == want

"""The job end to end under the oldest torch the pod side supports: the pod bundle, copied
exactly as the lab uploads it (``tplab.lab.bundle.bundle_items``), run by torchrun with 2 ranks
on that torch — over shared memory with gloo alongside, the d_model sweep included, on prompts
with words the model does not know, which the job writes back into the corrections the user
reads — and the pod's own check refusing, in one sentence and before any timing, a GPU lab on a
pod whose torch sees no GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e_fixtures import assert_profiled_pass
from tests.pod_torch import run_pod
from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
from tplab.lab.bundle import bundle_items
from tplab.records.events import ErrorEvent, StageEvent, PromptDoneEvent, read_events
from tplab.records.torch_support import OLDEST_TORCH_PIN

pytestmark = pytest.mark.slow  # torchrun under a second interpreter


#: the profiled pass's tokens per mode in the whole job
PROFILED = 8

#: prompts with words outside the model's vocabulary, and the corrections the user must read
UNKNOWN_WORDS = {"ingrid goed to the bakery yesterday": "ingrid went to the bakery yesterday",
                 "the otters was hungry": "the otters were hungry"}


def _pod_dir(tmp_path: Path, prompts: Path = DEFAULT_PROMPTS) -> Path:
    """What a pod's run directory holds after the upload, and nothing else."""
    pod = tmp_path / "pod"
    for item in bundle_items(DEFAULT_CHECKPOINT, prompts):
        dest = pod / item.remote
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item.local, dest)
    return pod


def _torchrun(pod: Path, *job_args: str, timeout_s: float = 240) -> tuple[int, str]:
    done = run_pod(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                    "-m", "tplab.job", "--checkpoint", "checkpoint.pt", "--prompts", "prompts.txt",
                    "--out", "out", *job_args], cwd=pod, timeout_s=timeout_s)
    return done.returncode, done.stdout


def test_the_uploaded_bundle_runs_the_whole_job_on_the_oldest_torch_and_writes_unknown_words_back(
        tmp_path):
    """Irreducible: torchrun and two ranks importing the oldest torch in a second interpreter,
    and one whole job on the shipped model (the one run that also serves the unknown words)."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(UNKNOWN_WORDS) + "\n")
    pod = _pod_dir(tmp_path, prompts)
    rc, log = _torchrun(pod, "--num-prompts", "2", "--new-tokens", "16", "--warmup", "1",
                        "--comm", "both", "--sweep-max-bytes", "8192",
                        "--sweep-d-model", "32,64", "--sweep-tokens", "4",
                        "--sweep-budget-s", "600",  # a busy machine skips no size
                        # each rank's split is held to its clock by the median of its steps:
                        # eight, not four, so that two steps descheduled on a loaded host (the
                        # suite's three workers on two cores, shm's ranks spinning) cannot move it
                        "--profile-tokens", str(PROFILED))
    assert rc == 0, log[-4000:]
    r = json.loads((pod / "out" / "results.json").read_text())
    assert r["env"]["torch_version"].startswith(OLDEST_TORCH_PIN)
    assert r["ok"] is True and r["outputs_match"] is True
    assert set(r["transports"]) == {"shm", "gloo"}
    for name, t in r["transports"].items():
        assert t["outputs_match"] is True and t["mismatched_prompts"] == [], name
        assert t["tp_per_token_ms"] > 0 and t["sweep"]["points"], name
    measured = {p["d_model"]: p for p in r["d_model_sweep"]}
    assert sorted(measured) == [32, 64] and r["d_model_sweep_skipped"] == []
    assert all(p["outputs_match"] and p["single_ms"] > 0 and p["tp_ms"] > 0
               for p in measured.values())
    phases = [e.name for e in read_events(str(pod / "out" / "events.jsonl"))
              if isinstance(e, StageEvent)]
    assert phases[-1] == "finished" and "d_model_sweep" in phases and "profile" in phases
    # the profiled pass on the oldest torch's profiler, over shm
    tl = assert_profiled_pass(pod / "out", tokens=PROFILED)
    assert tl["comm"] == "shm" and OLDEST_TORCH_PIN in tl["taken"]["profiler"]
    # -- from test_job_prompt_done_carries_unknown_words_through_single_and_tp
    texts = {(e.mode, e.prompt): e.text for e in read_events(str(pod / "out" / "events.jsonl"))
             if isinstance(e, PromptDoneEvent)}
    for i, want in enumerate(UNKNOWN_WORDS.values()):
        assert texts[("single", i)] == texts[("tp", i)] == want


def test_a_gpu_lab_on_a_pod_whose_torch_sees_no_gpu_is_refused_before_any_timing(tmp_path):
    """Rank 0 as torchrun starts it (its variables set): the check comes before the process
    group is joined, so no peer is needed to see the refusal."""
    pod = _pod_dir(tmp_path)
    done = run_pod(["-c", "import os, sys; os.environ.update(RANK='0', LOCAL_RANK='0', "
                    "WORLD_SIZE='2'); from tplab.job.run import main; sys.exit(main(sys.argv[1:]))",
                    "--checkpoint", "checkpoint.pt", "--prompts", "prompts.txt", "--out", "out",
                    "--device", "cuda", "--num-prompts", "1", "--new-tokens", "2"],
                   cwd=pod, timeout_s=120)
    rc, log = done.returncode, done.stdout
    assert rc == 1
    events = list(read_events(str(pod / "out" / "events.jsonl")))
    (err,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert err.fatal is True
    assert err.msg.startswith(f"torch {OLDEST_TORCH_PIN}") and "sees no GPU on this pod" in err.msg
    assert "\n" not in err.msg and "Traceback" not in log.split(err.msg)[0]
    assert not [e for e in events if e.type in ("phase", "token")], "timing began before the check"

"""The helpers both sides share: the pid-alive check, the atomic JSON writer, the job's flags."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from tplab.records.jsonfile import write_json
from tplab.records.job_flags import JOB_FLAGS, add_job_flags
from tplab.records.pids import pid_alive


def test_a_killed_unreaped_process_counts_as_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # a zombie until reaped: it must already count as dead
        assert not pid_alive(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(0) and not pid_alive(-1)


def test_write_json_replaces_whole_files_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "sub" / "results.json"
    write_json(path, {"a": 1})
    write_json(path, {"a": 2, "b": [1.5]})
    assert json.loads(path.read_text()) == {"a": 2, "b": [1.5]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # records may carry keys
    with pytest.raises(ValueError):
        write_json(path, {"a": float("nan")})  # not JSON: refused, the old file kept
    assert json.loads(path.read_text()) == {"a": 2, "b": [1.5]}
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def _parser(client: bool, **defaults) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_job_flags(p, tuple(JOB_FLAGS), client=client, defaults=defaults)
    return p


@pytest.mark.parametrize("argv", [["--num-prompts", "0"], ["--new-tokens", "-3"],
                                  ["--warmup", "-1"], ["--sweep-budget-s", "0"],
                                  ["--sweep-d-model", "64,big"], ["--comm", "nccl"],
                                  ["--instrumented-prompts", "1.5"]])
def test_the_job_and_its_clients_refuse_the_same_values(argv, capsys):
    """One declaration: what a client refuses, the job refuses too (and the other way round)."""
    for client in (False, True):
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            _parser(client).parse_args(argv)


def test_a_clients_flags_parse_into_the_jobs_names():
    args = _parser(True, instrumented_prompts=3).parse_args(
        ["--prompts", "4", "--sweep-d-model", "256, 64", "--no-sweep", "--comm", "shm"])
    assert (args.num_prompts, args.sweep_d_model, args.no_sweep, args.comm) == (4, "64,256",
                                                                                  True, "shm")
    assert args.instrumented_prompts == 3 and args.new_tokens == 100
    job = _parser(False).parse_args(["--num-prompts", "4", "--sweep-d-model", "none"])
    assert job.num_prompts == 4 and job.sweep_d_model == "" and job.instrumented_prompts is None
    with pytest.raises((SystemExit, argparse.ArgumentError)):
        _parser(False).parse_args(["--prompts", "4"])  # the job's --prompts is the file

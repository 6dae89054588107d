"""The job's flags, declared once: the job and its clients parse and refuse them alike."""

from __future__ import annotations

import argparse

import pytest

from tplab.records.job_flags import JOB_FLAGS, add_job_flags


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

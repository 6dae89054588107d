"""Blocks A and B as the lab sheet puts them (tplab/handin/minitrain.py): made from tplab's own code,
and the hand-in's own tests pass where the student would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tplab import __version__
from tplab.handin import minitrain
from tplab.lab.bundle import pod_code_items


def test_tensor_parallel_is_tplabs_layers_with_one_import_made_absolute():
    made = minitrain.tensor_parallel_source(__version__)
    layers = minitrain.LAYERS.read_text(encoding="utf-8")
    body = made.split("\n", minitrain.HEADER.count("\n"))[-1]
    assert body == layers.replace("from .collectives import (",
                                  "from tplab.tp.collectives import (", 1)
    for name in ("ColumnParallelLinear", "RowParallelLinear", "ShardedEmbedding"):
        assert f"class {name}(" in made


def test_the_hand_in_carries_the_pod_code_byte_for_byte_and_the_sheets_four_tests():
    files = minitrain.files(__version__)
    pod = {f"src/{i.remote}": i.local.read_bytes() for i in pod_code_items()}
    assert pod and all(files[k] == v for k, v in pod.items())
    tests = files[minitrain.TESTS_FILE].decode()
    for name in ("test_column_parallel_matches_single_gpu", "test_row_parallel_matches_single_gpu",
                 "test_sharded_embedding_lookup", "test_mlp_pattern_minimal"):
        assert f"def {name}(" in tests
    assert minitrain.RUN_FILE == "experiments/35-tp-inference/run.py"


@pytest.mark.slow  # two interpreters import torch; the four tests spawn two gloo ranks each
def test_the_generated_tests_pass_and_run_py_starts_the_job(tmp_path: Path) -> None:
    """Pays for stop condition 5 on the generated code: a fresh interpreter runs the hand-in's
    tests (four forks of two gloo ranks) with only the hand-in's src/ on its path, and run.py
    reaches the job's own argument parser."""
    for rel, data in minitrain.files(__version__).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path / "src")
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:xdist", "tests/minitrain"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=240)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert "4 passed" in tests.stdout
    run = subprocess.run([sys.executable, minitrain.RUN_FILE, "--help"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "--checkpoint" in run.stdout, run.stderr[-2000:]

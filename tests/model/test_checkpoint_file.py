"""The checkpoint read without torch says what ``torch.load`` + ``load_checkpoint`` say, word for
word, and hands every file it does not recognise to torch; the lab's input check then runs with
no torch at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from tplab.job import input_check
from tplab.model.checkpoint import (CheckpointError, expected_shapes, load_checkpoint,
                                    save_checkpoint)
from tplab.model.checkpoint_file import Unrecognised, param_shapes, read_header
from tplab.model.config import GPTConfig
from tplab.model.corpus import build_tokenizer
from tplab.model.gpt import MiniGPT
from tplab.model.meta_build import on_meta
from tests.fresh_imports import REPO

SMALL = GPTConfig(vocab_size=640, block_size=32, n_layer=2, n_head=4, d_model=16, d_ff=32)


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(tmp_path / "m.pt", MiniGPT(SMALL), build_tokenizer(), {"seed": 0})


def _rewrite(path: Path, change) -> Path:
    data = torch.load(path, weights_only=True)
    change(data)
    torch.save(data, path)
    return path


@pytest.mark.parametrize("config", [GPTConfig(), SMALL,
                                    GPTConfig(vocab_size=48, block_size=7, n_layer=3, n_head=2,
                                              d_model=6, d_ff=10)])
def test_the_written_out_shapes_are_the_models(config: GPTConfig) -> None:
    with on_meta():  # shapes only, without the init (which on meta imports torch._dynamo)
        model = MiniGPT(config)
    assert param_shapes(config) == expected_shapes(config) == \
        {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_a_good_checkpoint_reads_the_same_without_torch(saved: Path) -> None:
    header, ckpt = read_header(saved), load_checkpoint(saved)
    assert header.config == ckpt.config and header.meta == ckpt.meta == {"seed": 0}
    assert header.tokenizer.to_dict() == ckpt.tokenizer.to_dict()
    assert {k: m.shape for k, m in header.shapes.items()} == \
        {k: tuple(v.shape) for k, v in ckpt.state_dict.items()}
    assert {m.dtype for m in header.shapes.values()} == {"float32"}


BROKEN = {
    "missing weight": lambda d: d["state_dict"].pop("ln_f.weight"),
    "extra weight": lambda d: d["state_dict"].__setitem__("blocks.9.mlp.up.weight", torch.zeros(2)),
    "wrong shape": lambda d: d["state_dict"].__setitem__("lm_head.weight", torch.zeros(600, 8)),
    "integer weight": lambda d: d["state_dict"].__setitem__(
        "ln_f.bias", torch.zeros(16, dtype=torch.int64)),
    "a weight that is no tensor": lambda d: d["state_dict"].__setitem__("ln_f.bias", 3.0),
    "half precision is fine": lambda d: d["state_dict"].__setitem__(
        "ln_f.bias", torch.zeros(16, dtype=torch.float16)),
    "a strided view": lambda d: d["state_dict"].__setitem__(
        "lm_head.weight", torch.zeros(16, 640).t()),
    "wrong format": lambda d: d.__setitem__("format", "something-else"),
    "wrong version": lambda d: d.__setitem__("version", 7),
    "damaged config": lambda d: d["config"].pop("d_ff"),
    "tokenizer over the vocabulary": lambda d: d["config"].__setitem__("vocab_size", 8),
    "no state dict": lambda d: d.pop("state_dict"),
}


def _verdict(read, path: Path) -> str:
    try:
        read(path)
    except CheckpointError as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize("case", list(BROKEN))
def test_every_damage_gets_torchs_sentence(saved: Path, case: str) -> None:
    _rewrite(saved, BROKEN[case])
    expected = _verdict(load_checkpoint, saved)
    assert _verdict(read_header, saved) == expected
    if case.endswith("is fine") or case == "a strided view":
        assert expected == "ok" or "shape" in expected


def _truncated_storage(path: Path) -> Path:
    out = path.with_name("short.pt")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data[: len(data) // 2] if "/data/0" in info.filename else data)
    return out


UNRECOGNISED = {
    "not a zip": lambda p: (p.write_text("this is not a checkpoint\n"), p)[1],
    "cut in half": lambda p: (p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), p)[1],
    "a storage shorter than its tensor": _truncated_storage,
    "a global the reader does not know": lambda p: _rewrite(
        p, lambda d: d["meta"].__setitem__("dtype", torch.float32)),
    "a state dict torch.save wrote bare": lambda p: (torch.save(MiniGPT(SMALL).state_dict(), p), p)[1],
}


@pytest.mark.parametrize("case", list(UNRECOGNISED))
def test_what_the_reader_does_not_know_goes_to_torch(saved: Path, case: str) -> None:
    path = UNRECOGNISED[case](saved)
    if case == "a state dict torch.save wrote bare":  # a zip it reads: judged, as torch judges it
        assert _verdict(read_header, path) == _verdict(load_checkpoint, path)
        return
    with pytest.raises(Unrecognised):
        read_header(path)
    # the input check then answers with torch's own verdict
    try:
        input_check.check(str(path), str(_prompts(path.parent)), 1, 4, 2)
        answer = "ok"
    except CheckpointError as exc:
        answer = str(exc)
    assert answer == _verdict(load_checkpoint, path)


def _prompts(folder: Path) -> Path:
    path = folder / "prompts.txt"
    path.write_text("he goed to school\n", encoding="utf-8")
    return path


def test_the_input_check_imports_no_torch_for_a_good_checkpoint(saved: Path) -> None:
    code = ("import json, sys\n"
            "from tplab.job.input_check import main\n"
            f"rc = main(['--checkpoint', {str(saved)!r}, '--prompts', "
            f"{str(_prompts(saved.parent))!r}, '--num-prompts', '1', '--new-tokens', '4', "
            "'--world-size', '3'])\n"
            "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"rc": 1, "torch": False}
    assert "n_head=4 is not divisible by 3" in json.loads(lines[-2])["error"]

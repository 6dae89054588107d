"""What the lab's and the dashboard's end-to-end tests (tests/lab, tests/tui) share.

``lab_assets_for``: the shipped checkpoint + prompts when they exist; otherwise a randomly
initialised MiniGPT of the shipped shape, with a tokenizer built from the caller's prompts, is
saved once (TP must still match single token for token, which is what the job checks, so the
transport and orchestrator are exercised the same way). Each conftest wraps it in its own
session-scoped ``lab_assets`` fixture with its own prompts.

``mock_cloud``: a running mock cloud (subprocess), stopped after the test; a conftest imports it.

``tiny_lab_config``: the small mock lab (2 prompts x 8 tokens, no sweep) the e2e tests start from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS


def lab_assets_for(tmp_path_factory, prompts: list[str], dirname: str) -> tuple[Path, Path]:
    """(checkpoint, prompts file): the shipped pair, or a random-init pair saved under ``dirname``."""
    if DEFAULT_CHECKPOINT.is_file() and DEFAULT_PROMPTS.is_file():
        return DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    import torch  # test side only: the dashboard itself never imports torch

    from tplab.model.checkpoint import save_checkpoint
    from tplab.model.config import GPTConfig
    from tplab.model.gpt import MiniGPT
    from tplab.model.tokenizer import Tokenizer

    d = tmp_path_factory.mktemp(dirname)
    torch.manual_seed(0)
    tok = Tokenizer.build(w for p in prompts for w in p.split())
    ckpt = save_checkpoint(d / "ckpt.pt", MiniGPT(GPTConfig()), tok, {"note": "test, random init"})
    prompts_file = d / "prompts.txt"
    prompts_file.write_text("\n".join(prompts) + "\n")
    return ckpt, prompts_file


#: what a tiny lab that looks at the profiled pass passes to ``tiny_lab_config``: the default's
PROFILED = {"profile_tokens": 4}


@pytest.fixture
def mock_cloud(tmp_path):
    """A running mock cloud (subprocess), so a test can look at its pods; stopped after the test."""
    from tplab.mock.handle import start_mock_cloud

    cloud = start_mock_cloud(boot_delay_s=0.3, state_dir=tmp_path / "mock-state")
    yield cloud
    cloud.stop()


def tiny_lab_config(lab_assets: tuple[Path, Path], tmp_path: Path, **kw):
    """A LabConfig for a small, fast mock lab; keyword arguments override its fields. Without
    the profiled pass (``profile_tokens=0``, a second of every lab): the labs that look at it
    ask for it (``PROFILED``)."""
    from tplab.lab.lab_config import LabConfig
    ckpt, prompts = lab_assets
    base = dict(mock=True, num_prompts=2, new_tokens=8, warmup=1, sweep=False, profile_tokens=0,
                checkpoint=ckpt, prompts=prompts, out_dir=tmp_path / "out",
                heartbeat_interval_s=1.0, mock_options={"boot_delay_s": 0.3})
    base.update(kw)
    return LabConfig(**base)


def assert_ledgers_settled(home: Path, cap_usd: float = 5.0) -> None:
    """Every ledger under ``home`` after a lab (and the `tplab terminate --all` a user runs after
    a killed client): nothing over the cap, no damaged line, no hold left without a pod except
    one kept for a create that went unanswered (a client killed mid-create: whether it made a
    pod is unknowable until the provider's list can show it). From benchmarks/fault_suite.py's
    ledger row."""
    import os

    from tplab.lab import instances
    from tplab.money.budget import BudgetGuard
    from tplab.money.ledger import Ledger
    paths = list(home.rglob("spend.jsonl"))
    assert paths, f"no ledger under {home}"
    for path in paths:
        guard = BudgetGuard(path, cap_usd)
        assert guard.total_spent + guard.held <= cap_usd, (path, guard.total_spent, guard.held)
        assert Ledger(path).read()[1] == [], f"damaged lines in {path}"
        old = os.environ.get("TPLAB_HOME")
        os.environ["TPLAB_HOME"] = str(path.parents[1])
        try:
            intents = {r.auth_id for r in instances.open_records(True)
                       if r.state == instances.INTENT and not r.pod_id}
        finally:
            if old is None:
                os.environ.pop("TPLAB_HOME", None)
            else:
                os.environ["TPLAB_HOME"] = old
        stray = [a for a in guard.summary().open_authorizations if a.auth_id not in intents]
        assert stray == [], f"a hold left without a pod in {path}: {stray}"


def assert_key_unwritten(key: str, root: Path, printed: list[str]) -> None:
    """The account key is in no file under ``root`` (the lab's folder, TPLAB_HOME, the mock's
    state and the pod's sandbox) and in nothing the clients printed. From
    benchmarks/fault_suite.py's canary row, whose mock clouds were started outside its folder:
    a mock's own discovery record (``$TPLAB_HOME/mock/clouds/``, how other terminals find it)
    carries the mock's key by design and is not searched."""
    needle = key.encode()
    hits = []
    for path in root.rglob("*"):
        if path.parent.name == "clouds" and path.parent.parent.name == "mock":
            continue
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    hits.append(str(path.relative_to(root)))
            except OSError:
                continue
    hits += [f"client output #{i}" for i, text in enumerate(printed) if key in (text or "")]
    assert not hits, f"the API key was written to: {hits[:5]}"


def terminate_all(api_url: str, api_key: str) -> list[str]:
    """What a user runs after a killed client: `tplab terminate --all --mock`, which ends any live
    pod and settles what dead clients held. Returns what it printed (stdout, stderr)."""
    import os
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "tplab", "terminate", "--all", "--mock",
                          "--api-url", api_url],
                         cwd=repo, env={**os.environ, "PYTHONPATH": str(repo),
                                        "RUNPOD_API_KEY": api_key},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return [out.stdout, out.stderr]


class FullDisk:
    """A file on a full disk: every write and flush fails with ENOSPC (for stream.jsonl)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        pass


def assert_rank_traces(out: Path, ranks: int = 2) -> None:
    """Each rank's own trace in ``out/traces/`` as HTA's loader reads it: one ``.json.gz`` per
    rank and nothing else there, each naming its rank, the world size and the backend in
    ``distributedInfo``, with the profiler's args and flows whole (``check_rank_trace``); the
    single-device pass apart, as rank 0."""
    from tplab.records import rank_traces

    folder = out / rank_traces.TRACES_DIR
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith((".gz", ".json")))
    assert files == sorted(rank_traces.rank_trace_path(r).split("/")[-1] for r in range(ranks))
    for r in range(ranks):
        doc = rank_traces.read_rank_trace((out / rank_traces.rank_trace_path(r)).read_bytes())
        assert rank_traces.check_rank_trace(doc, r, ranks) == []
    single = rank_traces.read_rank_trace(
        (out / rank_traces.rank_trace_path(0, "single")).read_bytes())
    assert rank_traces.check_rank_trace(single, 0, ranks) == []


def assert_profiled_pass(out: Path, tokens: int = 4, ranks: int = 2) -> dict:
    """The profiled pass's bars on a finished run's folder (``out``: results.json, trace.json):
    trace.json is a Chrome trace Perfetto opens as it is, one process per rank, and every
    profiled TP token shows its 2L+1 all-reduces (the embedding's, then each layer's attention
    output and MLP down projection) and the logits gather by name, in order, on every rank;
    results.json's timeline has both modes, each rank's compute + wire + wait + rest within 10%
    of the step's own clock, and some rank waiting in some collective; trace.json's pids are
    non-zero, its times µs exact to the ns, its ops carry the profiler's args. Each rank's own
    trace lies in traces/ as HTA reads it (``assert_rank_traces``). Returns the timeline."""
    import json
    from decimal import Decimal

    from tplab.records.trace_merge import check_trace, collective_counts, pid_of
    from tplab.records.trace_names import collective_name

    results = json.loads((out / "results.json").read_text())
    doc = json.loads((out / "trace.json").read_text())
    assert check_trace(doc) == [], check_trace(doc)[:3]
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {pid_of(r): f"rank {r}" for r in range(ranks)} and 0 not in names
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert all((Decimal(repr(e["ts"])) * 1000) % 1 == 0 for e in ops)  # whole ns
    assert all("External id" in e["args"] for e in ops if e["cat"] == "cpu_op")
    assert_rank_traces(out, ranks)
    n_layer = results["model"]["n_layer"]
    want = ([collective_name("embedding", "all-reduce")]
            + [collective_name(p, "all-reduce", i) for i in range(n_layer)
               for p in ("attn-out", "mlp-down")] + [collective_name("logits", "all-gather")])
    steps = {k: v for k, v in collective_counts(doc).items() if k[1] == "tp"}
    positions = sorted({k[2] for k in steps})
    assert len(positions) == tokens and set(steps) == {(r, "tp", p) for r in range(ranks)
                                                         for p in positions}
    assert all(v == want for v in steps.values()), steps
    tl = results["timeline"]
    assert set(tl["modes"]) == {"tp", "single"} and tl["unmatched_steps"] == []
    assert [len(tl["modes"][m]["tokens"]) for m in ("tp", "single")] == [tokens, tokens]
    for step in tl["modes"]["tp"]["tokens"] + tl["modes"]["single"]["tokens"]:
        for r in step["ranks"]:
            parts = r["compute_us"] + r["wire_us"] + r["wait_us"] + r["rest_us"]
            assert abs(parts / r["token_us"] - 1) <= 0.10, (step["mode"], step["pos"], r)
    # and the profiler's spans agree with each rank's own clock (the median of its steps: one
    # step can hold a deschedule outside the clock, which its span counts as rest)
    assert tl["sum_check"]["ok"] is True, tl["sum_check"]
    assert tl["sum_check"]["median_worst"] <= 0.10 and tl["waiting_seen"] is True
    assert tl["trace"]["file"] == "trace.json" and tl["trace"]["bytes"] <= 8 << 20
    assert tl["clock"]["same_host"] is True and "same host" in tl["clock"]["alignment"]
    return tl

"""The profiled pass on CUDA: CUDA activities on a GPU, and NCCL's kernels on the GPU streams.

Run by ``benchmarks/gpu_check.sh`` on a lent GPU machine. Two parts:

1. every GPU machine: the single-device model decoded under the profiler on ``cuda:0``
   (``tplab.job.profiled_pass.profile_decode``); its merged trace must hold the CUDA kernels on
   a GPU stream, and the step's split must come from them (compute = kernel time);
2. with two GPUs or more: the lab's job under torchrun on 2 ranks over NCCL with
   ``--profile-tokens``; its ``trace.json`` must be a valid Chrome trace with one process per
   rank, NCCL kernels on each rank's GPU stream, and every profiled TP token's 2L+1 all-reduces
   and the logits gather by name on both ranks; results.json's ``timeline`` must pass its sum
   check and see waiting on some rank. (NCCL refuses two ranks on one GPU, so a one-GPU
   machine runs part 1 only and says so.)

    python benchmarks/gpu_timeline.py --out out/gpu     # exit 1 when a check fails

Prints one line per check and writes the traces it made under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _say(ok: bool, what: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {what}", flush=True)
    return ok


def single_gpu(out: Path) -> bool:
    import torch

    from tplab.job.profiled_pass import profile_decode
    from tplab.model.checkpoint import build_single, load_checkpoint
    from tplab.records.timeline import timeline_section
    from tplab.records.trace_merge import align, capture_from_chrome, check_trace, trace_document

    from tplab.home.paths import DEFAULT_CHECKPOINT

    dev = torch.device("cuda", 0)
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    model = build_single(ckpt, dev)
    ids = ckpt.tokenizer.prompt_ids("he goed to school yesterday")
    p = profile_decode(model, ids, "single", 4, dev, sync=lambda: torch.cuda.synchronize(dev))
    cap = capture_from_chrome(p.chrome, rank=0, anchors=p.anchors, host="gpu",
                              steps={"single": p.steps}, device="cuda")
    merged = align([cap], {0: 0}, True)
    doc = trace_document(merged, other={"tplab": "gpu_timeline.py, single device on CUDA"})
    (out / "trace-single-gpu.json").write_text(json.dumps(doc), encoding="utf-8")
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    section = timeline_section(merged, {0: "cuda"}, comm="none", taken={}, trace={})
    med = section["modes"].get("single", {}).get("median", {})
    ok = _say(not check_trace(doc), f"single-GPU trace is a valid Chrome trace "
              f"({check_trace(doc)[:2] or 'no problem'})")
    ok &= _say(len(kernels) > 0, f"{len(kernels)} CUDA kernels on the GPU stream, e.g. "
               f"{sorted({k['name'][:40] for k in kernels})[:3]}")
    ok &= _say(bool(med) and med.get("compute_us", 0) > 0,
               f"single split from the kernels: {json.dumps(med)[:300]}")
    ok &= _say(bool(section["sum_check"]["ok"]), f"sum check {section['sum_check']}")
    return ok


def nccl_job(out: Path, gpus: int) -> bool:
    from tplab.home.paths import DEFAULT_CHECKPOINT, DEFAULT_PROMPTS
    from tplab.records import rank_traces
    from tplab.records.trace_merge import check_trace, collective_counts, rank_of

    job_out = out / "nccl-job"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           "-m", "tplab.job", "--checkpoint", str(DEFAULT_CHECKPOINT),
           "--prompts", str(DEFAULT_PROMPTS), "--out", str(job_out),
           "--num-prompts", "2", "--new-tokens", "20", "--no-sweep", "--device", "cuda",
           "--profile-tokens", "4"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    (out / "nccl-job.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if not _say(done.returncode == 0, f"NCCL job on 2 of {gpus} GPUs exited {done.returncode}"):
        print(done.stderr[-3000:])
        return False
    doc = json.loads((job_out / "trace.json").read_text(encoding="utf-8"))
    results = json.loads((job_out / "results.json").read_text(encoding="utf-8"))
    ok = _say(not check_trace(doc), f"trace.json valid ({check_trace(doc)[:2] or 'no problem'}, "
              f"{(job_out / 'trace.json').stat().st_size} bytes)")
    pids = {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    ok &= _say(pids == {1, 2}, f"one process per rank, none 0: {sorted(pids)}")
    for pid in sorted(pids):
        nccl = [e for e in doc["traceEvents"] if e.get("pid") == pid and e.get("cat") == "kernel"
                and "nccl" in e.get("name", "").lower()]
        ok &= _say(bool(nccl), f"rank {rank_of(pid)}: {len(nccl)} NCCL kernels on the GPU "
                   f"stream, e.g. {nccl[0]['name'][:60] if nccl else '-'}; args "
                   f"{sorted(nccl[0].get('args') or {})[:6] if nccl else '-'}")
        flows = sum(1 for e in doc["traceEvents"] if e.get("pid") == pid and e.get("ph") == "f")
        ok &= _say(flows > 0, f"rank {rank_of(pid)}: {flows} launch-to-kernel flows")
    for r in range(2):
        path = job_out / rank_traces.rank_trace_path(r)
        got = (rank_traces.check_rank_trace(rank_traces.read_rank_trace(path.read_bytes()), r, 2)
               if path.is_file() else ["missing"])
        ok &= _say(not got, f"{rank_traces.rank_trace_path(r)}: {got or 'what HTA needs is there'}")
    n_layer = results["model"]["n_layer"]
    counts = {k: v for k, v in collective_counts(doc).items() if k[1] == "tp"}
    full = [k for k, v in counts.items()
            if sum(1 for n in v if n.endswith("all-reduce")) == 2 * n_layer + 1
            and any(n.endswith("all-gather") for n in v)]
    ok &= _say(bool(counts) and len(full) == len(counts),
               f"{len(full)}/{len(counts)} (rank, TP token) pairs show the {2 * n_layer + 1} "
               "all-reduces and the gather")
    tl = results.get("timeline") or {}
    ok &= _say(bool(tl.get("sum_check", {}).get("ok")), f"sum check {tl.get('sum_check')}")
    ok &= _say(bool(tl.get("waiting_seen")), "wait > 0 on some rank of some collective")
    med = ((tl.get("modes") or {}).get("tp") or {}).get("median") or {}
    print("TP split on the GPUs (medians, µs):", json.dumps(
        {k: med.get(k) for k in ("token_us", "compute_us", "wire_us", "wait_us", "rest_us")}))
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/gpu")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    gpus = torch.cuda.device_count()
    if not _say(gpus > 0, f"{gpus} CUDA device(s), torch {torch.__version__}"):
        return 1
    ok = single_gpu(out)
    if gpus >= 2:
        ok &= nccl_job(out, gpus)
    else:
        print("SKIP  the NCCL job: NCCL does not run two ranks on one GPU; it needs a machine "
              "with two")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

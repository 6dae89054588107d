#!/usr/bin/env bash
# The GPU measurement, one prepared run on a lent GPU machine (the `device` tool, one GPU there):
# the job's single-GPU path, ms/token eager vs CUDA graphs (benchmarks/gpu_single.py), and the
# profiled pass on CUDA (benchmarks/gpu_timeline.py): CUDA kernels in the trace on one GPU, and
# with two GPUs the job over NCCL whose trace.json shows NCCL's kernels on every rank.
# Pod-side code needs only torch, so nothing is installed.   OUT=dir bash benchmarks/gpu_check.sh
set -u
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
nvidia-smi -L || true
timeout 300 python3 benchmarks/gpu_single.py --device "${DEVICE:-cuda}" --prompts "${PROMPTS:-10}" \
  --tokens "${TOKENS:-100}" --json "$OUT/gpu-single.json" 2>&1 | tee "$OUT/gpu-single.log"
timeout 450 python3 benchmarks/gpu_timeline.py --out "$OUT" 2>&1 | tee "$OUT/gpu-timeline.log"
# HTA (benchmarks/hta_check.py) on the NCCL job's per-rank traces, as they are: its temporal
# breakdown and comm/compute overlap must run and agree with tplab's split. The GPU machine has no
# package index: before the run, here, `python benchmarks/hta_check.py --download .hta-wheels`
# (42 MB; `--python-version X.Y` for the machine's Python), and carry .hta-wheels along.
if [ -d "$OUT/nccl-job/traces" ]; then
  if [ -d "${HTA_WHEELS:-.hta-wheels}" ]; then
    timeout 300 python3 benchmarks/hta_check.py "$OUT/nccl-job" --venv "$OUT/venv-hta" \
      --wheelhouse "${HTA_WHEELS:-.hta-wheels}" 2>&1 | tee "$OUT/hta-check.log"
  else
    echo "SKIP  HTA: no wheelhouse at ${HTA_WHEELS:-.hta-wheels} (make it with benchmarks/hta_check.py --download)"
  fi
fi

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

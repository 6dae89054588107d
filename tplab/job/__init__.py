"""The lab job: what runs on the pod under ``torchrun`` (``python -m tplab.job``).

It runs the single-device baseline on rank 0, then tensor-parallel greedy decoding over the
prompts on every rank, times each token (and the all-reduce time inside it), sweeps all-reduce
message sizes on the run's own process group, checks TP output equals the baseline token for
token, profiles a few tokens per mode on every rank (``profiled_pass``: ``trace.json`` and the
timeline of compute, on the wire and waiting), and writes ``events.jsonl`` and ``results.json``.

Pod-side: the job's modules import only torch, the standard library and ``tplab.records`` (the
stdlib-only records both sides exchange, which travel to the pod with the job). The client never
imports this package: it reads what the job wrote through ``tplab.records``.
"""

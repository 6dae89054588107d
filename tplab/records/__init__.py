"""The contract between the pod and the client: what the job writes and the client reads.

- ``events``: the event stream's one wire contract (each event type a dataclass) and its one
  decoder, which checks every field at the boundary (JSON lines);
- ``untrusted``: the kinds of field a record read from the pod declares, with their bounds, and
  the checks made from them;
- ``results``: results.json (the job writes it, the lab, scaling and the manifest read it);
- ``dmodel``: the d_model sweep's points and its measured crossover;
- ``job_flags``: the job's command line, declared once (the job, `tplab run`, `tplab local`);
- ``self_end``: the word that tells the pod's guard and watchdog how their pod ends itself;
- ``torch_support``: the torch releases the pod side runs on (the job checks it at start, the
  client before it rents).
- ``trace_names``, ``trace_merge``, ``timeline``: the profiled pass: its spans' names, the ranks'
  traces on one clock merged into ``trace.json``, and results.json's ``timeline`` (each token
  split per rank into compute, on the wire, waiting and rest).

Why a package of its own: the job writes these and the client reads them, so they are the seam
between the two sides. The statistics the job computes its figures with are ``tplab.stats``,
the small helpers both sides share ``tplab.util``. Everything here is standard library only (no
torch; from tplab only ``tplab.records``, ``tplab.stats`` and ``tplab.util``): it travels to the
pod with the job (``tplab.lab.bundle``), and the client (lab, scaling, manifest, dashboard)
imports it without pulling torch in. The client never imports ``tplab.job``;
``tests/test_structure.py`` holds both rules. This ``__init__`` imports nothing.
"""

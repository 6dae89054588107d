"""What the pod and the client exchange, and the few helpers both sides share.

- ``events``: the event stream's one wire contract and its one decoder (JSON lines);
- ``results``: results.json (the job writes it, the lab, scaling and the manifest read it);
- ``dmodel``: the d_model sweep's points and its measured crossover;
- ``fit``: the all-reduce α-β fit and the sweep's summary; ``robust_fit``: its robust form with
  intervals; ``harness``: a figure as a median with its spread; ``stability``: which figures of a
  run are not trustworthy (results.json's ``stability`` block);
- ``job_flags``: the job's command line, declared once (the job, `tplab run`, `tplab local`);
- ``torch_support``: the torch releases the pod side runs on (the job checks it at start, the
  client before it rents);
- ``jsonfile``: the one atomic JSON writer; ``pids``: the one "is that process alive" check.

Why a package of its own: the job writes these and the client reads them, so they are the seam
between the two sides. Everything here is standard library only (no torch, nothing from tplab
but ``tplab.records``): it travels to the pod with the job (``tplab.lab.bundle``), and the
client (lab, scaling, manifest, dashboard) imports it without pulling torch in. The client
never imports ``tplab.job``; ``tests/test_structure.py`` holds both rules. This ``__init__``
imports nothing.
"""

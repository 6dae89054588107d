"""The statistics a lab's figures are made with, on the pod and on the client alike.

- ``harness``: a figure as a median with its spread, quartiles and interval, and the seeded
  order in which a harness visits its cases;
- ``fit``: the all-reduce α-β fit and the sweep's summary; ``robust_fit``: its robust form
  (Theil–Sen) with bootstrap intervals;
- ``stability``: which figures of a run are not trustworthy (results.json's ``stability`` block).

Why apart from ``tplab.records``: those are the contract between pod and client (what is
written); these are how its numbers are computed, and change for other reasons. Standard
library only: they travel to the pod with the job. This ``__init__`` imports nothing.
"""

"""The headless face of a lab and what both faces share before one starts.

- ``headless``: `tplab run` and `tplab local` (stage lines, a progress bar over tokens, the final
  table; ``--json``: the event stream as JSON lines), drawn from the view-model's one fold;
- ``timeline_text``: a lab's profiled pass as text lines (`tplab timeline`);
- ``signals``: how `tplab run` ends a lab on a signal (teardown first, never cut short);
- ``startcheck``: a start that cannot work, refused in one sentence before any lab folder exists
  (`tplab run` and the dashboard's Start);
- ``cloud_check``: what `tplab check` and the dashboard's Instance panel ask a cloud before a lab
  (the key, the balance, the quote and stock, spot, the image per offer, the budget).

The other face is the dashboard, the top-level package ``tui``. Neither face holds lab logic:
both consume the orchestrator's event stream through ``tplab.viewmodel``. Client side; no torch.
"""

"""The view-model: one typed fold of a lab's event stream that every face draws from.

``tokens`` folds the per-token stream once (the live plot, percentiles, progress, and the
``partial`` figures of a stopped lab); ``snapshot`` is what a view reads (``LabSnapshot``);
``fold`` keeps it up to date (``LabState.apply``); ``parts`` are its plain records;
``timeline_view`` reads the profiled pass into lanes per rank. The
dashboard (``tui/``), ``tplab run`` (``headless``), a replay and a past lab (``past_labs``) all
read the stream through ``LabState``; none holds lab logic. ``signals``, ``startcheck`` and
``ledger_view`` are what both faces do around a lab (stop on a signal, refuse a start, show the
ledger). Imports nothing, so the dashboard's first paint pays only for what it uses.
"""

"""What the lab's two faces consume: the state fold (``state``) and the headless view (``headless``).

The dashboard (``tui/``) and ``tplab run`` read the same event stream through ``LabState``;
neither holds lab logic. Imports nothing, so the dashboard's first paint pays only for ``state``.
"""

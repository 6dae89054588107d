"""`tplab-tui`: the Textual dashboard. It consumes the orchestrator's event stream and calls its
API; it holds no lab logic and never imports torch (first paint within a second)."""

"""The dashboard's figures view says which of the job's figures are unstable (results.json's
``stability`` block), in the sentence the report uses."""

from __future__ import annotations

from tplab.viewmodel.fold import LabState
from tplab.stats.harness import unstable_text
from tui.widgets.timings import TimingsStats


def test_the_dashboard_figures_view_flags_unstable_figures():
    state = LabState()
    state.results = {"stability": {"unstable": [
        {"figure": "tp_per_token_ms (gloo)", "note": unstable_text(0.37)}]}}
    text = TimingsStats().render_state(state).plain
    assert "1 figure(s) unstable: spread 37%; machine busy? (tp_per_token_ms (gloo))" in text
    state.results = {"stability": {"unstable": []}}
    assert "unstable" not in TimingsStats().render_state(state).plain

"""The help screen: what each panel means and every key, in one place."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from rich.markdown import Markdown
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

HELP = """\
# tplab dashboard

A tensor-parallel inference lab on a rented pod, under a hard dollar cap.

| key | does |
|---|---|
| `s` | start the lab (Start button) |
| `ctrl+t` / `t` | **TERMINATE** the pod: no confirmation, works in every state, once |
| `q` / `ctrl+q` | quit; while a pod is alive: terminate and quit, leave it running, or cancel |
| `?` / `f1` | this help |
| `ctrl+p` | command palette (start, terminate, help, screenshot, quit) |
| `ctrl+s` | save an SVG screenshot next to the lab's manifest (or here) |

**Budget**: the cap, recorded spending, money held by open authorizations, what remains,
and what this lab was authorized to spend.

**Instance**: provider, pod, GPUs, spot or on-demand, state and time in it, uptime, price,
accrued dollars, time left before the cap, SSH endpoint and the watchdog heartbeat age.

**Live timings**: ms per token, single device vs TP; running p50/p99 (from a fixed-size
histogram, ~1 % error) until the job's own summary replaces them; all-reduce ms per token;
comm/compute; whether TP decoded exactly what the single device did.

**Scaling**: the latency model's single vs TP per-token time over d_model, the crossover,
and this run's measured point.

When the lab ends the screen is saved as `proof-terminated.svg` next to the manifest.
"""


class HelpScreen(Screen[None]):
    """A full screen, not a modal: a modal composites the whole dashboard behind it, which
    made opening help several times slower while the lab streams events."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 96; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close help")]

    def compose(self) -> ComposeResult:
        # one Static holding rich's Markdown: opens at once even while the lab streams events
        # (Textual's Markdown widget mounts a widget per block)
        with VerticalScroll():
            yield Static(Markdown(HELP), id="help-text")

"""The help screen: what each panel means and every key, in one place.

Why it is laid out per width: the help is Markdown rendered once into styled text (fast to open
while a lab streams), and text laid out for one width reads badly at another, so it is laid out
for the box's width (at most 96 columns, the terminal's when that is narrower) and kept per width.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text
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
| `s` | start the lab (Start button); in a replay: play the same lab again |
| `n` | in a replay: start a lab of your own instead (when the dashboard has lab options) |
| `ctrl+t` / `t` | **TERMINATE** the pod: no confirmation, works in every state, once |
| `q` / `ctrl+q` | quit; while a pod is alive: terminate and quit, leave it running, or cancel |
| `1` `2` `3` `4` | the view switch: plot, scaling curve, log, figures (narrow and medium screens) |
| `5` | the timeline of the profiled pass (every layout; `1` brings the plot back) |
| `[` / `]` | the timeline's previous / next profiled token |
| `m` | the timeline's mode: TP or single device |
| `f` | the log's filter: all, lab, job, stderr (the pod's job.log), problems |
| `l` | the Labs screen: every lab that ran; enter opens one here, `r` replays it |
| `+` / `-` | a replay's speed: ×1, ×10, ×100, max (as fast as it draws) |
| `?` / `f1` | this help |
| `ctrl+p` | command palette (start, terminate, labs, help, screenshot, quit) |
| `ctrl+s` | save an SVG screenshot next to the lab shown (else in TPLAB_HOME/screenshots) |

**Layouts**: 160 columns and more show every panel; from 100 columns the figures stay on the
left and the lower right switches between the scaling curve and the log (2, 3); below that (or
under 35 rows) a summary strip keeps the pod's state, the budget left, the lab's figures and the
stage on screen, TERMINATE stays at the bottom, and 1–5 switch the rest.

**Figures**: each figure is made once, in one record every view (and `tplab run`, the manifest,
the proof picture, `tplab timeline`, the hand-in) shows at the same rounding, named by the pass
that measured it: **timed** (the plain decode: ms per token and the speedup; "so far" while
the lab runs), **instr.** (a second TP decode with a timer around every collective: the
all-reduce ms, its share of that pass's token "AR", comm/compute), **profiled** (a few tokens
under torch's profiler, which slows them: where a token's time goes).

**Budget**: the ledger's cap, recorded spending, money held by open authorizations, what
remains (read from the ledger before any lab, and again after each), and this lab's cap and
whether pre-flight would pass. The bar: █ spent, ▓ held, ░ left.

**Instance**: provider, pod, GPUs, spot or on-demand, state and time in it, uptime, price,
accrued dollars, time left before the cap, SSH endpoint and the watchdog heartbeat age. Before
Start: what Start would rent and the cloud check's facts. **MOCK** marks a mock lab: its pod is
a process on this machine and its dollars are simulated.

**Live timings**: ms per token, single device vs TP (the timed pass); running p50/p99 (from a
fixed-size histogram, ~1 % error) until the job's own summary replaces them; all-reduce ms per
token and comm/compute (the instrumented pass, marked *); whether TP decoded exactly what the
single device did. Too small to plot, a plot
shows its numbers instead.

**Scaling**: the latency model's single vs TP per-token time over d_model, the crossover (in
the title), and this run's measured point.

**Timeline** (key 5): after the timed passes the job decodes a few tokens per mode under
torch's profiler on every rank (`--profile-tokens`). Each token is drawn as lanes, one per rank,
time running left to right: █ compute, ▒ an all-reduce on the wire (after the last rank
arrived), ░ waiting for the other rank to arrive, blank the rest (launches, Python); the labels
above a lane name each collective (E the embedding, 3a / 3m layer 3's attention output and MLP
down projection, G the logits gather). Below: each rank's split, the medians over the profiled
tokens, and how much of an all-reduce is waiting; on top, the profiled median beside the timed
figure, each saying how it was taken. The whole pass is `trace.json` in the lab's
folder, for ui.perfetto.dev; `tplab timeline DIR` prints the same as text.

**Log**: whole lines, wrapped; scroll back with the mouse or the arrows once it has focus;
`!` marks a warning, `✗` an error.

When a lab ends the screen is saved as `proof-terminated.svg` next to the manifest. A replay
(`tplab-tui --replay DIR`) or a lab opened from the Labs screen creates no pod and says so.
"""


#: the help box's widest (columns), and what its frame takes: a thick border and one column of
#: padding each side, and the scrollbar
BOX_WIDTH, SCROLLBAR = 96, 1
FRAME = 2 + 2 + SCROLLBAR
_RENDERED: dict[int, Text] = {}


class HelpScreen(Screen[None]):
    """A full screen, not a modal: a modal composites the whole dashboard behind it, which
    made opening help several times slower while the lab streams events."""

    DEFAULT_CSS = f"""
    HelpScreen {{ align: center middle; }}
    HelpScreen > VerticalScroll {{ width: {BOX_WIDTH}; max-width: 100%; height: 90%;
                                  border: thick $primary; background: $surface;
                                  padding: 0 1; scrollbar-size-vertical: {SCROLLBAR}; }}
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close help")]

    def compose(self) -> ComposeResult:
        # one Static holding the help as Text, rendered from Markdown once per width: it opens
        # at once even while a lab streams events (Textual's Markdown widget mounts a widget per
        # block, and rich's Markdown lays itself out again on every render)
        with VerticalScroll():
            yield Static(help_text(text_width(self.app.size.width)), id="help-text")

    def on_resize(self) -> None:
        text = help_text(text_width(self.size.width))
        shown = self.query_one("#help-text", Static)
        if shown.content is not text:
            shown.update(text)


def text_width(screen_width: int) -> int:
    """The width the help's text is laid out for on a screen ``screen_width`` columns wide."""
    return max(20, min(BOX_WIDTH, screen_width) - FRAME)


def help_text(width: int = BOX_WIDTH - FRAME) -> Text:
    """HELP (Markdown) as styled Text laid out for ``width`` columns, rendered once per width."""
    text = _RENDERED.get(width)
    if text is None:
        console = Console(width=width, file=io.StringIO(), force_terminal=True,
                          color_system="truecolor")
        with console.capture() as capture:
            console.print(Markdown(HELP))
        text = _RENDERED[width] = Text.from_ansi(capture.get())
    return text

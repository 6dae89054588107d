"""Instance: which pod is costing money right now, for how long, and whether it is guarded.

State, uptime, time left before the cap and the watchdog heartbeat age tick between events
(extrapolated from the last event's timestamp by LabState), so a quiet stream still shows time
passing and a stale heartbeat turns red without waiting for another event. Once the lab ended
with its pod verified gone, no line speaks of the pod as alive: its uptime is its whole life,
its price what it cost, and the cap, SSH and watchdog say they ended with it.

Before a lab (idle) it shows what Start would rent and the cloud check's facts (the key, the
balance, the quote and stock, spot, the budget; see ``tui/precheck.py``). A mock lab says MOCK
in the title and on the provider, GPU and price lines: its pod is a process on this machine
and its dollars are simulated.
"""

from __future__ import annotations

from rich.text import Text

from tplab.cloud.registry import label as cloud_label
from tplab.viewmodel.fold import LabState
from tui.format import DASH, duration, ended_text, per_hour, usd
from tui.widgets.panel import StatePanel, rows

STATE_STYLE = {"RUNNING": "bold green", "CREATED": "yellow", "GONE": "bold cyan",
                "TERMINATED": "bold cyan", "EXITED": "yellow"}
MOCK_STYLE = "bold black on yellow"


def heartbeat_text(age: float | None) -> Text:
    if age is None:
        return Text(DASH)
    style = "green" if age < 10 else "yellow" if age < 30 else "bold red"
    return Text(f"{age:.1f} s ago", style=style)


def mock_tag(text: str = "MOCK") -> Text:
    return Text(f" {text} ", style=MOCK_STYLE)


class InstancePanel(StatePanel):
    TITLE = "Instance"

    #: set by the app: what Start would rent ("NVIDIA GeForce RTX 4090 × 2 · spot")
    plan_text: str = ""
    #: set by the app: the cloud check's rows, or a one-line status of the check
    check_rows: list[tuple[str, str]] = []
    check_status: str = ""

    def title_for(self, state: LabState) -> str:
        base = "Instance · MOCK (simulated, on this CPU)" if state.mock else "Instance"
        return base + (" · before Start" if state.idle else "")

    def render_state(self, state: LabState) -> Text:
        if state.idle or (state.starting and state.instance.pod_id is None):
            return self._before_start(state)
        i = state.instance
        gpus = Text(DASH)
        if i.gpu_type:
            kind = DASH if i.spot is None else ("spot" if i.spot else "on-demand")
            gpus = Text(f"{i.gpu_type} × {i.gpu_count or '?'} ({kind})")
        st = Text(i.state or DASH, style=STATE_STYLE.get((i.state or "").upper(), ""))
        if i.state:
            st.append(f"  for {duration(state.time_in_state())}")
        rate = state.cost.usd_per_hr if state.cost.usd_per_hr is not None else i.usd_per_hr
        left = state.seconds_left()
        ssh = f"root@{i.ssh_host}:{i.ssh_port or 22}" if i.ssh_host else DASH
        cloud = cloud_label(i.provider) if i.provider else DASH  # "RunPod", "Vast.ai"
        provider = Text(f"{cloud}   pod {i.pod_id or DASH}")
        if state.mock:
            provider = Text.assemble(mock_tag(), f" {cloud} pod {i.pod_id or DASH}")
        if i.gone:  # from GONE on, never a clock still counting
            return rows(self._gone_rows(state, provider, gpus, st, rate), label_width=9)
        price = Text(f"{per_hour(rate)} · accrued {usd(state.cost.accrued_usd)}")
        if state.mock:
            price.append(" simulated", style="bold")
        if state.done and i.pod_id:  # the lab ended, the provider has not shown the pod gone
            st.append("  NOT proven gone: money held", style="bold red")
        return rows([
            ("provider", provider),
            ("GPU", gpus),
            ("state", st),
            ("uptime", duration(state.uptime())),
            ("price", price),
            ("cap in", Text(duration(left),
                            style="bold red" if left is not None and left < 600 else "")),
            ("ssh", f"{ssh}  ({state.ssh_state or DASH})"),
            ("watchdog", heartbeat_text(state.heartbeat_age())),
        ], label_width=9)

    @staticmethod
    def _gone_rows(state: LabState, provider: Text, gpus: Text, st: Text,
                   rate: float | None) -> list[tuple[str, str | Text]]:
        """The rows of a lab that ended with its pod verified gone (the same rows, in the
        past tense: the panel keeps its height)."""
        c = state.cost
        figure = state.figures.cost
        cost = Text(f"{figure.text() if figure is not None else DASH} at {per_hour(rate)}")
        if state.mock:
            cost.append(" simulated", style="bold")
        st = Text(state.instance.state or DASH,
                  style=STATE_STYLE.get((state.instance.state or "").upper(), ""))
        st.append(f"  {ended_text(c.ended_at or state.instance.state_since)}")
        ran = c.ran_s if c.ran_s is not None else state.uptime()
        return [("provider", provider), ("GPU", gpus), ("state", st),
                ("ran for", duration(ran)), ("cost", cost),
                ("cap", Text("ended with the pod", style="dim")),
                ("ssh", Text("closed: the pod is gone", style="dim")),
                ("watchdog", Text("ended with the pod", style="dim"))]

    def _before_start(self, state: LabState) -> Text:
        plan = Text(self.plan_text or DASH)
        if state.mock:
            plan = Text.assemble(mock_tag(), " ", plan, " on this CPU")
        items: list[tuple[str, str | Text]] = [("Start", plan)]
        if state.starting:
            items.append(("now", Text(state.starting, style="bold")))
        items += [(label[:9], value) for label, value in self.check_rows]
        if self.check_status:
            items.append(("cloud", Text(self.check_status, style="dim")))
        return rows(items, label_width=9)

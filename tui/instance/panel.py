"""Instance: which pod is costing money right now, for how long, and whether it is guarded.

State, uptime, time left before the cap and the watchdog heartbeat age tick between events
(extrapolated from the last event's timestamp by LabState), so a quiet stream still shows time
passing and a stale heartbeat turns red without waiting for another event.
"""

from __future__ import annotations

from rich.text import Text

from tplab.lab.faces.state import LabState
from tui.format import DASH, duration, usd
from tui.panel import StatePanel, rows

_STATE_STYLE = {"RUNNING": "bold green", "CREATED": "yellow", "GONE": "bold cyan",
                "TERMINATED": "bold cyan", "EXITED": "yellow"}


def heartbeat_text(age: float | None) -> Text:
    if age is None:
        return Text(DASH)
    style = "green" if age < 10 else "yellow" if age < 30 else "bold red"
    return Text(f"{age:.1f} s ago", style=style)


class InstancePanel(StatePanel):
    TITLE = "Instance"

    def render_state(self, state: LabState) -> Text:
        i = state.instance
        gpus = DASH
        if i.gpu_type:
            kind = DASH if i.spot is None else ("spot" if i.spot else "on-demand")
            gpus = f"{i.gpu_type} × {i.gpu_count or '?'} ({kind})"
        st = Text(i.state or DASH, style=_STATE_STYLE.get((i.state or "").upper(), ""))
        if i.state:
            st.append(f"  for {duration(state.time_in_state())}")
        rate = state.cost.usd_per_hr if state.cost.usd_per_hr is not None else i.usd_per_hr
        left = state.seconds_left()
        ssh = f"root@{i.ssh_host}:{i.ssh_port or 22}" if i.ssh_host else DASH
        return rows([
            ("provider", f"{i.provider or DASH}   pod {i.pod_id or DASH}"),
            ("GPU", gpus),
            ("state", st),
            ("uptime", duration(state.uptime())),
            ("price", f"{usd(rate, 3)}/h   accrued {usd(state.cost.accrued_usd, 4)}"),
            ("cap in", Text(duration(left),
                            style="bold red" if left is not None and left < 600 else "")),
            ("ssh", f"{ssh}  ({state.ssh_state or DASH})"),
            ("watchdog", heartbeat_text(state.heartbeat_age())),
        ], label_width=9)

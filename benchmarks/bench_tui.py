"""The dashboard's speed bars: first paint, key-press latency under load, flat memory.

Why: the dashboard must never be the slow part of a lab. Three measurements, one run:

1. **First paint** (bar: < 1 s, torch never imported). (a) ``tplab-tui --mock`` started in a
   real terminal (tmux, 160×48), time until its first frame is on screen, polled with
   ``tmux capture-pane``; (b) the app alone, headless, from process start to ready, with a
   check that ``torch`` is not in ``sys.modules``.
2. **Key press under load** (bar: the slowest of ``ctrl+t``, ``s``, ``?`` and ``esc`` answered
   within 100 ms, over three runs). The app runs headless on a synthetic lab that emits 5,000
   token events per second through the same subscribe/queue path (bounded, drop-oldest) as the
   orchestrator. Timed from the key arriving as the terminal driver sends it to the first
   composed frame that shows the answer: ``s`` until Start is disabled and the status says
   starting (once per lab), ``ctrl+t`` until TERMINATE reads TERMINATING… (once per lab, over
   several labs), and ``?`` / ``escape`` opening and closing the help screen. Each run is a
   fresh app; the report gives every run's slowest press beside the others.
3. **Memory** (bar: flat over 1M events). 1,000,000 events folded into ``LabState`` directly,
   RSS sampled every 100k; then a shorter run through the whole app at a high rate.

    python benchmarks/bench_tui.py [--presses 20] [--labs 10] [--runs 3] [--size 160x48]
                                   [--events 1000000] [--app-events 200000]
                                   [--skip-tmux] [--keys-only] [--json FILE]

On a shared 2-core machine the absolute numbers include the other tenants' load; the output
prints the machine's load average next to them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------------- 1. first paint
_HEADLESS_CHILD = r"""
import json, sys, time
t_start = float(sys.argv[1])
from tui.app import TplabApp
async def auto(pilot):
    await pilot.pause()
    print(json.dumps({"ready_s": time.time() - t_start,
                      "torch_imported": "torch" in sys.modules}), flush=True)
    pilot.app.exit()
TplabApp(None).run(headless=True, size=(160, 48), auto_pilot=auto)
"""


#: the same measurement for an empty Textual app: the floor this machine sets right now
_BARE_CHILD = _HEADLESS_CHILD.replace(
    "from tui.app import TplabApp", "from textual.app import App\nfrom textual.widgets import Static\n"
    "class TplabApp(App):\n    def __init__(self, _):\n        super().__init__()\n"
    "    def compose(self):\n        yield Static('hello')")


def first_paint_headless(runs: int = 3, child: str = _HEADLESS_CHILD) -> list[dict]:
    out = []
    for _ in range(runs):
        t0 = time.time()
        p = subprocess.run([sys.executable, "-c", child, repr(t0)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1]
        out.append(json.loads(line))
    return out


def first_paint_tmux(runs: int = 3) -> list[float]:
    """Seconds from launching ``tplab-tui --mock`` in tmux until TERMINATE is on screen."""
    exe = Path(sys.executable).with_name("tplab-tui")
    home = tempfile.mkdtemp(prefix="bench-tui-home-")
    times = []
    for i in range(runs):
        name = f"bench-tui-{os.getpid()}-{i}"
        t0 = time.monotonic()
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "48",
                        f"TPLAB_HOME={home} {exe} --mock"], check=True)
        try:
            while time.monotonic() - t0 < 30:
                screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", name],
                                        capture_output=True, text=True).stdout
                if "TERMINATE" in screen and "Budget" in screen:
                    times.append(time.monotonic() - t0)
                    break
                time.sleep(0.01)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    shutil.rmtree(home, ignore_errors=True)
    return times


# ---------------------------------------------------------------------- 2. key presses
class FrameLog:
    """Hooks the app's display: one (time, probe()) per composed frame (headless: composed,
    then not written anywhere)."""

    def __init__(self, app, probe) -> None:
        self.app, self.probe, self.frames = app, probe, []
        self._display = app._display

        def hooked(screen, renderable):
            if renderable is not None:
                self.frames.append((time.perf_counter(), probe(screen)))
            return self._display(screen, renderable)

        app._display = hooked

    async def until(self, start_index: int, want) -> float:
        """The time of the first frame from ``start_index`` on whose probe is ``want`` (or,
        when ``want`` is callable, for which it is true)."""
        ok = want if callable(want) else (lambda v: v == want)
        deadline = time.perf_counter() + 30.0
        while True:
            for t, v in self.frames[start_index:]:
                if ok(v):
                    return t
            if time.perf_counter() > deadline:
                seen = self.frames[-1][1] if self.frames else None
                raise TimeoutError(f"no frame showed the answer within 30 s (last: {seen})")
            await asyncio.sleep(0.0005)

    def close(self) -> None:
        self.app._display = self._display


def _pct(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "p50_ms": round(statistics.median(xs), 1),
            "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 1),
            "max_ms": round(xs[-1], 1)}


def floor_app(factory):
    """The floor the machine sets: a bare Textual app with the same keys, the same load (the
    synthetic lab's events folded into a LabState) and a 10 Hz timer, but none of the panels.
    The dashboard's latency next to this one is what the dashboard itself costs."""
    import asyncio as aio

    from textual.app import App
    from textual.binding import Binding
    from textual.screen import Screen
    from textual.widgets import Button, Static

    from tplab.viewmodel.fold import LabState

    class FloorHelp(Screen):
        BINDINGS = [Binding("escape", "app.pop_screen", "Close")]

        def compose(self):
            yield Static("help")

    class Bar:
        pass

    class FloorApp(App):
        BINDINGS = [Binding("ctrl+t", "terminate", priority=True), Binding("s", "start"),
                    Binding("question_mark", "help")]

        def __init__(self):
            super().__init__()
            self.state, self.lab, self.lab_active, self.redraws = LabState(), None, False, 0
            self.action_bar = Bar()

        def compose(self):
            self.action_bar.start_button = Button("Start")
            self.action_bar.terminate_button = Button("TERMINATE")
            self.count = Static("0")
            yield self.action_bar.start_button
            yield self.count
            yield self.action_bar.terminate_button

        def on_mount(self):
            self.set_interval(0.1, self._tick)

        def _tick(self):
            self.redraws += 1
            self.count.update(str(self.state.events))

        def action_help(self):
            self.push_screen(FloorHelp())

        def action_start(self):
            self.state, self.lab_active = LabState(), True
            self.action_bar.terminate_button.label = "TERMINATE"
            self.action_bar.start_button.disabled = True
            self.run_worker(self._run(), group="lab")

        async def _run(self):
            self.lab = factory()
            events = self.lab.subscribe()

            async def consume():
                n = 0
                async for ev in events:
                    self.state.apply(ev)
                    n += 1
                    if n % 256 == 0:
                        await aio.sleep(0)
            task = aio.create_task(consume())
            await self.lab.run()
            await task
            self.lab_active = False  # the label keeps TERMINATING… until the next start (as the
            # dashboard keeps its end state): reset here, a quick end could undo it unseen
            self.action_bar.start_button.disabled = False

        def action_terminate(self):
            self.action_bar.terminate_button.label = "TERMINATING…"
            if self.lab is not None:
                self.lab.request_terminate("user")

    return FloorApp()


async def key_latency(presses: int, rate: float, labs: int,
                      size: tuple[int, int] = (160, 48), floor: bool = False) -> dict:
    """Keys sent as the terminal driver sends them (a Key message from the input side), timed
    until the app has composed the first frame that shows the answer, while a synthetic lab
    streams ``rate`` token events per second:

    * ``s`` (Start): until the Start button is disabled (the "starting" frame), once per lab;
    * ``ctrl+t`` (TERMINATE, the key that matters): until the button reads TERMINATING…,
      once per lab over ``labs`` labs;
    * ``?`` / ``escape``: until the help screen is shown / gone, ``presses`` times.

    ``floor``: the same presses on ``floor_app`` instead of the dashboard.
    """
    from textual import events

    from tui.app import TplabApp
    from tests.synthetic_lab import SyntheticLab

    def is_help(screen) -> bool:
        return type(screen).__name__ in ("HelpScreen", "FloorHelp")

    start: list[float] = []
    terminate: list[float] = []
    help_open: list[float] = []
    help_close: list[float] = []
    delivered, dropped, redraw_hz = [], 0, []
    holder: dict = {}

    def factory():
        holder["lab"] = SyntheticLab(flood_rate=rate)
        return holder["lab"]

    app = floor_app(factory) if floor else TplabApp(factory, refresh_hz=10)
    async with app.run_test(size=size):
        bar = app.action_bar
        log = FrameLog(app, lambda screen: (is_help(screen),
                                            str(bar.terminate_button.label),
                                            bar.start_button.disabled))
        for i in range(labs):
            n0, t_press = len(log.frames), time.perf_counter()
            app._driver.send_message(events.Key("s", "s"))
            done = await log.until(n0, lambda v: v[2] and not v[0])
            start.append((done - t_press) * 1000)
            while app.state.events < rate:  # one second of load first
                await asyncio.sleep(0.01)
            e0, t0, r0 = app.state.events, time.monotonic(), app.redraws
            if i == 0:
                for _ in range(presses):
                    want_help = not is_help(app.screen)
                    key = (events.Key("question_mark", "?") if want_help
                           else events.Key("escape", None))
                    n0, t_press = len(log.frames), time.perf_counter()
                    app._driver.send_message(key)
                    done = await log.until(n0, lambda v, w=want_help: v[:2] == (w, "TERMINATE"))
                    (help_open if want_help else help_close).append((done - t_press) * 1000)
                    await asyncio.sleep(0.2)
                if is_help(app.screen):
                    app._driver.send_message(events.Key("escape", None))
                    await asyncio.sleep(0.3)
            else:
                await asyncio.sleep(0.5)
            dt = time.monotonic() - t0
            delivered.append((app.state.events - e0) / dt)
            redraw_hz.append((app.redraws - r0) / dt)
            n0, t_press = len(log.frames), time.perf_counter()
            app._driver.send_message(events.Key("ctrl+t", None))
            done = await log.until(n0, lambda v: v[:2] == (False, "TERMINATING…"))
            terminate.append((done - t_press) * 1000)
            while app.runner.lab_active:
                await asyncio.sleep(0.01)
            dropped += holder["lab"].dropped
            while app.action_bar.start_button.disabled:  # the end drawn: ready for s again
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
        log.close()
    keys = {"start": _pct(start), "terminate": _pct(terminate), "help_open": _pct(help_open),
            "help_close": _pct(help_close)}
    return {"target_events_per_s": rate, "delivered_events_per_s": round(min(delivered)),
            "dropped_events": dropped, "redraws_per_s": round(min(redraw_hz), 1),
            "slowest_ms": max(k["max_ms"] for k in keys.values()), **keys}


# ---------------------------------------------------------------------- 3. memory
def memory_labstate(n: int) -> dict:
    from tplab.viewmodel.fold import LabState
    from tests.synthetic_lab import token_flood

    s = LabState()
    samples = []
    t0 = time.perf_counter()
    for i, ev in enumerate(token_flood(n), 1):
        s.apply(ev)
        if i % (n // 10) == 0:
            samples.append((i, round(rss_mb(), 1)))
    dt = time.perf_counter() - t0
    return {"events": n, "rss_mb": samples, "growth_after_first_10pct_mb":
            round(samples[-1][1] - samples[0][1], 1), "events_per_s": round(n / dt)}


async def memory_app(n: int, rate: float) -> dict:
    from tui.app import TplabApp
    from tests.synthetic_lab import SyntheticLab

    lab = SyntheticLab(flood_rate=rate)
    app = TplabApp(lambda: lab, start=True, refresh_hz=10)
    samples = []
    async with app.run_test(size=(160, 48)) as pilot:
        step = n // 5
        nxt = step
        while app.state.events < n:
            await asyncio.sleep(0.05)
            if app.state.events >= nxt:
                samples.append((app.state.events, round(rss_mb(), 1)))
                nxt += step
        await pilot.press("ctrl+t")
        while app.runner.outcome is None:
            await asyncio.sleep(0.01)
    return {"events": n, "rate": rate, "rss_mb": samples,
            "growth_after_first_20pct_mb": round(samples[-1][1] - samples[0][1], 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presses", type=int, default=20)
    ap.add_argument("--labs", type=int, default=10, help="labs started to time ctrl+t once each")
    ap.add_argument("--runs", type=int, default=3, help="key-latency runs, a fresh app each")
    ap.add_argument("--size", default="160x48", help="terminal size of the key-latency runs")
    ap.add_argument("--keys-only", action="store_true", help="only the key-latency runs")
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--app-events", type=int, default=200_000)
    ap.add_argument("--app-rate", type=float, default=20_000.0)
    ap.add_argument("--skip-tmux", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    report: dict = {"loadavg": os.getloadavg(), "cpus": os.cpu_count()}
    print(f"load average {report['loadavg']} on {report['cpus']} CPUs")

    if not a.keys_only:
        bare = first_paint_headless(child=_BARE_CHILD)
        report["first_paint_bare_textual"] = bare
        print("first paint, an empty Textual app (this machine's floor): "
              + ", ".join(f"{h['ready_s']:.2f}s" for h in bare))
        head = first_paint_headless()
        report["first_paint_headless"] = head
        print("first paint, headless app: "
              + ", ".join(f"{h['ready_s']:.2f}s" for h in head)
              + f"  torch imported: {any(h['torch_imported'] for h in head)}  (bar < 1 s)")
        if not a.skip_tmux and shutil.which("tmux"):
            tm = first_paint_tmux()
            report["first_paint_tmux_s"] = tm
            print("first paint, `tplab-tui --mock` in tmux: "
                  + ", ".join(f"{t:.2f}s" for t in tm) + "  (bar < 1 s)")

    size = tuple(int(v) for v in a.size.lower().split("x"))
    runs = []
    names = (("start", "s → starting"), ("terminate", "ctrl+t → TERMINATING…"),
             ("help_open", "? → help"), ("help_close", "esc → dashboard"))
    for run in range(a.runs):
        load = os.getloadavg()
        kl = asyncio.run(key_latency(a.presses, a.rate, a.labs, size))  # a fresh app each run
        fl = asyncio.run(key_latency(a.presses, a.rate, a.labs, size, floor=True))
        kl["loadavg_before"], kl["floor"] = load, fl
        runs.append(kl)
        print(f"run {run + 1}/{a.runs} at {size[0]}x{size[1]} (load average {load[0]:.1f}): "
              f"press → first frame showing the answer, dashboard | bare Textual app under the "
              f"same load (bar < 100 ms); delivered {kl['delivered_events_per_s']} | "
              f"{fl['delivered_events_per_s']} token events/s, panel redraws "
              f"{kl['redraws_per_s']}/s, dropped {kl['dropped_events']}")
        for name, label in names:
            k, f = kl[name], fl[name]
            print(f"  {label:<24} p50 {k['p50_ms']:6.1f} | {f['p50_ms']:6.1f} ms   max "
                  f"{k['max_ms']:6.1f} | {f['max_ms']:6.1f} ms   (n={k['n']}; max ratio "
                  f"{k['max_ms'] / max(f['max_ms'], 0.1):.2f}×)")
    report["key_latency_runs"] = runs
    slowest = [r["slowest_ms"] for r in runs]
    floors = [r["floor"]["slowest_ms"] for r in runs]
    print("slowest press per run (s, ctrl+t, ?, esc): dashboard "
          + "  ".join(f"{v:.1f}" for v in slowest) + " ms | bare app "
          + "  ".join(f"{v:.1f}" for v in floors)
          + f" ms -> worst {max(slowest):.1f} ms ({'within' if max(slowest) < 100 else 'OVER'} "
            "the 100 ms bar)")
    if a.keys_only:
        if a.json:
            a.json.write_text(json.dumps(report, indent=2) + "\n")
        return 0

    mem = memory_labstate(a.events)
    report["memory_labstate"] = mem
    print(f"LabState over {mem['events']:,} events ({mem['events_per_s']:,}/s): RSS MB "
          + " ".join(f"{m}" for _, m in mem["rss_mb"])
          + f"; growth after the first 10%: {mem['growth_after_first_10pct_mb']} MB")

    ma = asyncio.run(memory_app(a.app_events, a.app_rate))
    report["memory_app"] = ma
    print(f"app over {ma['events']:,} events at {ma['rate']:,.0f}/s: RSS MB "
          + " ".join(f"{m}" for _, m in ma["rss_mb"])
          + f"; growth after the first 20%: {ma['growth_after_first_20pct_mb']} MB")
    if a.json:
        a.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

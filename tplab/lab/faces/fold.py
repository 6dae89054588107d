"""How each event type changes a ``LabState``: one small handler per type, O(1) each.

Why apart from ``state.py``: the state is what views read (its fields and derived figures); this
is how the stream writes it. The handlers touch only the state they are given (typed loosely:
importing ``LabState`` here would tie the two modules in a circle). Standard library only.
"""

from __future__ import annotations

from typing import Any, Callable

from tplab.records.events import Event

#: ``apply`` looks a handler up here by the event's type; unknown types are counted, not fatal
HANDLERS: dict[str, Callable[[Any, Event], None]] = {}


def _handles(type_: str):
    def register(fn: Callable[[Any, Event], None]) -> Callable[[Any, Event], None]:
        HANDLERS[type_] = fn
        return fn
    return register


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@_handles("phase")
def _on_phase(s: Any, ev: Event) -> None:
    name = ev["name"]
    if s.started_at is None:
        s.started_at = ev.ts
    s.starting = None
    for key in ("num_prompts", "new_tokens", "world_size", "d_model"):
        v = _int(ev.get(key))
        if v is not None:
            setattr(s, key, v)
    if ev.src == "lab":
        s.phase = name
        s.phase_since = ev.ts
        if isinstance(ev.get("mock"), bool):
            s.mock = ev.get("mock")
        if isinstance(ev.get("lab_id"), str):
            s.lab_id = ev.get("lab_id")
        if name == "terminate":
            s.terminate_seen = True
        elif name == "verify":
            s.terminate_seen = True
            s.verify_seen = True
        elif name == "done":
            s.done = True
            s.done_status = ev.get("status")
            s.done_reason = ev.get("reason")
            s.out_dir = ev.get("out_dir") or s.out_dir
            s.manifest_path = ev.get("manifest") or s.manifest_path
            if ev.get("verified_gone") is True and s.instance.pod_id is not None:
                s.instance.state = "GONE"
                s.instance.state_since = ev.ts
        extra = ""
        if name == "done":
            extra = f" {s.done_status or ''}" + (f": {s.done_reason}" if s.done_reason else "")
        level = "info"
        if name == "done" and s.done_status not in ("COMPLETE", None):
            level = "warning" if s.done_status in ("STOPPED", "EDUCATIONAL_STUB") else "error"
        s._log(ev.ts, ev.src, level, f"phase {name}{extra}")
    else:
        s.job_phase = name
        s._log(ev.ts, ev.src, "info", f"phase {name}")


@_handles("log")
def _on_log(s: Any, ev: Event) -> None:
    s._log(ev.ts, ev.src, ev["level"], ev["msg"])


@_handles("token")
def _on_token(s: Any, ev: Event) -> None:
    mode = ev["mode"]
    t = s.timings.get(mode)
    if t is None:
        s.unknown_events += 1
        return
    t.add(float(ev["ms"]), float(ev["ar_ms"]))
    s.last_token_mode = mode
    t.prompt = ev["prompt"]
    t.pos = ev["pos"]


@_handles("prompt_done")
def _on_prompt_done(s: Any, ev: Event) -> None:
    mode = ev["mode"]
    t = s.timings.get(mode)
    if t is None:
        return
    t.prompts_done += 1
    texts = s.prompt_texts[mode]
    if len(texts) < 10_000:  # bounded: a lab has tens of prompts
        texts[ev["prompt"]] = ev["text"]


@_handles("sweep")
def _on_sweep(s: Any, ev: Event) -> None:
    s.sweeps += 1


#: the fields of a measured d_model sweep point the views use
_SWEEP_FIELDS = ("d_model", "params", "single_ms", "tp_ms", "allreduce_ms", "outputs_match",
                 "tokens")


@_handles("sweep_point")
def _on_sweep_point(s: Any, ev: Event) -> None:
    d = ev["d_model"]
    if ev["skipped"]:
        if len(s.sweep_skipped) < 100:  # bounded: a sweep has a handful of sizes
            s.sweep_skipped.append({"d_model": d, "reason": str(ev.get("reason", ""))})
        s._log(ev.ts, ev.src, "info", f"d_model sweep: {d} skipped ({ev.get('reason', '')})")
        return
    point = {k: ev.get(k) for k in _SWEEP_FIELDS}
    if _num(point["single_ms"]) is None or _num(point["tp_ms"]) is None:
        s.unknown_events += 1
        return
    others = [p for p in s.sweep_points if p["d_model"] != d][:99]
    s.sweep_points = sorted(others + [point], key=lambda p: p["d_model"])
    s._log(ev.ts, ev.src, "info" if point["outputs_match"] else "error",
           f"d_model sweep: {d}: single {point['single_ms']:.3f} ms, TP {point['tp_ms']:.3f} ms"
           + ("" if point["outputs_match"] else ", TP output differs"))


@_handles("result")
def _on_result(s: Any, ev: Event) -> None:
    res = ev["results"]
    s.results = res
    model = res.get("model") if isinstance(res.get("model"), dict) else {}
    for key, v in (("d_model", model.get("d_model")), ("world_size", res.get("world_size"))):
        if _int(v) is not None:
            setattr(s, key, v)
    match = res.get("outputs_match")
    s._log(ev.ts, ev.src, "info" if match else "warning",
           f"result: outputs_match={match} speedup={res.get('speedup')}")


@_handles("error")
def _on_error(s: Any, ev: Event) -> None:
    msg = ev["msg"]
    s.errors.append(msg)
    if ev["fatal"]:
        s.fatal_error = msg
    s._log(ev.ts, ev.src, "error", ("fatal: " if ev["fatal"] else "") + msg)


@_handles("heartbeat")
def _on_heartbeat(s: Any, ev: Event) -> None:
    if ev.src == "lab":
        age = _num(ev.get("age_s"))
        if age is not None:
            s.heartbeat_age_s = age
            s.heartbeat_ts = ev.ts
    else:
        s.job_heartbeat_ts = ev.ts


@_handles("cost")
def _on_cost(s: Any, ev: Event) -> None:
    c = s.cost
    c.accrued_usd = float(ev["accrued_usd"])
    c.usd_per_hr = float(ev["usd_per_hr"])
    c.seconds_left = float(ev["seconds_left"])
    c.ts = ev.ts


@_handles("budget")
def _on_budget(s: Any, ev: Event) -> None:
    b = s.budget
    b.cap_usd = float(ev["cap_usd"])
    b.spent_usd = float(ev["spent_usd"])
    b.held_usd = float(ev["held_usd"])
    b.remaining_usd = float(ev["remaining_usd"])
    b.source, b.problem = "lab", None
    auth = _num(ev.get("authorized_usd"))
    if auth is not None:
        b.authorized_usd = auth


@_handles("instance")
def _on_instance(s: Any, ev: Event) -> None:
    inst = s.instance
    state = ev["state"]
    if state != inst.state:
        inst.state = state
        inst.state_since = ev.ts
        s._log(ev.ts, ev.src, "info",
               f"instance {ev.get('pod_id') or inst.pod_id or '?'} {state}")
    for key in ("pod_id", "provider", "gpu_type", "ssh_host"):
        v = ev.get(key)
        if isinstance(v, str) and v:
            setattr(inst, key, v)
    for key in ("gpu_count", "ssh_port"):
        v = _int(ev.get(key))
        if v is not None:
            setattr(inst, key, v)
    if isinstance(ev.get("spot"), bool):
        inst.spot = ev.get("spot")
    rate = _num(ev.get("usd_per_hr"))
    if rate is not None:
        inst.usd_per_hr = rate
    up = _num(ev.get("uptime_s"))
    if up is not None:
        inst.uptime_s = up
        inst.uptime_ts = ev.ts


@_handles("ssh")
def _on_ssh(s: Any, ev: Event) -> None:
    if ev["state"] != s.ssh_state:
        s.ssh_state = ev["state"]
        s._log(ev.ts, ev.src, "warning" if ev["state"] == "dropped" else "info",
               f"ssh {ev['state']}")


@_handles("warning")
def _on_warning(s: Any, ev: Event) -> None:
    s.warnings.append(ev["msg"])
    s._log(ev.ts, ev.src, "warning", ev["msg"])

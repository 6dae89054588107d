"""The fault suite's Vast rows: the same promises on the mock Vast cloud (fault_suite.py runs
them with ``--provider vast`` or ``both``). The mock answers as Vast does today: its v0 list is
deprecated, an SSH session has none of the container's variables, 429s carry no Retry-After.

- the client SIGKILLed and SIGHUPed in each lab phase, with the same bounds as on RunPod (the
  boot guard and the watchdog end the instance with its own key, CONTAINER_API_KEY);
- the instance key absent from SSH sessions: a client SIGKILLed mid-run, and the watchdog it
  started over SSH still ends the instance, with the key from the file onstart wrote;
- outbid mid-run: the lab ends as a spot interruption, the instance destroyed and verified gone,
  the tokens measured before it kept;
- a failed bid that leaves a stopped instance: destroyed, nothing left, nothing held;
- a bid rented on demand (the create's answer does not say): destroyed at once, one sentence,
  the ledger settled with what those seconds cost;
- the deprecated v0 list, with 30 other instances ahead of the lab's (two pages of the v1
  list): the lab lists through v1 only, to the last page;
- 429 "API requests too frequent" and 5xx on every route the lab calls, and Vast's own rate
  limit (a minimum interval per endpoint and key, no Retry-After): backed off, the lab
  completes; a destroy that lingers: the lab waits until show and list say gone.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from benchmarks.fault_suite import PHASES, Row, Worker, fault_lab, run_signal_trials

ROUTES = ["POST /api/v0/bundles", "GET /api/v0/instances/{id}", "GET /api/v1/instances",
          "GET /api/v0/charges", "GET /api/v0/users/current", "DELETE /api/v0/instances/{id}",
          "POST /api/v0/instances/{id}/ssh", "PUT /api/v0/asks/{id}"]
OTHERS = 30            # instances of someone else's on the account, ahead of the lab's
MIN_INTERVAL_S = 1.5   # Vast's rate limit in the 429 row: per endpoint and key
DEPRECATED = "GET /api/v0/instances (deprecated list)"
LATER_PAGES = "GET /api/v1/instances (after_token)"


def _others(w: Worker) -> None:
    """Stopped instances not tplab's, made before the lab: its own lands on the list's 2nd page."""
    from tests.mock.vast_helpers import create
    for i in range(OTHERS):
        status, body = create(w.cloud, f"someone-else-{i}", bid=False, target_state="stopped")
        assert status == 200 and body["success"], body


def _listed_through_v1(w: Worker, outcome) -> tuple[bool, str]:
    from tests.mock.vast_helpers import destroy
    calls = w.cloud.calls()
    for p in w.cloud.pods():
        if str(p["label"]).startswith("someone-else-") and not p["destroyed"]:
            destroy(w.cloud, p["id"])
    v0 = calls.get(DEPRECATED, 0)
    v1 = calls.get("GET /api/v1/instances", 0) - w.cloud.state()["rateLimited"].get(
        "GET /api/v1/instances", 0)   # pages served (a 429 is counted as a call too)
    later = calls.get(LATER_PAGES, 0)
    return v0 == 0 and later >= 1 and v1 == 2 * later, \
        f"v0 list {v0} calls, v1 {v1} pages ({later} 2nd)"


def _rate_limited(w: Worker, outcome) -> tuple[bool, str]:
    limited = sum(w.cloud.state()["rateLimited"].values())
    return limited > 0, f"{limited} x 429"


def _said_on_demand(w: Worker, outcome) -> tuple[bool, str]:
    made = w.cloud.pods()
    ok = "on demand" in outcome.reason and len(made) == 1 and not made[0]["is_bid"] \
        and outcome.verified_gone
    return ok, f"{made[0]['computeSeconds']:.1f} s of compute" if made else "no instance"


def vast_cases(quick: bool) -> list[tuple[str, str, dict, str, dict]]:
    cases = [
        ("vast outbid", "mid-run, never resumes", {"outbid_after_s": 8.0,
                                                    "outbid_resume_s": -1}, "INTERRUPTED",
         {"num_prompts": 6, "new_tokens": 64, "status_poll_s": 0.5}),
        ("vast bid", "fails and leaves a stopped instance", {"failed_bid_n": 1},
         "EDUCATIONAL_STUB", {}),
        ("vast bid", "rented on demand instead (the answer does not say)", {"bid_ignored_n": 1},
         "FAILED", {"check": _said_on_demand}),
        ("vast list", f"v0 deprecated, {OTHERS} other instances ahead (2 pages of v1)", {},
         "COMPLETE", {"before": _others, "check": _listed_through_v1}),
        ("vast 429", "every route the lab calls, 2 each, no Retry-After", {"http_429": {
            r: 2 for r in ROUTES}}, "COMPLETE", {}),
        ("vast 429", f"Vast's own limit: {MIN_INTERVAL_S:g} s per endpoint and key, no "
         "Retry-After", {"min_interval_s": MIN_INTERVAL_S}, "COMPLETE",
         {"check": _rate_limited}),
        ("vast 5xx", "every route the lab calls, 2 each", {"http_500": {
            r: 2 for r in ROUTES if r != "PUT /api/v0/asks/{id}"}}, "COMPLETE", {}),
        ("vast destroy", "lingers 6 reads after it is accepted", {"destroy_lingers": 6},
         "COMPLETE", {}),
    ]
    return [] if quick else cases  # quick: each is a scenario lab in tests/lab/test_lab_vast.py


def key_absent_from_ssh(root: Path) -> Row:
    """A client SIGKILLed once its job runs: only the watchdog it started over SSH (or, a minute
    later, the boot guard) can end the instance, and that SSH session had no CONTAINER_API_KEY
    (as on Vast): the watchdog must read it from the file the instance's onstart wrote."""
    from benchmarks.fault_suite import HEARTBEAT_S, PRINTED, _terminate_all, quiet_for
    w = Worker(root / "vast-key", provider="vast")
    w.start()
    proc = w.client(w.root / "out")
    try:
        deadline = time.monotonic() + 180
        running = False
        for line in proc.stdout or []:
            if json.loads(line).get("src") == "job":   # the job's first event: it runs
                running = True
                break
            if time.monotonic() > deadline:
                break
        t_sig = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        bound = HEARTBEAT_S + 1.0 + 7.0              # the watchdog (+ its poll + the API)
        took = quiet_for(w, t_sig, bound + 20)
        left = w.live()
        rest, err = proc.communicate(timeout=120)
        PRINTED.extend([rest, err])
        logs = [Path(p["sandbox"]) / "tplab-run" / "watchdog.log" for p in w.cloud.pods()]
        text = "".join(p.read_text() for p in logs if p.is_file())
        from_file = "pod key from " in text and ".tplab-guard/instance.env" in text
        asked = "trying DELETE /api/v0/instances/" in text
        ok = running and not left and took <= bound and from_file and asked
        note = ("the job never ran" if not running else f"{len(left)} pod(s) alive" if left
                else "" if from_file and asked else "the watchdog did not end it with the key "
                "from onstart's file")
        return Row("vast key", "absent from SSH: client SIGKILLed while the job runs",
                   f"{took:.1f} s" + (", key from onstart's file" if from_file else ""),
                   f"<= {bound:.0f} s", ok, note)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        _terminate_all(w)
        w.stop()


def vast_rows(root: Path, quick: bool, reps: int, workers: int) -> list[Row]:
    phases = ("boot", "run") if quick else PHASES
    rows = run_signal_trials(root, 1 if quick else reps, phases, 2 if quick else workers,
                             provider="vast")
    if not quick:
        rows.append(key_absent_from_ssh(root))
    for area, case, faults, expect, kw in vast_cases(quick):
        rows.append(fault_lab(root, area, case, faults, expect, provider="vast", **kw))
    return rows

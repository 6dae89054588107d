"""The fault suite's Vast rows: the same promises on the mock Vast cloud (fault_suite.py runs
them with ``--provider vast`` or ``both``). The mock answers as Vast does today: its v0 list is
deprecated, an SSH session has none of the container's variables, 429s carry no Retry-After.

- the client SIGKILLed and SIGHUPed in each of the lab's stages, with the same bounds as on RunPod (the
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
- 429 "API requests too frequent" and 5xx (Vast's JSON, or a proxy's HTML page) on every route
  the lab calls, and Vast's own rate
  limits (a minimum interval per endpoint and key, no Retry-After; on by default, read from
  Vast's per-endpoint data): at the service's own the lab meets no 429 (it paces its calls),
  with the limits doubled it learns from the 429s and completes; a destroy that lingers: the
  lab waits until show and list say gone; one accepted and never done, its record saying
  destroyed while the machine runs: never called gone, the hold kept until a retry proves it;
  a failed bid whose instance is never destroyed: the last sentence says what is left;
- the end as a user runs it (`tplab terminate ID`): eight 429s on destroy at Vast's own
  limits (gone within 150 s), 500 pages, destroys answered ``success: false``, a
  destroyed-but-running record, a hung API (one sentence within 300 s);
- offers: the cheap hosts that do not say their CUDA are taken after every known fit; a
  create refused as ``invalid_args`` is said as that, never as "no spot";
- Vast as it answers beyond its document: its input limits (the boot guard in variables of
  at most 256 characters, started with the instance), a refused key (404 auth_error: one
  sentence, nothing rented), a market of 209 offers in the server's own order (the cheapest
  that can run the lab far down), an offer taken or repriced between search and create
  (searched again, each try said, a bounded number of times), every state as Vast reports it
  (destroyed records, a stopped intent while it comes up or mid-run, an OCI error,
  restarting), a direct SSH port that never answers (the proxy), the balance as ``credit``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.fault_trials import (CANARY, HEARTBEAT_S, STAGES, PRINTED, Row,  # noqa: E402
                                     Worker, both, end_rows, fault_lab, held_then_retried,
                                     no_html, quiet_for, run_signal_trials, said,
                                     terminate_all)

ROUTES = ["POST /api/v0/bundles", "GET /api/v0/instances/{id}", "GET /api/v1/instances",
          "GET /api/v0/charges", "GET /api/v0/users/current", "DELETE /api/v0/instances/{id}",
          "POST /api/v0/instances/{id}/ssh", "PUT /api/v0/asks/{id}"]
OTHERS = 30            # instances of someone else's on the account, ahead of the lab's
RATE_SCALE = 2.0       # Vast's rate limits doubled in the 429 row; the client is not told
DEPRECATED = "GET /api/v0/instances (deprecated list)"
LATER_PAGES = "GET /api/v1/instances (after_token)"


def _others(w: Worker) -> None:
    """Stopped instances not tplab's, made before the lab: its own lands on the list's 2nd page."""
    from tests.mock.vast_helpers import create
    w.cloud.set_faults(rate_scale=0.0)     # made faster than Vast lets one key create
    for i in range(OTHERS):
        status, body = create(w.cloud, f"someone-else-{i}", bid=False, target_state="stopped")
        assert status == 200 and body["success"], body
    w.cloud.set_faults(rate_scale=1.0)


def _listed_through_v1(w: Worker, outcome) -> tuple[bool, str]:
    from tests.mock.vast_helpers import destroy
    calls = w.cloud.calls()
    w.cloud.set_faults(rate_scale=0.0)
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


def _paced(w: Worker, outcome) -> tuple[bool, str]:
    """Vast's own limits: not one 429; the guard started with the instance's container."""
    import calendar
    import re
    limited = sum(w.cloud.state()["rateLimited"].values())
    [made] = w.cloud.pods()
    first = (outcome.out_dir / "guard.log").read_text().splitlines()[0]
    stamp = re.match(r"(\S+Z) boot-guard", first)
    began = calendar.timegm(time.strptime(stamp.group(1), "%Y-%m-%dT%H:%M:%SZ")) if stamp else 0
    late = began - (made["containerStartedAt"] or 0)
    return limited == 0 and -1 <= late <= 5, f"{limited} x 429, guard +{late:.0f} s"


def _cheapest(w: Worker, outcome) -> tuple[bool, str]:
    made = [p for p in w.cloud.pods() if str(p["label"]).startswith("tplab-")]
    ask = made[0]["askId"] if made else None
    return ask == 9001002, f"bid on offer {ask}"


def _credit(w: Worker, outcome) -> tuple[bool, str]:
    from tplab.cloud.vast.provider import VastProvider
    from tests.mock.vast_helpers import api
    user = api(w.cloud, "GET", "/api/v0/users/current/")[1]
    read = VastProvider(CANARY, w.cloud.api_url).balance()
    return read == user["credit"] != user["balance"], f"balance ${read:.4f} (credit)"


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
        # a 429 that names no threshold teaches the pacer a longer interval and, on a create,
        # waits Vast's 12 s penalty: the instance waits longer for its client than the suite's
        # 12 s guard bound allows, so this row gives the guard a minute
        ("vast 429", "every route the lab calls, 2 each, no Retry-After", {"http_429": {
            r: 2 for r in ROUTES}}, "COMPLETE", {"guard_first_heartbeat_s": 60.0}),
        ("vast 429", "Vast's own limits, on (its intervals per endpoint and key)", {},
         "COMPLETE", {"check": _paced}),
        ("vast 429", f"the limits x {RATE_SCALE:g}, the client not told (it learns)",
         {"rate_scale": RATE_SCALE}, "COMPLETE", {"check": _rate_limited}),
        ("vast 5xx", "every route the lab calls, 2 each", {"http_500": {
            r: 2 for r in ROUTES if r != "PUT /api/v0/asks/{id}"}}, "COMPLETE", {}),
        ("vast 5xx", "every route the lab calls, 2 each, as a proxy's HTML page", {"http_500": {
            r: 2 for r in ROUTES if r != "PUT /api/v0/asks/{id}"}, "error_page": True},
         "COMPLETE", {"check": no_html}),
        ("vast destroy", "lingers 6 reads after it is accepted", {"destroy_lingers": 6},
         "COMPLETE", {}),
        ("vast destroy", "accepted, never done, the record intended destroyed while it runs: "
         "the hold stays until a retry proves it gone",
         {"destroy_lingers": -1, "destroy_intent_shown": True}, "FAILED",
         {"end_bound_s": 10.0, "check": held_then_retried({"destroy_lingers": 0,
                                                           "destroy_intent_shown": False})}),
        ("vast bid", "fails, and its instance's destroy is never done", {
            "failed_bid_n": 1, "destroy_lingers": -1}, "EDUCATIONAL_STUB",
         {"end_bound_s": 10.0, "check": both(
             said("left instance", "NOT proven gone", absent=("nothing",)),
             held_then_retried({"destroy_lingers": 0}))}),
        ("vast offers", "the cheap hosts do not say their CUDA (cuda_max_good missing)",
         {"cuda_unknown": True}, "COMPLETE", {"check": _cheapest}),
        ("vast create", "refused as invalid_args", {"create_invalid_args": 1}, "FAILED",
         {"check": said("invalid_args", absent=("--on-demand", "no spot"))}),
        ("vast key", "refused as Vast answers it (404 auth_error)", {"key_refused": "revoked"},
         "FAILED", {"check": said("refused the API key from")}),
        ("vast key", "deleted (401) / 2FA session expired (404)", {"key_refused": "session"},
         "FAILED", {"check": said("Session expired")}),
        ("vast market", "209 offers, the cheapest that fits far down Vast's own order", {},
         "COMPLETE", {"check": _cheapest}),
        ("vast offer", "taken (410), then its quote stale (400)", {"offer_taken": [410, 400]},
         "COMPLETE", {"check": said("HTTP 410 no_such_ask", "HTTP 400 invalid_price")}),
        ("vast offer", "taken at every try (404, 410, 410)", {"offer_taken": [404, 410, 410]},
         "EDUCATIONAL_STUB", {"check": said("would not rent any of the 3 cheapest")}),
        ("vast state", "a destroyed record (not null)", {"destroyed_records": True},
         "COMPLETE", {}),
        ("vast state", "stopped intent while it comes up", {"stopped_while_loading": True},
         "FAILED", {"check": said("set it to stop while it was coming up")}),
        ("vast state", "created with an OCI runtime error", {"oci_error": True}, "FAILED",
         {"check": said("OCI runtime create failed")}),
        ("vast state", "restarting 3 s on the way up", {"restarting_s": 3.0}, "COMPLETE", {}),
        ("vast state", "outbid mid-run, reported as a stopped intent",
         {"outbid_after_s": 8.0, "outbid_resume_s": -1, "outbid_as_stopped": True},
         "INTERRUPTED", {"num_prompts": 6, "new_tokens": 64, "status_poll_s": 0.5}),
        ("vast ssh", "direct port never answers, padded address: the proxy",
         {"direct_port_blocked": True, "padded_ipaddr": True}, "COMPLETE",
         {"direct_ssh_s": 5.0, "check": said("connecting through Vast.ai's SSH proxy")}),
        ("vast money", "the balance is credit (balance is not)", {}, "COMPLETE",
         {"check": _credit}),
    ]
    return [] if quick else cases  # quick: each is a scenario lab in tests/lab/test_lab_vast.py


def key_absent_from_ssh(root: Path) -> Row:
    """A client SIGKILLed once its job runs: only the watchdog it started over SSH (or, a minute
    later, the boot guard) can end the instance, and that SSH session had no CONTAINER_API_KEY
    (as on Vast): the watchdog must read it from the file the instance's onstart wrote."""
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
        terminate_all(w)
        w.stop()


def vast_rows(root: Path, quick: bool, reps: int, workers: int,
              only: str | None = None) -> list[Row]:
    """The Vast rows; ``only``: just the lab rows whose area starts with it (no signal
    trials)."""
    rows: list[Row] = []
    if only is None:
        stages = ("boot", "run") if quick else STAGES
        rows += run_signal_trials(root, 1 if quick else reps, stages, 4 if quick else workers,
                                  provider="vast")
        if not quick:
            rows.append(key_absent_from_ssh(root))
    for area, case, faults, expect, kw in vast_cases(quick and only is None):
        if only is None or area.startswith(only):
            rows.append(fault_lab(root, area, case, faults, expect, provider="vast", **kw))
    if not quick or (only or "").startswith("vast end"):  # the end, as a user runs it
        rows += end_rows(root, "vast", only)
    return rows


def main(argv: list[str] | None = None) -> int:
    """The Vast rows alone: ``fault_suite.py --provider vast`` (its flags), run as that
    script (this module is what it imports: importing it back would be a circle)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print("usage: fault_suite_vast.py [fault_suite.py's flags]\n\n" + __doc__.split(
            "\n\n")[0] + "\n\nRuns benchmarks/fault_suite.py --provider vast with the flags "
              "given (--quick, --reps, --workers, --keep, --rows AREA); see its --help.")
        return 0
    suite = Path(__file__).resolve().parent / "fault_suite.py"
    os.execv(sys.executable, [sys.executable, str(suite), "--provider", "vast", *args])


if __name__ == "__main__":
    sys.exit(main())

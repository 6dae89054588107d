"""The fault suite's Vast rows: the same promises on the mock Vast cloud (fault_suite.py runs
them with ``--provider vast`` or ``both``).

- the client SIGKILLed and SIGHUPed in each lab phase, with the same bounds as on RunPod (the
  boot guard and the watchdog end the instance with its own key, CONTAINER_API_KEY);
- outbid mid-run: the lab ends as a spot interruption, the instance destroyed and verified gone,
  the tokens measured before it kept;
- a failed bid that leaves a stopped instance: destroyed, nothing left, nothing held;
- 429 "API requests too frequent" and 5xx on every route the lab calls: backed off, the lab
  completes; a destroy that lingers: the lab waits until show and list say gone.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.fault_suite import PHASES, Row, fault_lab, run_signal_trials

ROUTES = ["POST /api/v0/bundles", "GET /api/v0/instances/{id}", "GET /api/v1/instances",
          "GET /api/v0/charges", "GET /api/v0/users/current", "DELETE /api/v0/instances/{id}",
          "POST /api/v0/instances/{id}/ssh"]


def vast_cases(quick: bool) -> list[tuple[str, str, dict, str, dict]]:
    cases = [
        ("vast outbid", "mid-run, never resumes", {"outbid_after_s": 8.0,
                                                    "outbid_resume_s": -1}, "FAILED",
         {"num_prompts": 6, "new_tokens": 64, "status_poll_s": 0.5}),
        ("vast bid", "fails and leaves a stopped instance", {"failed_bid_n": 1},
         "EDUCATIONAL_STUB", {}),
    ]
    if not quick:
        cases += [
            ("vast 429", "every route the lab calls, 2 each", {"http_429": {
                r: 2 for r in ROUTES}}, "COMPLETE", {}),
            ("vast 5xx", "every route the lab calls, 2 each", {"http_500": {
                r: 2 for r in ROUTES}}, "COMPLETE", {}),
            ("vast destroy", "lingers 6 reads after it is accepted", {"destroy_lingers": 6},
             "COMPLETE", {}),
        ]
    return cases


def vast_rows(root: Path, quick: bool, reps: int, workers: int) -> list[Row]:
    phases = ("boot", "run") if quick else PHASES
    rows = run_signal_trials(root, 1 if quick else reps, phases, 2 if quick else workers,
                             provider="vast")
    for area, case, faults, expect, kw in vast_cases(quick):
        rows.append(fault_lab(root, area, case, faults, expect, provider="vast", **kw))
    return rows

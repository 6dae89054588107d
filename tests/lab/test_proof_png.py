"""proof-terminated.png from a lab's files: the provider's answer read the way a person reads it
(gone, or still there and why), the routes that gave it, and the final frame from stream.jsonl."""

from __future__ import annotations

import json

from tplab.records.events import StageEvent
from tplab.lab.proof_png import final_frame, fit_lines, provider_lines, write_proof_png

PNG = b"\x89PNG\r\n\x1a\n"


def _proof(**kw) -> dict:
    base = {"pod_id": "p1", "provider": "runpod", "verified_gone": True, "listed": False,
            "answer": {"pod": None}, "checked_at": "2026-12-01T10:00:05+00:00",
            "terminate_requested_at": "2026-12-01T10:00:01+00:00"}
    return {**base, **kw}


def test_the_provider_answer_reads_as_a_person_would_read_it() -> None:
    rows = dict(provider_lines(_proof()))
    assert rows["state reported"].startswith("no such pod (404")
    assert rows["still listed"] == "no" and rows["verified gone"] == "YES"
    assert rows["API route"].startswith("GET /v2/pods/{pod_id}")
    kept = dict(provider_lines(_proof(verified_gone=False, listed=True,
                                      answer={"pod": {"id": "p1", "desiredStatus": "RUNNING"}})))
    assert kept["state reported"].startswith("RUNNING") and kept["still listed"] == "YES"
    assert kept["verified gone"].startswith("NO")
    vast = dict(provider_lines(_proof(provider="vast")))
    assert vast["API route"].startswith("GET /api/v0/instances/{pod_id}")
    failed = dict(provider_lines(_proof(verified_gone=False, answer={"error": "HTTP 500"})))
    assert failed["state reported"] == "no answer (HTTP 500)"


def test_the_final_frame_has_the_stages_with_their_times_and_the_table() -> None:
    evs = [StageEvent(seq=i, ts=100.0 + 2 * i, src="lab", name=n)
           for i, n in enumerate(["preflight", "create", "run", "terminate", "verify"])]
    frame = final_frame(evs, {"status": "COMPLETE", "reason": "the lab completed",
                              "pod_id": "p1", "verified_gone": True, "actual_cost_usd": 0.0123})
    assert "[   6.0s] terminate" in frame and "[   0.0s] preflight" in frame
    assert "p1 (verified gone)" in frame and "$0.0123" in frame


def test_the_final_frame_shows_the_times_the_terminal_showed(monkeypatch) -> None:
    """`tplab run` builds its view before the lab starts (the mock cloud, imports): its lines
    must count from the same moment as the proof picture's, the lab's first event."""
    import io

    from tplab.faces import headless

    now = [99.1]  # the view is made 0.9 s before the lab's first event
    monkeypatch.setattr(headless.time, "time", lambda: now[0])
    out = io.StringIO()
    view = headless.HeadlessView(out, tty=False)
    evs = [StageEvent(seq=i, ts=100.0 + 2.04 * i, src="lab", name=n)
           for i, n in enumerate(["preflight", "create", "run", "terminate", "verify"])]
    for ev in evs:
        now[0] = ev.ts + 0.03  # each shown a moment after it was emitted
        view.handle(ev)
    terminal = [ln for ln in out.getvalue().splitlines() if ln.endswith(("] run", "] verify"))]
    frame = final_frame(evs, {"status": "COMPLETE", "pod_id": "p1"}).splitlines()
    assert terminal == [ln for ln in frame if ln.endswith(("] run", "] verify"))]
    assert terminal == ["[   4.1s] run", "[   8.2s] verify"]


def test_no_proof_no_picture_and_a_picture_when_there_is_one(tmp_path) -> None:
    assert write_proof_png(tmp_path, {"status": "FAILED"}) is None
    (tmp_path / "proof-terminated.json").write_text(json.dumps(_proof(verified_gone=False)))
    path = write_proof_png(tmp_path, {"status": "FAILED", "reason": "x"}, mock=True)
    assert path == tmp_path / "proof-terminated.png" and path.read_bytes()[:8] == PNG


def test_a_long_line_of_the_frame_keeps_its_columns() -> None:
    """The summary table's long rows (the profiled split) stay in the table's columns in the
    picture, cut at their end, not re-flowed."""
    frame = ("  status                          COMPLETE\n"
             "  profiled TP token               " + "16.5 ms a token; medians: " + "x" * 120)
    lines = fit_lines(frame)
    assert lines[0] == "  status                          COMPLETE"
    assert lines[1].startswith("  profiled TP token               16.5 ms") and len(lines[1]) == 118
    assert lines[1].endswith("...")

"""assets/examples/ stays a true example: a finished MOCK lab's files, labelled MOCK, named by the
README, and in step with the manifest the code builds today. The manifest is rebuilt from the
example's own results.json through the lab's manifest builder (no lab is run): the example must
have every field it has, with values of the same JSON type; when the schema moves, this fails
until `scripts/example-lab` is run again."""

from __future__ import annotations

import json

from tplab.lab.artifacts import lab_manifest
from tplab.lab.lab_config import COMPLETE, LabConfig
from tplab.lab.orchestrator import Lab
from tplab.lab.prediction import predict_lab
from tplab.lab.manifest import SHEET_FIELDS
from tplab.home.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "assets" / "examples"
FILES = ("manifest.json", "results.json", "scaling-curve.png", "proof-terminated.png",
         "terminal-plot.txt", "tplab-run.txt", "README.md", "trace.json", "timeline.txt")
PNG = b"\x89PNG\r\n\x1a\n"


def _kind(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def _rebuilt(tmp_path, results: dict, example: dict) -> dict:
    """The manifest today's code writes for a complete mock lab with these results."""
    lab = Lab(LabConfig(mock=True, out_dir=tmp_path))
    lab.report.end(COMPLETE, "the lab completed")
    lab.report.take_results(results)
    pod = lab.pod
    pod.id, pod.verified_gone = example["instance_id"], True
    pod.created_at, pod.gone_at, pod.usd_per_hr = 1.0e9, 1.0e9 + 60, 0.7
    money = lab.money
    money.authorized_usd, money.actual_usd, money.expected_usd = 3.0, 0.01, 0.02
    money.worst_case_usd, money.price_kind = 0.5, "spot"
    money.cost_source, money.cost_note = "billing", "note"
    (tmp_path / "proof-terminated.png").write_bytes(PNG)
    pred = predict_lab(results, gpu_type=lab.config.gpu_type, gpus=lab.config.gpus, mock=True)
    return lab_manifest(lab.config, lab.report, pod, money, pred)


def test_the_example_is_there_and_says_mock() -> None:
    for name in FILES:
        assert (EXAMPLES / name).stat().st_size > 0, name
    for name in ("scaling-curve.png", "proof-terminated.png"):
        assert (EXAMPLES / name).read_bytes()[:8] == PNG
    m = json.loads((EXAMPLES / "manifest.json").read_text())
    assert m["mock"] is True and "mock" in m["vendor"] and m["status"] == COMPLETE
    assert m["terminated_screenshot"] == "proof-terminated.png" and m["verified_gone"] is True
    assert "MOCK" in (EXAMPLES / "README.md").read_text()
    plot = (EXAMPLES / "terminal-plot.txt").read_text()
    assert "d_model" in plot and "\x1b[" not in plot  # plain text, no colour codes
    # the profiled pass: the trace a user opens in Perfetto and the lanes `tplab timeline` prints
    trace = json.loads((EXAMPLES / "trace.json").read_text())
    from tplab.records.trace_merge import pid_of
    assert {e.get("pid") for e in trace["traceEvents"] if e.get("ph") == "X"} >= {pid_of(0),
                                                                                pid_of(1)}
    lanes = (EXAMPLES / "timeline.txt").read_text()
    assert "\nr0 " in lanes and "\nr1 " in lanes and "waiting" in lanes and "\x1b[" not in lanes
    readme = (REPO_ROOT / "README.md").read_text()
    assert "scripts/example-lab" in readme and "assets/examples/proof-terminated.png" in readme
    assert (REPO_ROOT / "scripts" / "example-lab").is_file()


def test_the_example_manifest_has_todays_fields_and_types(tmp_path) -> None:
    example = json.loads((EXAMPLES / "manifest.json").read_text())
    results = json.loads((EXAMPLES / "results.json").read_text())
    today = _rebuilt(tmp_path, results, example)
    assert sorted(today) == sorted(example)
    for key, value in today.items():
        if value is not None and example[key] is not None:
            assert _kind(example[key]) == _kind(value), key
    # a complete lab fills every field the lab sheet names
    assert [k for k in SHEET_FIELDS if example.get(k) is None] == []
    assert example["speedup"] == results["speedup"]

"""Layer guards: the library never imports the UI, and the UI's first paint never imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tplab
from tests.test_structure import parse_file

TPLAB_DIR = Path(tplab.__file__).resolve().parent
REPO = TPLAB_DIR.parent


def _imports(path: Path) -> set[str]:
    tree = parse_file(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_nothing_under_tplab_imports_textual_or_the_dashboard():
    files = sorted(TPLAB_DIR.rglob("*.py"))
    assert len(files) > 5
    bad = {}
    for f in files:
        hits = sorted(n for n in _imports(f)
                      if n.split(".")[0] in ("textual", "textual_plotext", "tui"))
        if hits:
            bad[str(f.relative_to(REPO))] = hits
    assert bad == {}, f"tplab/ must not import the UI layer: {bad}"


def test_the_guard_sees_function_level_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from textual.app import App\n    import textual_plotext\n")
    assert {"textual.app", "textual_plotext"} <= _imports(f)


_FIRST_PAINT = r"""
import json, sys
from tui.app import app_from_args
import tplab.viewmodel.fold, tests.synthetic_lab
def torch_loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] == "torch")
imported = torch_loaded()
app = app_from_args(["--mock"])
async def first(pilot):
    await pilot.pause()
    print(json.dumps({"budget": app.budget_panel._shown.plain,
                      "summary": app.summary._shown.plain,
                      "torch": torch_loaded(), "torch_on_import": imported}))
    app.exit()
app.run(headless=True, size=(80, 24), auto_pilot=first)
"""


def test_the_first_frame_has_the_ledgers_budget_and_nothing_imports_torch(tmp_path):
    """The figures a user must know before Start are on the first frame, read from the (mock)
    ledger and budget config, and reading them imports no torch; nor does importing the
    dashboard, the lab state's fold or the synthetic lab. One fresh interpreter (a second of
    the test) is what it pays for: torch loaded by an earlier test would hide an import."""
    import json
    import os
    home = tmp_path / "home"
    (home / "mock").mkdir(parents=True)
    (home / "mock" / "budget.toml").write_text("phase_cap_usd = 8.0\nlab_cap_usd = 2.0\n")
    ledger = [{"v": 1, "ts": 1.0, "kind": "authorize", "label": "a", "amount_usd": 2.0,
               "auth_id": "x1", "cap_usd": 8.0},
              {"v": 1, "ts": 2.0, "kind": "actual", "label": "a", "amount_usd": 0.5,
               "auth_id": "x1", "authorized_usd": 2.0},
              {"v": 1, "ts": 3.0, "kind": "authorize", "label": "b", "amount_usd": 1.25,
               "auth_id": "x2", "cap_usd": 8.0}]
    (home / "mock" / "spend.jsonl").write_text("".join(json.dumps(x) + "\n" for x in ledger))
    out = subprocess.run([sys.executable, "-c", _FIRST_PAINT], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, TPLAB_HOME=str(home)))
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # -- from test_dashboard_and_labstate_do_not_import_torch
    assert got["torch_on_import"] == []  # tui.app, tplab.viewmodel.fold, tests.synthetic_lab
    assert got["torch"] == []
    budget = got["budget"]
    assert "$8.00" in budget and "$0.50" in budget and "$1.25" in budget
    assert "$6.25" in budget and "cap $2.00 · needs $2.50 left ✓" in budget
    assert "$6.25 left of $8.00" in got["summary"]  # the 80×24 strip shows it too

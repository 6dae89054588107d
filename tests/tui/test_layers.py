"""Layer guards: the library never imports the UI, and the UI's first paint never imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tplab

TPLAB_DIR = Path(tplab.__file__).resolve().parent
REPO = TPLAB_DIR.parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
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


def test_dashboard_and_labstate_do_not_import_torch():
    code = ("import sys, tui.app, tplab.lab.faces.state, tui.feed.synthetic; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

"""The code's shape: no import circle among tplab's and the dashboard's modules, no oversized file.

An import circle is found from the source itself: every ``import`` and ``from … import`` is read
with ``ast``, at module level and inside functions alike (a deferred import still ties the two
modules together), relative imports resolved, and importing ``a.b.c`` counts as importing the
packages ``a`` and ``a.b`` too (Python runs their ``__init__`` first), except the packages
the importing module itself lives in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tplab

REPO = Path(tplab.__file__).resolve().parent.parent
PACKAGES = ("tplab", "tui")
MAX_LINES = 500


def module_files(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the given top-level packages."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _targets(node: ast.AST, module: str, is_pkg: bool, files: dict[str, Path]) -> list[str]:
    """The internal modules one import statement loads (the deepest module each name names)."""
    def deepest(dotted: str) -> str | None:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in files:
                return ".".join(parts[:i])
        return None

    if isinstance(node, ast.Import):
        found = [deepest(a.name) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from p import n`: n is a submodule of p, or a name defined in p itself
        found = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in files else deepest(prefix)
                 for a in node.names]
    else:
        return []
    return [t for t in found if t]


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the internal modules it imports (anywhere in the file). Importing ``a.b.c``
    also runs the packages ``a`` and ``a.b`` — except those the importer itself lives in, which
    are already being imported when it runs (a package's ``__init__`` importing its own
    submodules, which import each other, is no circle; taking a *name* from it is)."""
    files = module_files(root, packages)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_pkg = path.name == "__init__.py"
        parts = name.split(".")
        own_parents = {".".join(parts[:i]) for i in range(1, len(parts))}
        deps: set[str] = set()
        for node in ast.walk(tree):
            for target in _targets(node, name, is_pkg, files):
                tparts = target.split(".")
                deps.add(target)
                deps.update(p for i in range(1, len(tparts))
                            if (p := ".".join(tparts[:i])) in files and p not in own_parents)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


def test_no_import_cycle_under_tplab_and_tui():
    graph = import_graph(REPO)
    assert len(graph) > 50 and graph["tplab.lab.orchestrator"], "the graph was not read"
    assert find_cycles(graph) == []


def test_the_cycle_check_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "tplab"
    (pkg / "lab").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lab" / "__init__.py").write_text("")
    (pkg / "lab" / "a.py").write_text("from .b import thing\n")
    (pkg / "lab" / "b.py").write_text("def f():\n    from tplab.lab import a\n    return a\n")
    (pkg / "solo.py").write_text("import tplab.lab.b\n")
    assert find_cycles(import_graph(tmp_path, ("tplab",))) == [["tplab.lab.a", "tplab.lab.b"]]
    # a package __init__ importing its submodules, which import each other, is no circle ...
    (pkg / "lab" / "b.py").write_text("thing = 1\n")
    (pkg / "lab" / "__init__.py").write_text("from tplab.lab.a import thing\n")
    assert find_cycles(import_graph(tmp_path, ("tplab",))) == []
    # ... but a submodule taking a name from that __init__ is
    (pkg / "lab" / "b.py").write_text("from tplab.lab import thing\n")
    assert find_cycles(import_graph(tmp_path, ("tplab",))) == [
        ["tplab.lab", "tplab.lab.a", "tplab.lab.b"]]


def test_no_python_file_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in module_files(REPO).values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these into modules with one job each: {long}"

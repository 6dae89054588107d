"""The code's shape: no import circle among tplab's and the dashboard's modules, no oversized file,
the pod/records/client line held, and each room's name meaning one thing.

An import circle is found from the source itself: every ``import`` and ``from … import`` is read
with ``ast``, at module level and inside functions alike (a deferred import still ties the two
modules together), relative imports resolved, and importing ``a.b.c`` counts as importing the
packages ``a`` and ``a.b`` too (Python runs their ``__init__`` first), except the packages
the importing module itself lives in.
"""

from __future__ import annotations

import ast
import gc
import functools
import sys
from pathlib import Path

import tplab
from tplab.commands.main import COMMANDS

REPO = Path(tplab.__file__).resolve().parent.parent
PACKAGES = ("tplab", "tui")
MAX_LINES = 700


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


def parse_file(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed with the garbage collector held off. On CPython 3.11
    a collection inside ``ast.parse`` that runs a finaliser whose exception is reported (the
    report formats a traceback, which parses source itself) breaks the parser's recursion count
    (CPython gh-106905: "AST constructor recursion depth mismatch"), so none runs in between."""
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    finally:
        gc.enable()


@functools.cache  # the repository's graph is read once per test run
def _repo_graph() -> dict[str, frozenset[str]]:
    return {m: frozenset(d) for m, d in import_graph(REPO).items()}


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the internal modules it imports (anywhere in the file). Importing ``a.b.c``
    also runs the packages ``a`` and ``a.b`` — except those the importer itself lives in, which
    are already being imported when it runs (a package's ``__init__`` importing its own
    submodules, which import each other, is no circle; taking a *name* from it is)."""
    files = module_files(root, packages)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = parse_file(path)
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
    graph = _repo_graph()
    assert len(graph) > 50 and graph["tplab.lab.orchestrator"], "the graph was not read"
    assert find_cycles(graph) == []


def test_no_import_cycle_among_the_benchmarks():
    """benchmarks/ imports tplab (and the tests' helpers) and each other: no circle there either
    (a benchmark run as a script that imports a module importing it back runs twice)."""
    graph = import_graph(REPO, ("tplab", "tui", "tests", "benchmarks"))
    assert graph["benchmarks.fault_suite_vast"], "the graph was not read"
    assert [c for c in find_cycles(graph) if any(m.startswith("benchmarks.") for m in c)] == []


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


# ------------------------------------------------------------------ the pod / records / client line

#: what travels to the pod (tplab.lab.bundle): the job and what it runs, and the standard-library
#: packages both sides share: the records (the contract), the statistics and the two utilities
POD_SIDE = ("tplab.job", "tplab.tp", "tplab.model")
SHARED = ("tplab.records", "tplab.stats", "tplab.util")
#: client modules that still reach into the job, each with the engineer's task that removes it;
#: an entry no longer needed fails the test (remove it then)
CLIENT_JOB_IMPORTS_PENDING: dict[str, str] = {}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def client_job_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(client module, job module) for every import of ``tplab.job`` from outside the pod side
    and the records."""
    return {(m, d) for m, deps in graph.items()
            if not any(_within(m, p) for p in (*POD_SIDE, *SHARED))
            for d in deps if _within(d, "tplab.job")}


def test_client_code_never_imports_the_job():
    found = client_job_imports(_repo_graph())
    new = {(m, d) for m, d in found if m not in CLIENT_JOB_IMPORTS_PENDING}
    assert not new, ("client modules import tplab.job; read what the job writes through "
                     f"tplab.records instead: {sorted(new)}")
    gone = set(CLIENT_JOB_IMPORTS_PENDING) - {m for m, _ in found}
    assert not gone, f"no longer imported, remove from CLIENT_JOB_IMPORTS_PENDING: {sorted(gone)}"


def test_the_client_job_rule_sees_a_deferred_import(tmp_path):
    pkg = tmp_path / "tplab"
    for d in ("job", "lab", "records"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "job" / "results.py").write_text("X = 1\n")
    (pkg / "records" / "results.py").write_text("from tplab.job import results\n")
    (pkg / "lab" / "artifacts.py").write_text("def f():\n    from tplab.job.results import X\n")
    graph = import_graph(tmp_path, ("tplab",))
    assert client_job_imports(graph) == {("tplab.lab.artifacts", "tplab.job"),
                                         ("tplab.lab.artifacts", "tplab.job.results")}


def test_pod_side_and_records_import_only_what_travels_to_the_pod():
    """The job, tp and model import only torch, the standard library, each other and the shared
    packages (records, stats, util); those import only the standard library and each other; and
    the bundle uploads exactly these packages."""
    from tplab.lab.bundle import POD_PACKAGES

    assert set(POD_PACKAGES) == {p.split(".")[1] for p in (*POD_SIDE, *SHARED)}
    graph, files = _repo_graph(), module_files(REPO)
    bad = {}
    for m, deps in graph.items():
        if any(_within(m, p) for p in SHARED):
            allowed, libraries = SHARED, set()
        elif any(_within(m, p) for p in POD_SIDE):
            allowed, libraries = (*POD_SIDE, *SHARED), {"torch"}
        else:
            continue
        out = [d for d in deps if d != "tplab" and not any(_within(d, a) for a in allowed)]
        out += _third_party(files[m]) - libraries
        if out:
            bad[m] = sorted(out)
    assert bad == {}, f"pod-side / records modules importing what does not travel: {bad}"


def _third_party(path: Path) -> set[str]:
    """Top-level names of the non-stdlib, non-tplab modules a file imports."""
    tree = parse_file(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "tplab"}


# ------------------------------------------------------------------------ one name, one room

#: names that still mean two rooms, each with the work that renames it; an entry no longer
#: shared fails the test (remove it then)
SHARED_NAMES_PENDING: dict[str, str] = {}
#: folders whose packages are siblings doing one job each for a different cloud (SkyPilot's
#: ``provision/<cloud>/``): a file doing the same job in each has the same name in each, and the
#: jobs every sibling holds are listed here (a file that is one cloud's own, RunPod's GraphQL spot,
#: Vast's pacing, keeps a name of its own)
CLOUD_FAMILIES: dict[str, tuple[str, ...]] = {
    "tplab/cloud": ("provider", "api_key", "http_api", "shapes", "host_fit", "self_end"),
    "tplab/mock": ("server", "routes", "contract", "answers", "state", "faults", "catalog"),
}


def _sibling_key(rel: Path, families: dict[str, tuple[str, ...]]) -> str | None:
    """``tplab/cloud/<cloud>/<name>.py`` -> "tplab/cloud/*/<name>" (the same job in a sibling
    cloud folder), else None."""
    for family in families:
        parts = Path(family).parts
        if rel.parts[:len(parts)] == parts and len(rel.parts) == len(parts) + 2:
            return f"{family}/*/{rel.name}"
    return None


def shared_names(root: Path, packages: tuple[str, ...] = PACKAGES,
                 commands: dict[str, str] | None = None,
                 families: dict[str, tuple[str, ...]] | None = None) -> dict[str, list[str]]:
    """Basename -> the paths of the modules and packages (``__init__``/``__main__`` aside) that
    use it, for every basename used by more than one room under the given top-level packages. A
    ``tplab/commands/<module>.py`` named in ``commands`` (``tplab <name>``'s module) is named
    after its subcommand, which is the room it implements, and does not count; files at the
    same place in sibling cloud folders (``families``) are one room, the same job per cloud."""
    command_modules = set((commands if commands is not None else COMMANDS).values())
    families = CLOUD_FAMILIES if families is None else families
    uses: dict[str, list[str]] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*")):
            if "__pycache__" in path.parts or path.name.startswith("."):
                continue
            rel = path.relative_to(root)
            if path.is_dir():
                if not (path / "__init__.py").exists():
                    continue
                name = path.name
            elif path.suffix == ".py" and path.stem not in ("__init__", "__main__"):
                name = path.stem
                if rel.parts[:2] == ("tplab", "commands") and len(rel.parts) == 3 \
                        and name in command_modules:
                    continue
            else:
                continue
            uses.setdefault(name, []).append(rel.as_posix())
    rooms = {n: {_sibling_key(Path(p), families) or p for p in ps} for n, ps in uses.items()}
    return {n: p for n, p in sorted(uses.items()) if len(rooms[n]) > 1}


def test_each_name_means_one_room():
    found = shared_names(REPO)
    new = {n: p for n, p in found.items() if n not in SHARED_NAMES_PENDING}
    assert not new, f"one name for two rooms: rename one of each {new}"
    gone = sorted(set(SHARED_NAMES_PENDING) - set(found))
    assert not gone, f"no longer shared, remove from SHARED_NAMES_PENDING: {gone}"


def test_the_name_rule_counts_packages_and_modules_but_not_subcommands(tmp_path):
    for d in ("tplab/job", "tplab/lab", "tplab/commands", "tui/timings"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text("")
    for f in ("tplab/job/run.py", "tplab/commands/run.py", "tplab/lab/config.py",
              "tplab/job/config.py", "tplab/lab/timings.py", "tplab/commands/helpers.py",
              "tplab/lab/helpers.py", "tplab/job/__main__.py", "tui/__main__.py"):
        (tmp_path / f).write_text("")
    (tmp_path / "tui" / "__init__.py").write_text("")
    assert shared_names(tmp_path, ("tplab", "tui"), {"run": "run"}) == {
        "config": ["tplab/job/config.py", "tplab/lab/config.py"],
        "helpers": ["tplab/commands/helpers.py", "tplab/lab/helpers.py"],
        "timings": ["tplab/lab/timings.py", "tui/timings"],
    }


def test_sibling_cloud_folders_share_names_and_nothing_else_does(tmp_path):
    """The same job in two clouds' folders is one name; that name anywhere else, or a cloud
    file one level deeper, is still a second room."""
    for d in ("tplab/cloud/alpha", "tplab/cloud/beta", "tplab/cloud/beta/deep", "tplab/lab"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text("")
    for f in ("tplab/cloud/alpha/provider.py", "tplab/cloud/beta/provider.py",
              "tplab/cloud/alpha/shapes.py", "tplab/cloud/beta/shapes.py", "tplab/lab/shapes.py",
              "tplab/cloud/alpha/keys.py", "tplab/cloud/beta/deep/keys.py"):
        (tmp_path / f).write_text("")
    families = {"tplab/cloud": ("provider", "shapes")}
    assert shared_names(tmp_path, ("tplab",), {}, families) == {
        "keys": ["tplab/cloud/alpha/keys.py", "tplab/cloud/beta/deep/keys.py"],
        "shapes": ["tplab/cloud/alpha/shapes.py", "tplab/cloud/beta/shapes.py",
                   "tplab/lab/shapes.py"],
    }
    assert cloud_jobs_missing(tmp_path, families) == {}
    (tmp_path / "tplab/cloud/beta/shapes.py").unlink()
    assert cloud_jobs_missing(tmp_path, families) == {"tplab/cloud/beta": ["shapes"]}


def cloud_jobs_missing(root: Path, families: dict[str, tuple[str, ...]] = CLOUD_FAMILIES
                       ) -> dict[str, list[str]]:
    """Each sibling cloud folder -> the jobs of its family it holds under no file of that name."""
    missing = {}
    for family, jobs in families.items():
        for folder in sorted((root / family).iterdir()):
            if not (folder / "__init__.py").is_file():
                continue
            lacks = [j for j in jobs if not (folder / f"{j}.py").is_file()]
            if lacks:
                missing[folder.relative_to(root).as_posix()] = lacks
    return missing


def test_each_cloud_folder_names_each_job_the_same():
    """Every cloud's client folder and every mock cloud's folder holds each job of its family
    under the family's name for it (the provider, its key, its HTTP client, ...): a new cloud
    is a copy of the same shape."""
    assert cloud_jobs_missing(REPO) == {}


# ------------------------------------------------------------------------ tests mirror the source

#: test folders whose source room is still on its way, each with the work that makes it; an
#: entry whose room exists fails the test (remove it then)
TEST_ROOMS_PENDING: dict[str, str] = {}


def mirrored_rooms(root: Path) -> dict[str, Path | None]:
    """Each folder of tests/ -> the source room it mirrors: ``tplab/<name>`` or the top-level
    package ``<name>`` (``tui``), None when there is neither."""
    rooms: dict[str, Path | None] = {}
    for d in sorted((root / "tests").iterdir()):
        if not d.is_dir() or d.name.startswith((".", "_")):
            continue
        room = next((r for r in (root / "tplab" / d.name, root / d.name)
                     if d.name not in ("tests", "tplab") and (r / "__init__.py").is_file()), None)
        rooms[d.name] = room
    return rooms



def test_each_test_folder_names_a_source_room():
    rooms = mirrored_rooms(REPO)
    orphans = sorted(n for n, r in rooms.items() if r is None and n not in TEST_ROOMS_PENDING)
    assert not orphans, (f"tests/{orphans[0]} names no source room: a test folder mirrors "
                         f"tplab/<room> or tui/ (see docs/testing.md); move its tests there")
    arrived = sorted(n for n in TEST_ROOMS_PENDING if rooms.get(n) is not None)
    assert not arrived, f"the room exists now, remove from TEST_ROOMS_PENDING: {arrived}"


def test_the_mirror_rule_sees_a_folder_without_a_room(tmp_path):
    for d in ("tplab/job", "tui", "tests/job", "tests/tui", "tests/watchdog", "tests/__pycache__"):
        (tmp_path / d).mkdir(parents=True)
    for d in ("tplab", "tplab/job", "tui"):
        (tmp_path / d / "__init__.py").write_text("")
    assert mirrored_rooms(tmp_path) == {"job": tmp_path / "tplab/job", "tui": tmp_path / "tui",
                                    "watchdog": None}


# ------------------------------------------------------------------------ the lab's owners

#: what a lab is made of: the owners the ``Lab`` builds (each holds its state and its rule) and
#: the cloud; a stage of the lab is handed these, never a record that bundles them
LAB_OWNERS = frozenset({"LabConfig", "LabStream", "LabReport", "LabPod", "LabMoney",
                        "PodSession", "Provider"})
#: plain values a stage may take beside the owners (one figure, one answer, one callable)
STAGE_VALUES = frozenset({"str", "float", "int", "bool", "None", "Caps", "Quote",
                         "AmbiguousCreateError", "StopRequest", "Sequence", "Answer", "Callable"})
#: the lab's stages: modules whose functions are handed owners
STAGE_MODULES = ("preflight", "provision", "cost", "teardown", "ssh_session", "auto_pick")


def _annotation_names(node: ast.expr | None) -> set[str]:
    """The type names an annotation uses (``LabPod | None`` -> {LabPod, None})."""
    if node is None:
        return {"<none>"}
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and sub.value is None:
            names.add("None")
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            names |= _annotation_names(ast.parse(sub.value, mode="eval").body)
    return names


def context_records(lab_dir: Path, stages: tuple[str, ...] = STAGE_MODULES) -> list[str]:
    """What makes a lab's parts reach each other through a shared record instead of their owners:
    a class named as a context or a bag of facts, an import of one, a dataclass whose fields hold
    two owners or more (a context under another name), and a stage's parameter that is neither
    an owner nor a plain value."""
    found = []
    for path in sorted(lab_dir.glob("*.py")):
        tree = parse_file(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                if node.name.endswith(("Context", "Facts")):
                    found.append(f"{path.name}: class {node.name}")
                is_record = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                held = {n for item in node.body if isinstance(item, ast.AnnAssign)
                        for n in _annotation_names(item.annotation) & LAB_OWNERS}
                if is_record and len(held) >= 2:
                    found.append(f"{path.name}: record {node.name} holds {sorted(held)}")
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name.endswith(("Context", "Facts")) or (node.module or "").endswith(
                            (".context", ".facts")):
                        found.append(f"{path.name}: imports {node.module}.{alias.name}")
        if path.stem not in stages:
            continue
        functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        functions += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and m.name == "__init__"]
        for fn in functions:
            for arg in fn.args.args + fn.args.kwonlyargs:
                if arg.arg in ("self", "cls"):
                    continue
                names = _annotation_names(arg.annotation) - {"list", "dict", "tuple", "Any"}
                if arg.arg in ("ctx", "context", "facts") or not names <= LAB_OWNERS | STAGE_VALUES:
                    found.append(f"{path.name}: {fn.name}({arg.arg}: "
                                 f"{ast.unparse(arg.annotation) if arg.annotation else '?'})")
    return found


def test_the_lab_has_no_shared_context_record():
    """Each part of a lab is an owner the ``Lab`` builds and passes down (the config, the
    stream, the report, the pod, the money, the SSH session); no record that every stage reads
    and writes, under any name, and every stage's parameters are owners or plain values."""
    assert context_records(REPO / "tplab" / "lab") == []


def test_the_context_rule_sees_a_context_under_any_name(tmp_path):
    (tmp_path / "bag.py").write_text(
        "from dataclasses import dataclass\n"
        "from tplab.lab.context import LabContext\n"
        "@dataclass\nclass Everything:\n    config: LabConfig\n    stream: LabStream\n"
        "class PodFacts:\n    pass\n")
    (tmp_path / "cost.py").write_text(
        "async def tick(ctx) -> None: ...\n"
        "async def ticker(config: LabConfig, parts: 'Everything', n: int) -> None: ...\n"
        "def fine(config: LabConfig, pod: LabPod | None, why: str) -> None: ...\n")
    assert context_records(tmp_path) == [
        "bag.py: imports tplab.lab.context.LabContext",
        "bag.py: record Everything holds ['LabConfig', 'LabStream']",
        "bag.py: class PodFacts",
        "cost.py: tick(ctx: ?)",
        "cost.py: ticker(parts: 'Everything')",
    ]


def test_the_orchestrators_module_list_names_every_module_it_holds():
    """``tplab/lab/__init__.py`` is the reading order of a lab's life: it names each module of
    the package, and none that is not there."""
    import re

    doc = (REPO / "tplab" / "lab" / "__init__.py").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- ``(\w+)``", doc, re.M))
    present = {p.stem for p in (REPO / "tplab" / "lab").glob("*.py") if p.stem != "__init__"}
    assert listed == present, (f"listed but missing: {sorted(listed - present)}; present but "
                               f"not listed: {sorted(present - listed)}")


def test_the_docs_name_only_files_the_repository_holds():
    """Every path the README and docs/ name in backticks (``tplab/...``, ``tui/...``, ``tests/...``)
    is a file or folder of this repository: a renamed module leaves no stale pointer behind."""
    import re

    named = re.compile(r"`((?:tplab|tui|tests|benchmarks|scripts|assets|docs)/[\w./-]+)`")
    missing = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for path in named.findall(doc.read_text(encoding="utf-8")):
            if not (REPO / path.rstrip(".")).exists():
                missing.setdefault(doc.name, []).append(path)
    assert missing == {}, f"named but not in the repository: {missing}"


def test_every_benchmark_script_answers_help():
    """Each script in benchmarks/ is run by hand: each parses its flags (``--help`` says what
    it measures) under a ``__main__`` guard; none is a library that exits without a word."""
    import ast

    silent = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        text = ast.unparse(tree)
        guarded = any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test)
                      for n in tree.body)
        if not guarded or not ("ArgumentParser" in text or "--help" in text):
            silent.append(path.name)
    assert silent == [], f"give these a main that answers --help: {silent}"

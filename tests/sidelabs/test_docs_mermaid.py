"""The docs' mermaid blocks parse: a small syntax check (diagram type, balanced brackets and quotes,
well-formed nodes and edges, subgraph/end pairs, gantt task lines), plus the content the issue asks for."""

from __future__ import annotations

import re

import pytest

from tplab.home.paths import READING_NOTES, REPO_ROOT

DOCS = REPO_ROOT / "docs"
OWN_DOCS = [DOCS / "tp-block.md", *(READING_NOTES / n for n in ("fsdp-prefetch.md",
                                                                "megatron-tp-layers.md",
                                                                "synthesis.md"))]
TYPES = ("flowchart", "graph", "sequenceDiagram", "timeline", "gantt")
PAIRS = {"(": ")", "[": "]", "{": "}"}
# node shapes: id followed by one of these openers and its closer, label in double quotes
SHAPES = [("([", "])"), ("[[", "]]"), ("((", "))"), ("{{", "}}"), ("[(", ")]"), ("[", "]"), ("(", ")"),
          ("{", "}"), (">", "]")]
ARROW = re.compile(r"\s*(?:-->|---|-\.->|==>|--o|--x)(?:\|[^|]*\|)?\s*")
IDENT = r"[A-Za-z_][\w]*"


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)^```", text, re.S | re.M)


def _strip_quoted(line: str) -> str:
    return re.sub(r'"[^"]*"', '""', line)


def _balanced(line: str) -> bool:
    stack: list[str] = []
    for ch in _strip_quoted(line):
        if ch in PAIRS:
            stack.append(PAIRS[ch])
        elif ch in PAIRS.values() and (not stack or stack.pop() != ch):
            return False
    return not stack


def _node_ok(token: str) -> bool:
    token = token.strip()
    if re.fullmatch(IDENT, token):
        return True
    m = re.match(IDENT, token)
    if not m:
        return False
    rest = token[m.end():]
    for open_, close in SHAPES:
        if rest.startswith(open_) and rest.endswith(close):
            label = rest[len(open_):len(rest) - len(close)]
            # labels with punctuation mermaid treats as syntax must be quoted
            return bool(re.fullmatch(r'"[^"]*"', label) or re.fullmatch(r"[\w .,:+-]*", label))
    return False


def check_flowchart(lines: list[str]) -> list[str]:
    errors, depth = [], 0
    for n, raw in enumerate(lines, 2):
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        if line.startswith("subgraph "):
            depth += 1
            if not re.fullmatch(rf'subgraph {IDENT}(\["[^"]*"\])?', line):
                errors.append(f"line {n}: bad subgraph header: {line}")
            continue
        if line == "end":
            depth -= 1
            if depth < 0:
                errors.append(f"line {n}: 'end' without subgraph")
            continue
        if re.match(r"(classDef|class|style|linkStyle|direction) ", line):
            continue
        parts = ARROW.split(_keep_quotes(line))
        if any(not p.strip() for p in parts):
            errors.append(f"line {n}: dangling edge: {line}")
            continue
        for p in parts:
            if not _node_ok(p):
                errors.append(f"line {n}: bad node {p.strip()!r}")
    if depth:
        errors.append("subgraph without 'end'")
    return errors


def _keep_quotes(line: str) -> str:
    """Arrows inside quoted labels are text, not edges: hide them from the edge splitter."""
    return re.sub(r'"[^"]*"', lambda m: m.group(0).replace("-", "\u2010").replace("=", "\u2261"), line)


def check_gantt(lines: list[str]) -> list[str]:
    errors = []
    for n, raw in enumerate(lines, 2):
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        if re.match(r"(title|dateFormat|axisFormat|tickInterval|excludes|todayMarker) ", line):
            continue
        if line.startswith("section "):
            continue
        m = re.fullmatch(r"[^:]+:\s*((?:crit|done|active|milestone),\s*)*(\w+,\s*)?(\w+|after \w+),\s*\w+", line)
        if not m:
            errors.append(f"line {n}: bad gantt task: {line}")
    return errors


def check_block(block: str) -> list[str]:
    lines = block.splitlines()
    head = lines[0].strip() if lines else ""
    kind = head.split()[0] if head else ""
    if kind not in TYPES:
        return [f"unknown diagram type {head!r}"]
    if kind in ("flowchart", "graph") and not re.fullmatch(r"(flowchart|graph) (TB|TD|BT|RL|LR)", head):
        return [f"bad flowchart header {head!r}"]
    errors = [f"line {n}: unbalanced brackets: {ln.strip()}" for n, ln in enumerate(lines, 1) if not _balanced(ln)]
    errors += [f"line {n}: odd number of quotes" for n, ln in enumerate(lines, 1) if ln.count('"') % 2]
    if kind in ("flowchart", "graph"):
        errors += check_flowchart(lines[1:])
    elif kind == "gantt":
        errors += check_gantt(lines[1:])
    return errors


@pytest.mark.parametrize("path", OWN_DOCS, ids=lambda p: p.name)
def test_docs_exist_and_their_mermaid_parses(path) -> None:
    text = path.read_text()
    for block in mermaid_blocks(text):
        assert check_block(block) == [], (path.name, check_block(block))


def test_every_mermaid_block_in_docs_parses() -> None:
    for path in sorted([*DOCS.rglob("*.md"), *READING_NOTES.rglob("*.md")]):
        for block in mermaid_blocks(path.read_text()):
            assert check_block(block) == [], (path.name, check_block(block))


def test_checker_catches_broken_diagrams() -> None:
    assert check_block("flowchart LR\n  a --> b\n") == []
    assert check_block("flowchartt LR\n  a --> b\n")  # unknown type
    assert check_block("flowchart LR\n  a[\"x\" --> b\n")  # unbalanced
    assert check_block("flowchart LR\n  a --> \n")  # dangling edge
    assert check_block("flowchart LR\n  a[f(x)] --> b\n")  # unquoted parentheses in a label
    assert check_block("flowchart LR\n  subgraph S\n  a --> b\n")  # no end
    assert check_block("gantt\n  dateFormat X\n  section s\n  task one :a, 0, 2\n") == []
    assert check_block("gantt\n  dateFormat X\n  task one 0 2\n")  # no colon


def test_tp_block_diagram_marks_the_two_allreduces_and_the_layer_kinds() -> None:
    block = mermaid_blocks((DOCS / "tp-block.md").read_text())[0]
    assert block.count("ALL-REDUCE") == 2
    for needle in ("qkv", "ColumnParallelLinear", "RowParallelLinear", "GELU", "mlp.up", "mlp.down", "attn.proj"):
        assert needle in block
    # attention path: qkv (column) before proj (row) before the first all-reduce; MLP likewise
    order = [block.index(s) for s in ("qkv -->", "proj -->", "up -->", "gelu -->", "down -->")]
    assert order == sorted(order)


def test_fsdp_doc_has_a_timeline_and_megatron_notes_cite_pinned_lines() -> None:
    synthesis = (READING_NOTES / "synthesis.md").read_text()
    assert any(b.startswith(("gantt", "timeline")) for b in mermaid_blocks(synthesis))
    notes = (READING_NOTES / "megatron-tp-layers.md").read_text()
    sha = re.search(r"\b[0-9a-f]{40}\b", notes)
    assert sha, "Megatron-LM commit must be pinned"
    for topic in ("Bias after the all-reduce", "Vocabulary masking", "Master weights", "autograd Functions",
                  "Sequence parallel", "gradient_accumulation_fusion"):
        assert topic in notes
    assert len(re.findall(r"L\d+(?:-L\d+)?", notes)) >= 10

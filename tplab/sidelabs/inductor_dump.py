"""Read what Inductor generated: find its output_code.py files, cut out each kernel, pick the fused
softmax, and annotate it from its own text.

Lab 03 asks the learner to save an Inductor kernel and walk through it: which aten ops were fused,
where it reads, where it writes, how the reductions look, and what is *not* there (no buffer for
``exp(x - max)`` between kernels). This module does that reading mechanically, so the annotation in a
report is derived from the kernel that was actually generated on this machine, never written ahead.
Stdlib only: the command side uses it without importing torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_KERNEL_DEF = re.compile(r"^(?P<name>\w+) = async_compile\.(?P<kind>\w+)\(", re.M)
_TRIPLE = re.compile(r"r?'''")


@dataclass
class Kernel:
    """One generated kernel: its name, language, source and where it sits in output_code.py."""

    name: str
    language: str  # "cpp" or "triton"
    source: str
    graph: str  # the graph directory it came from (e.g. model__0_inference_0.0)
    first_line: int  # 1-based line of the kernel's source inside output_code.py
    call_args: list[str] = field(default_factory=list)  # buffers passed at the call site
    buffer_shapes: dict[str, str] = field(default_factory=dict)  # buffer -> shape it was allocated with
    aten_ops: str = ""  # the "Original ATen" provenance comment before the call, if any


@dataclass
class Finding:
    """One line of a kernel that shows a part of the fused computation."""

    role: str  # e.g. "max reduction", "exp", "store"
    line: int  # 1-based line inside the kernel's source
    code: str


def graph_dirs(debug_root: Path) -> set[Path]:
    """Every directory under ``debug_root`` holding an Inductor ``output_code.py``."""
    return {p.parent for p in Path(debug_root).rglob("output_code.py")}


def _language(kind: str, source: str) -> str:
    if kind.startswith("cpp") or "extern \"C\"" in source:
        return "cpp"
    return "triton"


def extract_kernels(output_code: str, graph: str = "") -> list[Kernel]:
    """Cut every ``name = async_compile.<kind>(... '''source''' ...)`` kernel out of output_code.py text."""
    kernels: list[Kernel] = []
    for m in _KERNEL_DEF.finditer(output_code):
        open_q = _TRIPLE.search(output_code, m.end())
        if open_q is None:
            continue
        body_start = open_q.end()
        close = output_code.find("'''", body_start)
        if close < 0:
            continue
        source = output_code[body_start:close]
        if source.startswith("\n"):
            source, body_start = source[1:], body_start + 1
        first_line = output_code.count("\n", 0, body_start) + 1
        k = Kernel(m["name"], _language(m["kind"], source), source, graph, first_line)
        _attach_call_site(k, output_code)
        kernels.append(k)
    return kernels


def _attach_call_site(k: Kernel, output_code: str) -> None:
    """Find where the wrapper calls the kernel, the buffers it passes and their allocated shapes."""
    call = re.search(rf"^\s+{re.escape(k.name)}(?:\.run)?\((?P<args>[^)]*)\)", output_code, re.M)
    if call is None:
        return
    # tensor arguments only: not sizes (``2, 600``) nor keywords (``stream=stream0``)
    k.call_args = [a.strip() for a in call["args"].split(",") if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", a)]
    before = output_code[:call.start()]
    for line in reversed(before.rstrip("\n").splitlines()):  # the comment block right above the call
        if not line.strip().startswith("#"):
            break
        prov = re.search(r"Original ATen: \[([^\]]*)\]", line)
        if prov:
            k.aten_ops = prov.group(1)
    for arg in k.call_args:
        name = arg
        for _ in range(8):  # follow reuse aliases (``buf3 = buf0; del buf0  # reuse``) to the allocation
            alloc = re.search(rf"^\s+{re.escape(name)} = empty_strided_\w+\((\([^)]*\))", before, re.M)
            if alloc:
                k.buffer_shapes[arg] = alloc.group(1)
                break
            alias = re.search(rf"^\s+{re.escape(name)} = (\w+);?.*# reuse", before, re.M)
            if alias is None:
                break
            name = alias.group(1)


def load_kernels(graph_dir: Path) -> list[Kernel]:
    """The kernels of one graph directory's output_code.py."""
    text = (Path(graph_dir) / "output_code.py").read_text()
    return extract_kernels(text, graph=Path(graph_dir).name)


def graph_aten_ops(graph_dir: Path) -> list[str]:
    """The aten ops of the graph Inductor compiled, in order (from its ``fx_graph_readable.py``)."""
    path = Path(graph_dir) / "fx_graph_readable.py"
    if not path.exists():
        return []
    return re.findall(r"torch\.ops\.aten\.(\w+)\.", path.read_text())


def find_fused_softmax(kernels: list[Kernel]) -> Kernel | None:
    """The first kernel whose name says it fuses a softmax (``cpp_fused__softmax_0``, ``triton_per_fused__softmax_0``)."""
    for k in kernels:
        if "fused" in k.name and "softmax" in k.name:
            return k
    return None


_CPP_ROLES: list[tuple[str, re.Pattern[str]]] = [
    ("max reduction", re.compile(r"maximum\(|max_propagate_nan")),
    ("subtract max", re.compile(r"=\s*tmp\d+\s*-\s*tmp\d+;")),
    ("exp", re.compile(r"\.exp\(\)|std::exp\(|\bexp\(")),
    ("sum reduction", re.compile(r"tmp_acc\d+(_vec)?\s*=\s*tmp_acc\d+(_vec)?\s*\+")),
    ("divide", re.compile(r"=\s*\(?tmp\d+\s*/\s*tmp\d+\)?;")),
    ("load", re.compile(r"loadu\((in_ptr\d+|local_buffer_data_\d+)|\bin_ptr\d+\[")),
    ("store", re.compile(r"\.store\(|\bout_ptr\d+\[[^\]]*\]\s*=")),
    ("per-thread scratch", re.compile(r"local_buffer_data_\d+\s*=")),
    ("parallel loop", re.compile(r"#pragma omp")),
]
_TRITON_ROLES: list[tuple[str, re.Pattern[str]]] = [
    ("max reduction", re.compile(r"max2\(|tl\.max\(")),
    ("subtract max", re.compile(r"=\s*\(?tmp\d+\s*-\s*tmp\d+\)?\s*$")),
    ("exp", re.compile(r"exp\(")),
    ("sum reduction", re.compile(r"tl\.sum\(|sum\(")),
    ("divide", re.compile(r"=\s*\(?tmp\d+\s*/\s*tmp\d+\)?\s*$")),
    ("load", re.compile(r"tl\.load\(")),
    ("store", re.compile(r"tl\.store\(")),
    ("parallel loop", re.compile(r"tl\.program_id\(")),
]


def anatomy(k: Kernel) -> list[Finding]:
    """Each line of the kernel that shows a role of the fused softmax, in source order."""
    roles = _CPP_ROLES if k.language == "cpp" else _TRITON_ROLES
    found: list[Finding] = []
    for i, line in enumerate(k.source.splitlines(), start=1):
        for role, pat in roles:
            if pat.search(line):
                found.append(Finding(role, i, line.strip()))
                break
    return found


def pointer_params(k: Kernel) -> dict[str, list[str]]:
    """The kernel's pointer parameters by kind: ``in`` (read), ``out`` (written), ``in_out`` (both, in place)."""
    names = sorted(set(re.findall(r"\b((?:in_out|in|out)_ptr\d+)\b", k.source)))
    return {"in": [n for n in names if n.startswith("in_ptr")],
            "out": [n for n in names if n.startswith("out_ptr")],
            "in_out": [n for n in names if n.startswith("in_out_ptr")]}


def softmax_steps_present(findings: list[Finding]) -> dict[str, bool]:
    """Which of softmax's five steps (max, subtract, exp, sum, divide) the kernel visibly performs."""
    roles = {f.role for f in findings}
    return {step: step in roles
            for step in ("max reduction", "subtract max", "exp", "sum reduction", "divide")}

"""The reading lab's notes (Megatron-LM's TP layers, PyTorch's FSDP) as the lab asks: the four files, each note <= 300 words with >= 5
cited design decisions, the Megatron SHA in its own file and the notes pinned to it, and
synthesis.md holding the two mermaid diagrams (the TP one with NVLink on its communication edges)
and the self-check answers, gradient_accumulation_fusion included, each with a line citation."""

from __future__ import annotations

import re

from tests.sidelabs.test_docs_mermaid import check_block, mermaid_blocks
from tplab.home.paths import READING_NOTES

NOTES = READING_NOTES
CITE = re.compile(r"L\d+(?:-L\d+)?")


def words(text: str) -> int:
    return len(text.split())


def test_the_reading_notes_files_exist() -> None:
    names = {p.name for p in NOTES.iterdir()}
    assert {"megatron-tp-layers.md", "fsdp-prefetch.md", "synthesis.md",
            "megatron-sha.txt"} <= names


def test_each_markdown_file_is_at_most_300_words() -> None:
    counts = {p.name: words(p.read_text()) for p in NOTES.glob("*.md")}
    assert len(counts) == 3
    assert all(0 < n <= 300 for n in counts.values()), counts
    # the counter counts: a note made longer fails
    assert words("one two  three\nfour") == 4


def test_each_note_has_five_cited_decisions_and_a_connecting_paragraph() -> None:
    for name in ("megatron-tp-layers.md", "fsdp-prefetch.md"):
        text = (NOTES / name).read_text()
        bullets = re.findall(r"^\d+\. \*\*.*?(?=^\d+\. |^## )", text, re.S | re.M)
        assert len(bullets) >= 5, name
        assert all(CITE.search(b) for b in bullets), name
        assert "## Connecting the dots" in text, name


def test_the_sha_file_pins_what_the_notes_cite() -> None:
    sha = (NOTES / "megatron-sha.txt").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{40}", sha)
    for name in ("megatron-tp-layers.md", "synthesis.md"):
        assert sha in (NOTES / name).read_text(), name


def test_synthesis_has_both_diagrams_and_nvlink_on_the_tp_edges() -> None:
    text = (NOTES / "synthesis.md").read_text()
    blocks = mermaid_blocks(text)
    assert len(blocks) == 2
    assert all(check_block(b) == [] for b in blocks)
    tp, fsdp = blocks
    assert tp.startswith("flowchart") and fsdp.startswith("gantt")
    comm_edges = [ln for ln in tp.splitlines() if "-->|" in ln]
    assert len(comm_edges) == 2 and all("NVLink ~600 GB/s" in ln for ln in comm_edges)
    assert all("ALL-REDUCE" in ln for ln in comm_edges)
    for needle in ("ColumnParallelLinear", "RowParallelLinear", "GELU", "QKV"):
        assert needle in tp


def test_self_check_answers_cite_lines() -> None:
    text = (NOTES / "synthesis.md").read_text()
    check = text.split("## Self-check", 1)[1]
    answers = re.findall(r"^\*\*(.+?)\*\*(.*?)(?=^\*\*|\Z)", check, re.S | re.M)
    questions = {q: a for q, a in answers}
    gaf = next(a for q, a in questions.items() if "gradient_accumulation_fusion" in q)
    prefetch = next(a for q, a in questions.items() if "prefetch" in q)
    assert len(CITE.findall(gaf)) >= 2 and "main_grad" in gaf
    assert len(CITE.findall(prefetch)) >= 2 and "_prefetch_handle" in prefetch

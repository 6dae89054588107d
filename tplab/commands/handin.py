"""`tplab handin DIR`: lay a finished lab and the phase's ledger out where the lab sheets name them.

Why: tplab keeps a lab's files under TPLAB_HOME/labs/<id>/ and the ledger in TPLAB_HOME, but a
student hands in ``experiments/35-tp-inference/``, ``experiments/35-cloud-budget/spend.jsonl``,
``experiments/35-cloud-budget.md`` and ``experiments/35-reading-notes/`` in their own
repository. This command copies and derives those (``tplab.handin.gather``), never overwriting a
different file without ``--force``, and lists what it wrote. Standard library only at module level.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HELP = "gather a finished lab, its spend and the reading notes into the lab sheet's experiments/ layout"
DESCRIPTION = (
    "Copy the lab the lab sheet accepts (one that completed, else an EDUCATIONAL_STUB; a real lab "
    "before a mock one; the newest of those), or --lab ID, into DIR/experiments/: "
    "35-tp-inference/ (manifest, results, scaling curve, trace.json, proof-terminated.png, a "
    "README), "
    "35-cloud-budget/spend.jsonl (the lab's ledger lines as recorded), 35-cloud-budget.md (the "
    "phase's spend table) and 35-reading-notes/; run.py (block B), src/minitrain/tensor_parallel.py "
    "and tests/minitrain/test_tensor_parallel.py (block A) made from tplab's own code; with "
    "--compile-run DIR, a `tplab compile` run as experiments/25-compile/. A different existing file "
    "is never overwritten without --force.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", metavar="DIR",
                        help="the repository to write experiments/ into")
    parser.add_argument("--lab", metavar="ID",
                        help="the lab's id (its folder name under TPLAB_HOME/labs or "
                             "TPLAB_HOME/mock/labs) or its folder; default: the newest lab the lab "
                             "sheet accepts (a STOPPED or FAILED lab is refused)")
    parser.add_argument("--compile-run", metavar="DIR", type=Path, default=None, dest="compile_dir",
                        help="also hand in a `tplab compile --out DIR` run as "
                             "experiments/25-compile/ (the compile lab's sheet: REPORT.md, kernel, "
                             "KERNEL_ANNOTATION.md, DISTRIBUTED.md and its detail, manifest)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files in DIR whose content differs")
    parser.add_argument("--list", action="store_true",
                        help="list the finished labs, newest first, each saying whether it "
                             "can be handed in")
    from tplab.commands.json_out import add_flag
    add_flag(parser)


def _lab_json(lab: Any) -> dict[str, Any]:
    return {"id": lab.lab_id, "status": lab.status, "reason": lab.reason, "mock": lab.mock,
            "path": str(lab.path)}


def main(args: argparse.Namespace) -> int:
    from tplab.handin.gather import HandinError, handin
    from tplab.viewmodel.past_labs import default_roots, find_labs
    if args.list:
        from tplab.handin.pick import why_not
        labs = [past for past in find_labs(default_roots()) if past.manifest]
        if args.json:
            from tplab.commands.json_out import emit
            emit({"labs": [{**_lab_json(past), "not_for_handin": why_not(past)}
                           for past in labs]})
            return 0
        for past in labs:
            refused = why_not(past)
            print(f"{past.lab_id}  {past.status}{'  MOCK' if past.mock else ''}  {past.path}"
                  + (f"  (not for handin: {refused})" if refused else ""))
        if not labs:
            print("no finished lab yet; `tplab run --mock` runs one on the local mock cloud.")
        return 0
    if not args.dir:
        print("tplab handin: name the repository to write into (tplab handin DIR).",
              file=sys.stderr)
        return 2
    dest = Path(args.dir).expanduser()
    if dest.exists() and not dest.is_dir():
        print(f"tplab handin: {dest} is not a folder; name the repository to write into.",
              file=sys.stderr)
        return 2
    try:
        out = handin(dest, args.lab, force=args.force, compile_dir=args.compile_dir)
    except HandinError as exc:
        print(f"tplab handin: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tplab handin: cannot write the hand-in ({exc.strerror}: {exc.filename}); "
              "nothing after it was written.", file=sys.stderr)
        return 1
    lab = out.lab
    assert lab is not None  # handin() always sets it
    if args.json:
        from tplab.commands.json_out import emit
        emit({"lab": _lab_json(lab), "why": out.why, "dest": str(dest), "written": out.written,
              "unchanged": out.unchanged, "notes": out.notes})
        return 0
    print(f"Handed in lab {lab.lab_id} ({lab.status}{', MOCK' if lab.mock else ''}), "
          f"{out.why}, into {dest}:")
    for rel in out.written:
        print(f"  wrote      {rel}")
    for rel in out.unchanged:
        print(f"  unchanged  {rel}")
    for note in out.notes:
        print(f"  note: {note}")
    return 0

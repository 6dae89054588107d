"""Which lab `tplab handin` hands in: one the lab sheet accepts, and why that one.

Why a rule: the lab sheet's stop conditions are a lab that ran (its manifest with the actual cost,
the measured latencies, the proof that the instance is gone, the curve) or, when spot under the
cap could not be had, the analysis marked EDUCATIONAL_STUB. A lab stopped by its user, one that
failed, or one that ended before it measured anything is none of those: handing it in with exit
0 would hand in the wrong lab. So the default is the best lab the lab sheet accepts, never merely the
newest, and a lab named with ``--lab`` that the lab sheet would not accept is refused in one
sentence. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from tplab.viewmodel.past_labs import PastLab, default_roots, find_labs

COMPLETE, STUB = "COMPLETE", "EDUCATIONAL_STUB"
ACCEPTED = "a lab that completed (COMPLETE), or one that could not run under the cap " \
           "(EDUCATIONAL_STUB)"


class HandinError(Exception):
    """A hand-in that cannot be made; the message is one sentence for the user."""


@dataclass(frozen=True)
class Pick:
    lab: PastLab
    why: str          # why this lab, in words ("the newest lab that completed", ...)


def why_not(lab: PastLab) -> str | None:
    """Why the lab sheet would not accept ``lab``, in a few words, or None when it would."""
    if lab.problem and not lab.manifest:
        return lab.problem
    if lab.status == COMPLETE:
        if not (lab.path / "results.json").is_file():
            return "its results.json is missing"
        return None
    if lab.status == STUB:
        return None
    reason = f": {lab.reason}" if lab.reason else ""
    return f"it ended {lab.status}{reason}"


def _rank(lab: PastLab) -> tuple[int, int]:
    """Real before mock (a mock lab is practice on this CPU), then COMPLETE before a stub."""
    return (1 if lab.mock else 0, 0 if lab.status == COMPLETE else 1)


def _kind(lab: PastLab) -> str:
    what = "completed" if lab.status == COMPLETE else "is an EDUCATIONAL_STUB"
    return f"{'mock' if lab.mock else 'real'} lab that {what}"


def _passed_over(lab: PastLab, best: PastLab) -> str:
    refused = why_not(lab)
    if refused:
        return refused
    if lab.mock and not best.mock:
        return "a mock lab; a real one comes first"
    return "an EDUCATIONAL_STUB; a lab that completed comes first"


def pick_lab(lab_id: str | None, roots: Iterable[Path] | None = None) -> Pick:
    """The lab to hand in: ``lab_id`` (an id or a folder) when the lab sheet accepts it, else the
    best one it accepts (a real lab before a mock one, COMPLETE before a stub, the newest of
    those). ``HandinError`` with one sentence when there is none."""
    roots = list(roots) if roots is not None else default_roots()
    if lab_id and Path(lab_id).expanduser().is_dir():
        labs = find_labs(extra=[Path(lab_id)])
    else:
        labs = find_labs(roots)
    finished = [lab for lab in labs if lab.manifest]
    # the labs folders, not each --out folder remembered: those were all looked in too
    where = " or ".join(str(r) for r in roots[:2]) + " (and the --out folders of past labs)"
    if lab_id:
        match = [lab for lab in finished if lab.lab_id == lab_id or str(lab.path) == lab_id
                 or Path(lab_id).expanduser().resolve() == lab.path]
        if not match:
            raise HandinError(f"no finished lab with id {lab_id!r} under {where}; `tplab handin "
                              "--list` shows the ones there are.")
        lab = match[0]
        refused = why_not(lab)
        if refused:
            raise HandinError(f"lab {lab.lab_id} cannot be handed in: {refused}; the lab sheet takes "
                              f"{ACCEPTED}. Nothing was written; `tplab handin --list` shows "
                              "the labs that can be.")
        return Pick(lab, "the lab named with --lab")
    if not finished:
        raise HandinError(f"no finished lab yet under {where}; run one first (`tplab run "
                          "--mock` runs the lab on the local mock cloud), or name its folder "
                          "with --lab DIR.")
    accepted = [lab for lab in finished if why_not(lab) is None]
    if not accepted:
        newest = finished[0]
        raise HandinError(f"no lab that can be handed in yet: the newest, {newest.lab_id}, "
                          f"cannot be because {why_not(newest)}; the lab sheet takes {ACCEPTED}: "
                          "run the lab again (`tplab run --mock` on the local mock cloud). "
                          "Nothing was written.")
    best = min(accepted, key=_rank)  # stable: the newest of the best rank
    skipped = [lab for lab in finished if lab.started and best.started
               and lab.started > best.started]
    why = f"the newest {_kind(best)}"
    if skipped:
        shown = ", ".join(f"{lab.lab_id} ({_passed_over(lab, best)})" for lab in skipped[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        why += f"; newer, passed over: {shown}{more}"
    return Pick(best, why)

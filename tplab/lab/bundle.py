"""What travels to the pod: the pod-side packages, the checkpoint and the prompts — nothing else.

Why a list of its own: the upload is the slowest stage a user waits through on a real pod, and
the pod must never receive client-side code or state (no cloud/, mock/, no TPLAB_HOME, no keys).
Only ``tplab/__init__.py`` and the ``records`` (events, results), ``stats`` and ``util`` (all
standard library only), ``tp``, ``model``
and ``job`` packages go, with the checkpoint as ``checkpoint.pt`` and the prompts as
``prompts.txt``.
"""

from __future__ import annotations

from pathlib import Path

from tplab.wire.remote import UploadItem, bundle_items as _items

POD_PACKAGES = ("records", "stats", "util", "tp", "model", "job")
PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # tplab/


def pod_code_items() -> list[UploadItem]:
    """The pod-side code alone (``tplab/...``): what a hand-in carries as the job that ran."""
    return _items(PACKAGE_ROOT, POD_PACKAGES, [])


def bundle_items(checkpoint: Path, prompts: Path) -> list[UploadItem]:
    return pod_code_items() + [UploadItem(Path(checkpoint), "checkpoint.pt"),
                               UploadItem(Path(prompts), "prompts.txt")]

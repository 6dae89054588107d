"""Where tplab keeps its state: ``TPLAB_HOME`` or the user data directory.

Tests point ``TPLAB_HOME`` at a temporary directory. Mock-mode state lives in a subdirectory of
its own so simulated spending never mixes with the real ledger.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ASSETS = REPO_ROOT / "assets"
DEFAULT_CHECKPOINT = ASSETS / "minigpt-grammar.pt"
DEFAULT_PROMPTS = ASSETS / "prompts.txt"


def tplab_home(mock: bool = False) -> Path:
    """The state directory (created if missing); ``mock=True`` gives its ``mock/`` subdirectory."""
    env = os.environ.get("TPLAB_HOME")
    if env:
        home = Path(env).expanduser()
    else:
        from platformdirs import user_data_dir  # client side only
        home = Path(user_data_dir("tplab", appauthor=False))
    if mock:
        home = home / "mock"
    home.mkdir(parents=True, exist_ok=True)
    return home


def with_source_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``: for a child interpreter that has no
    tplab installed (a mock cloud, the input check, another Python's pod side)."""
    import os

    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": str(REPO_ROOT) + (os.pathsep + rest if rest else "")}


def executable_arg(text: str) -> str:
    """A program named on the command line (``--pod-python``) as an absolute path: a relative
    one is this directory's, a bare name is found on ``PATH``. The path is not resolved (a
    virtual environment's ``python`` is a link that must keep its name), and a mock pod, which
    runs in a sandbox folder of its own, gets a path that means the same there."""
    import shutil

    if os.sep not in text and (os.altsep is None or os.altsep not in text):
        return shutil.which(text) or os.path.abspath(text)
    return os.path.abspath(os.path.expanduser(text))

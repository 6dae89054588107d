"""Where tplab keeps its state, finds what it ships, and where the user's settings live.

- state: ``TPLAB_HOME`` or the user data directory (the ledger, the labs, the mock clouds);
  mock-mode state lives in a subdirectory of its own so simulated spending never mixes with the
  real ledger. Tests point ``TPLAB_HOME`` at a temporary directory.
- what tplab ships: the files it needs at run time (the checkpoint, the prompts, the hardware
  profiles, the reading notes) are package data under ``tplab/assets/``, found through
  ``importlib.resources``: the same from a checkout, an editable install or a wheel.
- the user's settings (``budget.toml``): the user config directory (``platformdirs``), or
  ``TPLAB_HOME`` when it is set; a ``budget.toml`` left in the data directory by an older tplab
  is still read there, and said once.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

#: the folder holding the ``tplab`` package: the checkout (a source tree), or site-packages
REPO_ROOT = Path(__file__).resolve().parents[2]
#: what tplab needs at run time, shipped inside the package
ASSETS = Path(str(resources.files("tplab") / "assets"))
DEFAULT_CHECKPOINT = ASSETS / "minigpt-grammar.pt"
DEFAULT_PROMPTS = ASSETS / "prompts.txt"
HARDWARE_PROFILES = ASSETS / "hardware_profiles.json"
READING_NOTES = ASSETS / "reading-notes"
#: the user's settings file
BUDGET_FILE = "budget.toml"

_said_moved: set[Path] = set()


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


def config_dir() -> Path:
    """Where the user's settings live: ``TPLAB_HOME`` when set (one folder for everything, as
    the tests and a portable setup want), else the user config directory (not created here)."""
    env = os.environ.get("TPLAB_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_dir  # client side only
    return Path(user_config_dir("tplab", appauthor=False))


def budget_file(mock: bool = False, say: bool = True) -> Path | None:
    """The ``budget.toml`` to read, or None when there is none: in the config folder (a mock
    lab first reads ``mock/budget.toml`` there, then the real one). One that only the data folder
    has (where an older tplab kept it) is still read there, and (``say``) one line on stderr,
    once a process, says where it belongs now."""
    for sub in ("mock", "") if mock else ("",):
        new = config_dir() / sub / BUDGET_FILE
        old = tplab_home() / sub / BUDGET_FILE
        if new.exists():
            return new
        if old != new and old.exists():
            if say and old not in _said_moved:
                _said_moved.add(old)
                print(f"tplab: reading your settings from {old}; their place is now {new} "
                      "(move the file there to stop this note).", file=sys.stderr)
            return old
    return None


def _job_source_root() -> Path:
    """A folder whose only package is ``tplab`` (a checkout's root; for an installed tplab, a
    temporary folder linking to it): what another interpreter puts on its path to run the pod
    side without seeing this environment's other packages (its torch above all)."""
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT
    import atexit
    import shutil
    import tempfile

    global _LINKED
    if _LINKED is None:
        tmp = Path(tempfile.mkdtemp(prefix="tplab-source-"))
        (tmp / "tplab").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
        atexit.register(shutil.rmtree, tmp, True)
        _LINKED = tmp
    return _LINKED


_LINKED: Path | None = None


def with_source_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with tplab's source first on ``PYTHONPATH``: for a child interpreter that has no
    tplab installed (a mock cloud, the input check, another Python's pod side)."""
    rest = env.get("PYTHONPATH")
    root = str(_job_source_root())
    return {**env, "PYTHONPATH": root + (os.pathsep + rest if rest else "")}


def executable_arg(text: str) -> str:
    """A program named on the command line (``--pod-python``) as an absolute path: a relative
    one is this directory's, a bare name is found on ``PATH``. The path is not resolved (a
    virtual environment's ``python`` is a link that must keep its name), and a mock pod, which
    runs in a sandbox folder of its own, gets a path that means the same there."""
    import shutil

    if os.sep not in text and (os.altsep is None or os.altsep not in text):
        return shutil.which(text) or os.path.abspath(text)
    return os.path.abspath(os.path.expanduser(text))

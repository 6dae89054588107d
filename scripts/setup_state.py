"""What a second `scripts/setup` may skip: each check asks whether a thing setup made is still right.

    .venv/bin/python scripts/setup_state.py venv STAMP TORCH_PIN   # exit 0: nothing to install
    .venv/bin/python scripts/setup_state.py rewrite-cache          # exit 0: no collection needed

- ``venv``: the stamp setup wrote after its last install (a hash of pyproject.toml, the setup
  scripts and the Python that made .venv) is STAMP; every requirement of pyproject.toml (its
  ``test`` extra included) is installed at a version it allows; torch is TORCH_PIN; and ``tplab``
  is this checkout, installed editable. So an edited pyproject, a changed pin, another Python or a
  package removed by hand sends setup back to ``pip install``.
- ``rewrite-cache``: pytest's assertion-rewritten copy of every test module and conftest is in its
  ``__pycache__`` and still matches its source, by pytest's own check of the copy's header (the
  source's size and mtime). Any missing or stale one sends setup to collect the tests once.

Each prints the first reason it found for redoing its step. Runs under .venv's Python; standard
library plus ``packaging`` and ``pytest``, which the test extra installs.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAMP_FILE = REPO / ".venv" / ".setup-stamp"


def venv_reason(stamp: str, torch_pin: str) -> str:
    """Why .venv needs a `pip install` ("" when it does not)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return "packaging is not installed"
    if not STAMP_FILE.exists() or STAMP_FILE.read_text().strip() != stamp:
        return "pyproject.toml, the setup scripts or the Python changed since the last install"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for line in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": "test"}):
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            return f"{req.name} is not installed"
        if not req.specifier.contains(have, prereleases=True):
            return f"{req.name} {have} is installed, pyproject.toml asks for {req}"
    torch = metadata.version("torch")
    if torch.split("+")[0] != torch_pin:
        return f"torch {torch} is installed, setup pins {torch_pin}"
    import tplab

    if Path(tplab.__file__).resolve().parent != REPO / "tplab":
        return f"tplab is installed from {Path(tplab.__file__).parent}, not this checkout"
    return ""


def rewrite_cache_reason() -> str:
    """Why pytest would rewrite some test module again ("" when every cached copy is current)."""
    try:
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc
    except ImportError as exc:  # another pytest: let the collection decide
        return f"pytest's rewrite cache cannot be checked here ({exc})"
    tests = REPO / "tests"
    for source in sorted([*tests.rglob("test_*.py"), *tests.rglob("conftest.py")]):
        if "__pycache__" in source.parts:
            continue
        pyc = source.parent / "__pycache__" / (source.name[:-3] + PYC_TAIL)
        if _read_pyc(source, pyc) is None:
            return f"{source.relative_to(REPO)} has no current rewritten copy"
    return ""


def main(argv: list[str]) -> int:
    if argv[:1] == ["venv"] and len(argv) == 3:
        reason = venv_reason(argv[1], argv[2])
    elif argv == ["rewrite-cache"]:
        reason = rewrite_cache_reason()
    else:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    if reason:
        print(reason)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""tplab as a package: the wheel built from the checkout, installed into a fresh environment
that cannot see the checkout, runs the lab (`tplab local --tp 2`, from another folder, to its
end) and the dashboard's `tplab-tui --help`: what tplab needs at run time ships inside it.

What the test pays for (one test, slow, ~30 s here): a wheel build from a copy of the sources
(the current setuptools, no build isolation: no index needed), a fresh venv, and one small
`tplab local --tp 2 --json` (two ranks under torchrun). The wheel is installed alone
(``--no-index --no-deps``); its dependencies are the ones this suite's ``.venv`` already has,
seen through a folder of links that leaves out tplab itself (its editable install points at the
checkout), so nothing of the checkout can be imported. A full install of the wheel with its
dependencies from the package index (torch 2.13.0 from the local file) was run by hand once:
see docs/testing.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: what goes into the wheel: the package metadata and the two packages
SOURCES = ("pyproject.toml", "README.md", "tplab", "tui")


def _run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(cmd[:4])}...: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def _borrowed_dependencies(into: Path) -> Path:
    """A folder linking every package this environment has, except tplab's own install."""
    site = Path(sysconfig.get_paths()["purelib"])
    into.mkdir()
    for entry in site.iterdir():
        name = entry.name
        if name.startswith(("tplab", "__editable__", "tui")) or name.endswith(".pth"):
            continue
        (into / name).symlink_to(entry)
    return into


@pytest.mark.slow  # a wheel build, a venv and a two-rank lab under torchrun
def test_the_wheel_runs_the_lab_outside_the_checkout(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        item = REPO / name
        if item.is_dir():
            shutil.copytree(item, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(item, src / name)
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "--disable-pip-version-check", "-w", str(wheels), str(src)], cwd=tmp_path, timeout=180)
    (wheel,) = wheels.glob("tplab-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, timeout=120)
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path, timeout=30).stdout.strip())
    (site / "borrowed.pth").write_text(str(_borrowed_dependencies(tmp_path / "deps")) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-index",
          "--no-deps", "--disable-pip-version-check", str(wheel)], cwd=tmp_path, timeout=180)
    shutil.rmtree(src)  # nothing of the sources left but what the wheel carries

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               TPLAB_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1")
    where = _run([str(py), "-c", "import tplab, tui; print(tplab.__file__, tui.__file__)"],
                 cwd=elsewhere, timeout=60, env=env).stdout
    assert str(REPO) not in where and str(site) in where
    done = _run([str(venv / "bin" / "tplab"), "local", "--tp", "2", "--out", "lab", "--prompts",
                 "2", "--new-tokens", "8", "--no-sweep", "--sweep-d-model", "none",
                 "--profile-tokens", "2", "--json"], cwd=elsewhere, timeout=300, env=env)
    doc = json.loads(done.stdout)  # --json: one document, nothing else on stdout
    assert doc["status"] == "EDUCATIONAL_STUB" and doc["reason"] == "no cloud run", doc["errors"]
    assert doc["results"]["outputs_match"] is True and doc["errors"] == []
    lab = elsewhere / "lab"
    manifest = json.loads((lab / "manifest.json").read_text())
    assert manifest == doc["manifest"] and manifest["speedup"] > 0
    assert (lab / "scaling-curve.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(str(Path(p).relative_to(lab)) for p in doc["files"]["rank_traces"]) == [
        "traces/rank0.pt.trace.json.gz", "traces/rank1.pt.trace.json.gz",
        "traces/single/rank0.pt.trace.json.gz"]
    helped = _run([str(venv / "bin" / "tplab-tui"), "--help"], cwd=elsewhere, timeout=60,
                  env=env)
    assert "usage: tplab-tui" in helped.stdout
    scaling = _run([str(venv / "bin" / "tplab"), "scaling", "--json"], cwd=elsewhere,
                   timeout=60, env=env)
    assert json.loads(scaling.stdout)["crossover_d_model"] is not None

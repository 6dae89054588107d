"""Shared test fixtures: every test gets its own TPLAB_HOME so no state leaks between tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _tplab_home(tmp_path, monkeypatch):
    home = tmp_path / "tplab-home"
    home.mkdir()
    monkeypatch.setenv("TPLAB_HOME", str(home))
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    return home

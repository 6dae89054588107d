"""Fixtures for the dashboard's end-to-end tests against the real orchestrator and mock cloud.

Both come from tests/e2e_fixtures.py (shared with tests/lab): the shipped checkpoint when it
exists, else a randomly initialised MiniGPT of the shipped shape built from PROMPTS below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e_fixtures import lab_assets_for, mock_cloud  # noqa: F401 - shared fixture

PROMPTS = ["he goed to school", "i has eat", "she dont like apples", "they was happy"]


@pytest.fixture(scope="session")
def lab_assets(tmp_path_factory) -> tuple[Path, Path]:
    return lab_assets_for(tmp_path_factory, PROMPTS, "tui-lab-assets")

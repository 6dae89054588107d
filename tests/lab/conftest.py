"""Fixtures for the lab's end-to-end tests: a checkpoint + prompts, and the real mock cloud.

Both come from tests/e2e_fixtures.py (shared with tests/tui): the shipped checkpoint when it
exists, else a randomly initialised MiniGPT of the shipped shape built from PROMPTS below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e_fixtures import lab_assets_for, mock_cloud  # noqa: F401 - shared fixture

PROMPTS = ["he goed to school", "i has eat", "she dont like apples", "they was happy",
           "we is going home", "he have a cat", "she runned fast", "i seen it",
           "you was late", "it dont work"]


@pytest.fixture(scope="session")
def lab_assets(tmp_path_factory) -> tuple[Path, Path]:
    return lab_assets_for(tmp_path_factory, PROMPTS, "lab-assets")

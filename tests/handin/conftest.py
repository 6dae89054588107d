"""The hand-in's test runs a whole mock lab first: the lab's checkpoint + prompts fixture."""

from tests.lab.conftest import lab_assets  # noqa: F401 - shared fixture

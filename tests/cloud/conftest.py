from tests.mock.conftest import _reset_faults, cloud  # noqa: F401 - shared fixtures

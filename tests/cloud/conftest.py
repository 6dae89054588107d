from tests.mock.conftest import _reset_faults, cloud, vast  # noqa: F401 - shared fixtures

"""The commands' tests share the mock-cloud fixtures: `cloud` and `vast` (one RunPod / Vast mock
per module, faults reset after each test) from tests/mock/conftest.py and `mock_cloud` (one per
test) from tests/e2e_fixtures.py."""

from tests.e2e_fixtures import mock_cloud  # noqa: F401 - shared fixture
from tests.mock.conftest import _reset_faults, cloud, vast  # noqa: F401 - shared fixtures

"""Which mock clouds there are, by the provider's name: the registry's clouds, each with its mock.

Why: the mock process (``cli``) and its handle from Python (``handle``) serve and start any
cloud's mock the same way; what differs (the key variables, the fault switches, the server, the
port flag) each mock package says of itself in its ``__init__``. A cloud's package under
``tplab/cloud/`` names its mock (``MOCK``), so a cloud added to ``tplab.cloud.registry`` with a
mock is served with no change here. Imports nothing heavy.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tplab.cloud import registry

#: the clouds with a mock, in the registry's order
NAMES: tuple[str, ...] = tuple(registry.PROVIDERS)


def mock_package(name: str) -> ModuleType:
    """The mock package of cloud ``name`` (``tplab.mock.<name>_mock``); unknown: ValueError."""
    if name not in NAMES:
        raise ValueError(f"no mock cloud for provider {name!r}; known: {', '.join(NAMES)}")
    return importlib.import_module(str(registry.package(name).MOCK))

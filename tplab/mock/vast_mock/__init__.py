"""The mock Vast.ai cloud: Vast's REST API on 127.0.0.1, held to Vast's OpenAPI; instances are SSH servers.

Beside the RunPod mock (tplab/mock/runpod_mock), in the same process family: ``python -m tplab.mock --cloud
vast`` (or ``both``), or from Python ``tplab.mock.handle.start_mock_vast()`` /
``start_mock_cloud(provider="vast")``, which return a ``MockCloud`` whose ``api_url`` and
``api_key`` (``env()``: ``VAST_API_BASE_URL``, ``VAST_API_KEY``) point a Vast client at it.
Modules: ``server`` (HTTP, admin routes, errors in Vast's shape), ``routes`` (auth,
faults, validation, answer check) and ``handlers`` (what each route does), ``contract`` +
``openapi.json`` (Vast's document, the part the mock serves, and THE list of where the mock
departs from it: ``EXCEPTIONS``; what it refuses beyond it is in ../rejections.py), ``state``
(account, keys, instances, billing), ``answers`` (what the routes answer), ``catalog`` (machines
and search), ``faults``, ``start.sh`` (an instance's container start: sshd, then
``onstart``). The SSH side, the container process and killing an instance's processes are the
shared with the other mock clouds (``tplab.mock``: sshpod, container, procs).

This file describes the mock to ``tplab.mock.clouds`` (reached through ``tplab.cloud.registry``)
and imports nothing heavy.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

NAME = "vast"
#: the variables that point Vast's client at a cloud: its base URL, its key; the mock's own key
URL_VAR, KEY_VAR, MOCK_KEY_VAR = "VAST_API_BASE_URL", "VAST_API_KEY", "TPLAB_MOCK_VAST_API_KEY"
#: the flag of ``python -m tplab.mock`` that hands it a file of this mock's fault switches
FAULTS_FLAG = "--vast-faults"
#: the ``args`` attribute of this cloud's port when several clouds are served at once
PORT_ARG = "vast_port"
#: a higher bid can take an instance over on demand (``MockCloud.outbid``)
CAN_OUTBID = True


def new_key() -> str:
    return secrets.token_hex(32)


def faults_type() -> type[Any]:
    from tplab.mock.vast_mock.faults import VastFaults
    return VastFaults


def faults_from_args(args: argparse.Namespace) -> Any:
    faults = faults_type()
    return faults.from_file(args.vast_faults) if getattr(args, "vast_faults", None) else faults()


def server_type() -> type[Any]:
    from tplab.mock.vast_mock.server import VastMockServer
    return VastMockServer

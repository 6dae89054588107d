"""The mock RunPod cloud: RunPod's REST v2 on 127.0.0.1, held to RunPod's OpenAPI; pods are SSH
servers.

Modules: ``server`` (HTTP, per-route call counts, admin routes), ``routes`` (the v2 routes, /v1
gone) with ``contract`` + ``openapi.json`` (RunPod's document, the part the mock
serves) and ``answers`` (the answers), ``graphql_api`` + ``schema.graphql`` (balance, spot,
podTerminate), ``state`` (account, pods, billing), ``faults`` (its fault switches), ``catalog``
(GPU prices and hosts' CUDA). The SSH side, the container process and killing a pod's processes
are shared with the other mock clouds (``tplab.mock``).

This file describes the mock to ``tplab.mock.clouds`` (reached through ``tplab.cloud.registry``)
and imports nothing heavy.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

NAME = "runpod"
#: the variables that point RunPod's client at a cloud: its base URL, its key; the mock's own key
URL_VAR, KEY_VAR, MOCK_KEY_VAR = "RUNPOD_API_BASE_URL", "RUNPOD_API_KEY", "TPLAB_MOCK_API_KEY"
#: the flag of ``python -m tplab.mock`` that hands it a file of this mock's fault switches
FAULTS_FLAG = "--faults"
#: the ``args`` attribute of this cloud's port when several clouds are served at once
PORT_ARG = "port"
#: a higher bid can take an instance over on demand (``MockCloud.outbid``)
CAN_OUTBID = False


def new_key() -> str:
    return "rpa_mock_" + secrets.token_hex(20)


def faults_type() -> type[Any]:
    from tplab.mock.runpod_mock.faults import Faults
    return Faults


def faults_from_args(args: argparse.Namespace) -> Any:
    from tplab.mock.runpod_mock.faults import faults_from_args as read
    return read(args)


def server_type() -> type[Any]:
    from tplab.mock.runpod_mock.server import MockCloudServer
    return MockCloudServer

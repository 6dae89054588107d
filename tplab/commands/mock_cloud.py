"""`tplab mock-cloud`: run the local mock cloud(s) until interrupted.

The RunPod mock (tplab/mock, the default) serves RunPod's REST v2 pod, catalog and billing routes
(held to RunPod's OpenAPI document) and the GraphQL tplab still uses on 127.0.0.1; its pods are
SSH servers on loopback. ``--cloud vast`` serves the mock Vast.ai cloud instead (tplab/mock/vast_mock:
Vast's API held to its OpenAPI document), ``--cloud both`` both. Point tplab at one with
``--api-url <api_url>`` and the cloud's key variable (its package's ``KEY_VAR``, which
``tplab check`` names) set to the ``api_key`` of the JSON line it prints.
"""

from __future__ import annotations

import argparse

HELP = "run the local mock cloud (RunPod- or Vast-compatible API + SSH pods on 127.0.0.1)"
DESCRIPTION = (HELP + ". Prints one JSON line {provider, api_url, api_key, state_dir, pid} "
               "when ready (with --cloud both, also clouds: {runpod, vast}); runs until "
               "SIGTERM/Ctrl-C, then terminates every pod.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tplab.mock.cli import add_arguments as add

    add(parser)


def main(args: argparse.Namespace) -> int:
    from tplab.mock.cli import run

    return run(args)

"""The mock cloud: RunPod's REST v2 on 127.0.0.1, held to RunPod's OpenAPI; pods are SSH servers.

Mock mode swaps the cloud, not the code: the RunPod provider, the runpod SDK, SSH and SFTP all
run for real against it. Start one from Python with ``tplab.mock.handle.start_mock_cloud()``
(a subprocess; context manager), or from a shell with ``tplab mock-cloud``. Modules:
``server`` (HTTP, per-route call counts), ``routes`` (the v2 routes, /v1 gone) with ``contract``
+ ``openapi.json`` (RunPod's document, the part the mock serves) and ``answers`` (the
answers), ``graphql_api`` + ``schema.graphql`` (balance, spot, podTerminate), ``state``
(account, pods, billing), ``container`` (a pod's start script and main process), ``sshpod``
(a pod's SSH server), ``procs`` (killing a pod's processes), ``faults``, ``catalog`` (GPU
prices), ``document`` (a provider's OpenAPI document as a contract, formats enforced: shared with
the Vast mock), ``handle`` (start/stop from Python), ``cli`` (the process: ``--cloud runpod``,
``vast`` or ``both``). The mock Vast.ai cloud is the ``vast`` subpackage (see its docstring).
This package file imports nothing heavy, so ``tplab --help`` stays fast.
"""

"""The mock cloud: a RunPod-compatible API on 127.0.0.1 whose pods are SSH servers on loopback.

Mock mode swaps the cloud, not the code: the RunPod provider, the runpod SDK, SSH and SFTP all
run for real against it. Start one from Python with ``tplab.mock.handle.start_mock_cloud()``
(a subprocess; context manager), or from a shell with ``tplab mock-cloud``. Modules:
``server`` (HTTP), ``graphql_api`` + ``schema.graphql``, ``rest_api``, ``state`` (account, pods,
billing), ``sshpod`` (a pod's SSH server), ``procs`` (killing a pod's processes), ``faults``,
``catalog`` (GPU prices), ``handle`` (start/stop from Python), ``cli`` (the process).
This package file imports nothing heavy, so ``tplab --help`` stays fast.
"""

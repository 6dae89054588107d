"""The mock Vast.ai cloud: Vast's REST API on 127.0.0.1, held to Vast's OpenAPI; instances are SSH servers.

Beside the RunPod mock (tplab/mock), in the same process family: ``python -m tplab.mock --cloud
vast`` (or ``both``), or from Python ``tplab.mock.handle.start_mock_vast()`` /
``start_mock_cloud(provider="vast")``, which return a ``MockCloud`` whose ``api_url`` and
``api_key`` (``env()``: ``VAST_API_BASE_URL``, ``VAST_API_KEY``) point a Vast client at it.
Modules: ``http_server`` (HTTP, admin routes, errors in Vast's shape), ``routes`` (auth,
faults, validation, answer check) and ``handlers`` (what each route does), ``contract`` +
``vast_openapi.json`` (Vast's document, the part the mock serves, and THE list of where the mock
departs from it: ``EXCEPTIONS``; what it refuses beyond it is in ../rejections.py), ``rentals``
(account, keys, instances, billing), ``answers`` (what the routes answer), ``offers`` (machines
and search), ``fault_switches``, ``start.sh`` (an instance's container start: sshd, then
``onstart``). The SSH side, the container process and killing an instance's processes are the
RunPod mock's (sshpod, container, procs).
"""

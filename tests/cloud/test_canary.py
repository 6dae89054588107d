"""A canary API key never appears in any log, event, file or error text the provider, the mock,
`tplab check` and the pod's self-termination produce, on every call and every error path."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tplab.cloud.base import AmbiguousCreateError, ProviderError
from tplab.cloud.runpod.provider import RunPodProvider
from tplab.faces.cloud_check import gather_check
from tplab.records.self_end_word import encode
from tplab.mock.handle import start_mock_cloud
from tests.mock.helpers import GPU, new_key, spec, ssh_run

CANARY = "rpa_CANARY" + secrets.token_hex(16).upper()
REPO = Path(__file__).resolve().parents[2]


def _scan_tree(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if CANARY.encode() in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                pass
    return hits


@pytest.mark.slow  # a mock cloud and a lab
def test_canary_key_never_leaks(tmp_path, capfd, caplog):
    """What it pays for: a mock cloud of its own (the canary is its account key), a pod, the
    pod's self-termination as a process and `tplab check` as two processes, as a user runs it."""
    caplog.set_level(logging.DEBUG)
    state = tmp_path / "mockstate"
    texts: list[str] = []
    faults = {"http_500": {"podTerminate": 1, "GET /v2/pods/{id}": 1},
              "http_429": {"GET /v2/catalog/gpus": 1}, "retry_after_s": 0,
              "terminate_fail_n": 1}
    with start_mock_cloud(boot_delay_s=0.1, api_key=CANARY, state_dir=state,
                          keep_sandboxes=True, faults=faults) as cloud:
        p = RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05,
                           retry_delays=(0.01,), terminate_delays=(0.01, 0.01, 0.01))
        texts += [repr(p), repr(cloud), repr(p._rest), repr(p.quote(GPU, 2)), repr(p.balance())]
        key = new_key()
        spot = p.create(spec(key, name="tplab-canary"))
        ond = p.create(spec(key, name="tplab-canary-od", spot=False))
        ready = p.wait_ready(spot.id, 15)
        texts += [repr(spot), repr(ond), repr(ready)]
        r = ssh_run(ready.ssh.host, ready.ssh.port, key,
                    "env; cat \"$TPLAB_RP_ENV_FILE\"; echo $RUNPOD_API_KEY > seen.txt")
        texts += [r.stdout, r.stderr]
        # the pod terminates itself with its own key, through v2 (DELETE refused) and GraphQL
        cloud.set_faults(pod_key_delete_refused=True)
        r = ssh_run(ready.ssh.host, ready.ssh.port, key,
                    f"PYTHONPATH={REPO} {sys.executable} -c 'from tplab.job.self_terminate "
                    f"import *; s = SelfEnd.from_arg(\"{encode(p.self_end())}\"); "
                    "c = load_credentials(s); "
                    "SelfTerminator(c, s, which=lambda n: None).terminate(print)' > self.log 2>&1")
        texts.append(repr(p.list_pods()))
        texts.append(repr(p.actual_cost(ond.id, 10.0, time.time() - 5, time.time(), 1.38)))
        p.terminate(ond.id)  # goes through a failing terminate first
        texts.append(repr(p.verify_gone(ond.id)))
        texts.append(repr(gather_check(provider=p)))
        # error paths: each error text must be clean
        cloud.set_faults(create_500_after_create=1)
        with pytest.raises(AmbiguousCreateError) as amb:
            p.create(spec(key, name="tplab-canary-amb", spot=False))
        texts += [str(amb.value), repr(amb.value)]
        for pod in p.list_pods():
            p.terminate(pod.id)
        wrong = RunPodProvider(api_key=CANARY + "x", api_base_url=cloud.api_url,
                               retry_delays=())
        cloud.set_faults(http_429={"POST /v2/pods": 9}, retry_after_s=0)
        for call in (wrong.balance, wrong.list_pods, lambda: wrong.quote(GPU, 2),
                     lambda: p.quote("no such gpu", 1),
                     lambda: p.wait_ready("doesnotexist", 0.2),
                     lambda: p.create(spec(key, name="tplab-canary-429", spot=False)),
                     lambda: p._rest.call("creating a bad pod", "POST", "/pods",
                                          json={"name": "tplab-x", "bogus": CANARY[:6]})):
            with pytest.raises(ProviderError) as err:
                call()
            texts += [str(err.value), repr(err.value)]
        cloud.set_faults(http_429={}, spot_removed=True)
        with pytest.raises(ProviderError) as err:
            p.create(spec(key, name="tplab-canary-nospot"))
        texts += [str(err.value), repr(err.value)]
        # `tplab check` as a user runs it, with the canary as the key
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOD_")}
        env.update(PYTHONPATH=str(REPO), RUNPOD_API_KEY=CANARY)
        proc = subprocess.run([sys.executable, "-m", "tplab", "check", "--mock", "--api-url",
                               cloud.api_url, "--json"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert "\"key_source\": \"RUNPOD_API_KEY\"" in proc.stdout  # spot is off: exit 1
        texts += [proc.stdout, proc.stderr]
        env["RUNPOD_API_KEY"] = CANARY + "z"
        proc = subprocess.run([sys.executable, "-m", "tplab", "check", "--mock", "--api-url",
                               cloud.api_url], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode != 0 and "401" in proc.stdout
        texts += [proc.stdout, proc.stderr]
        os.environ.pop("RUNPOD_API_BASE_URL", None)
        stderr_tail = "\n".join(cloud._stderr_tail)
        views = cloud.pods()
    out, errout = capfd.readouterr()
    texts += [out, errout, caplog.text, stderr_tail]
    assert not [t for t in texts if CANARY in t]
    assert _scan_tree(tmp_path) == []
    assert _scan_tree(state) == [] or not state.exists()
    home = Path(os.environ["TPLAB_HOME"])
    assert _scan_tree(home) == []
    sandbox = Path(next(v for v in views if v["name"] == "tplab-canary")["sandbox"])
    log = (sandbox / "self.log").read_text() if (sandbox / "self.log").exists() else ""
    assert "trying v2 DELETE" in log or not sandbox.exists()

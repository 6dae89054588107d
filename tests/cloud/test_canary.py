"""A canary API key never appears in any log, event, file or error text the provider and mock produce."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

import pytest

from tplab.cloud.base import ProviderError
from tplab.cloud.runpod_provider import RunPodProvider
from tplab.mock.handle import start_mock_cloud
from tests.mock.helpers import new_key, spec, ssh_run

CANARY = "rpa_CANARY" + secrets.token_hex(16).upper()


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


def test_canary_key_never_leaks(tmp_path, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    state = tmp_path / "mockstate"
    texts: list[str] = []
    with start_mock_cloud(boot_delay_s=0.1, api_key=CANARY, state_dir=state,
                          keep_sandboxes=True,
                          faults={"http_500": {"podTerminate": 1}, "terminate_fail_n": 1}) as cloud:
        p = RunPodProvider(**cloud.provider_kwargs(), poll_interval_s=0.05,
                           retry_delays=(0.01,), terminate_delays=(0.01, 0.01, 0.01))
        texts.append(repr(p))
        texts.append(repr(cloud))
        key = new_key()
        info = p.create(spec(key, name="tplab-canary"))
        ready = p.wait_ready(info.id, 15)
        texts.append(repr(ready))
        r = ssh_run(ready.ssh.host, ready.ssh.port, key,
                    "env; cat \"$TPLAB_RP_ENV_FILE\"; echo $RUNPOD_API_KEY > seen.txt")
        texts += [r.stdout, r.stderr]
        texts.append(repr(p.list_pods()))
        p.terminate(info.id)  # goes through an HTTP 500 and a failing terminate first
        texts.append(repr(p.verify_gone(info.id)))
        # error paths: each error text must be clean
        for call in (lambda: RunPodProvider(api_key=CANARY + "x", api_base_url=cloud.api_url,
                                            retry_delays=()).balance(),
                     lambda: p.quote("no such gpu", 1),
                     lambda: p.wait_ready("doesnotexist", 0.2)):
            with pytest.raises(ProviderError) as err:
                call()
            texts += [str(err.value), repr(err.value)]
        os.environ.pop("RUNPOD_API_BASE_URL", None)
        stderr_tail = "\n".join(cloud._stderr_tail)
    out, errout = capfd.readouterr()
    texts += [out, errout, caplog.text, stderr_tail]
    assert not [t for t in texts if CANARY in t]
    assert _scan_tree(tmp_path) == []
    assert _scan_tree(state) == [] or not state.exists()
    home = Path(os.environ["TPLAB_HOME"])
    assert _scan_tree(home) == []

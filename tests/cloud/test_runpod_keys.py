"""RunPod's key: where tplab finds it, which source it names, and that a key once loaded is
masked in every text; the proof that a pod is gone."""

from __future__ import annotations

from tplab.cloud.runpod.api_key import find_api_key, load_api_key
from tplab.keys.redact import MASK, redact


def test_key_from_env_then_config(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[default]\napi_key = "CONFIGKEY_0123456789"\n')
    assert load_api_key({"RUNPOD_API_KEY": "ENVKEY_0123456789"}, cfg) == "ENVKEY_0123456789"
    assert load_api_key({}, cfg) == "CONFIGKEY_0123456789"
    assert redact("x CONFIGKEY_0123456789") == f"x {MASK}"  # a loaded key is registered
    assert load_api_key({}, tmp_path / "missing.toml") is None
    bad = tmp_path / "bad.toml"
    bad.write_text("not = [toml")
    assert load_api_key({}, bad) is None


def test_key_sources_include_runpodctl_and_say_which(tmp_path):
    ctl = tmp_path / "ctl.toml"
    ctl.write_text('apiKey = "CTLKEY_0123456789"\napiUrl = "https://api.runpod.io/graphql"\n')
    found = find_api_key({}, ctl)
    assert found.key == "CTLKEY_0123456789" and found.source.endswith("apiKey (runpodctl)")
    assert "CTLKEY" not in repr(found)
    both = tmp_path / "both.toml"
    both.write_text('apiKey = "CTLKEY_0123456789"\n[default]\napi_key = "SDKKEY_0123456789"\n')
    assert find_api_key({}, both).source.endswith("[default] api_key")
    assert find_api_key({"RUNPOD_API_KEY": "ENVKEY_0123456789"}, both).source == "RUNPOD_API_KEY"
    assert redact("x CTLKEY_0123456789") == f"x {MASK}"


def test_gone_proof():
    from tplab.cloud.base import GoneProof

    assert GoneProof("p", "t", {"pod": None}, listed=False).gone
    assert GoneProof("p", "t", {"pod": {"desiredStatus": "TERMINATED"}}, listed=False).gone
    assert not GoneProof("p", "t", {"pod": None}, listed=True).gone
    assert not GoneProof("p", "t", {"pod": {"desiredStatus": "RUNNING"}}, listed=False).gone
    assert GoneProof("p", "t", {"pod": {"status": "TERMINATED"}}, listed=False).gone
    assert not GoneProof("p", "t", {"pod": {"status": "EXITED"}}, listed=False).gone

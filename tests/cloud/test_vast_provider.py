"""The Vast.ai provider against a small stand-in of its REST API (tests/cloud/vastfake.py):
what it sends, and what it does with each answer. The end-to-end lab runs on the mock cloud."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import pytest

from tests.cloud.vastfake import KEY, FakeVast
from tplab.cloud.base import (INTERRUPTED, AmbiguousCreateError, AuthError, BootStep,
                              NotReadyError, PodSpec, ProviderError, RateLimitedError,
                              RentalMismatchError, SpotUnavailableError, UnknownGpuError)
from tplab.cloud.vast import shapes
from tplab.cloud.vast.api_key import find_api_key
from tplab.cloud.vast.provider import VastProvider

GPU = "NVIDIA GeForce RTX 4090"
PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests tplab"


@pytest.fixture
def fake():
    with FakeVast() as f:
        yield f


def provider(fake: FakeVast, sleeps: list | None = None) -> VastProvider:
    return VastProvider(KEY, fake.url, poll_interval_s=0.01,
                        sleep=(sleeps.append if sleeps is not None else (lambda s: None)))


def spec(**kw) -> PodSpec:
    boot = BootStep("$HOME/.tplab-guard/guard.zip", "UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==",
                    "(setsid nohup true &)")
    return PodSpec(**{"name": "tplab-lab1", "gpu_type": GPU, "gpu_count": 2,
                      "public_key": PUB, "boot": boot, **kw})


def test_quote_is_the_cheapest_bid_plus_storage_beside_on_demand(fake):
    q = provider(fake).quote(GPU, 2)
    storage = 0.15 * 20 / 720
    assert q.spot_available and q.spot_usd_per_hr == pytest.approx((0.40 + storage) * 1.02)
    assert q.on_demand_usd_per_hr == pytest.approx(0.80 + storage) and q.provider == "vast"
    sent = fake.calls("POST", "/api/v0/bundles")[0].body
    assert sent["type"] == "bid" and sent["gpu_name"] == {"in": ["RTX 4090"]}
    assert sent["num_gpus"] == {"in": [2]} and sent["direct_port_count"] == {"gte": 1}


def test_unknown_gpu_and_no_bid_are_told_apart(fake):
    with pytest.raises(UnknownGpuError, match="no offer at all for a GPU named 'B999'"):
        provider(fake).quote("NVIDIA B999", 2)
    for o in fake.offers:
        o["min_bid"] = None
    q = provider(fake).quote(GPU, 2)
    assert not q.spot_available and "no interruptible offer for 2x RTX 4090" in q.spot_note
    with pytest.raises(SpotUnavailableError, match="nothing was created"):
        provider(fake).create(spec())
    assert fake.calls("PUT", "/api/v0/asks/") == []


def test_create_bids_ssh_direct_and_attaches_the_key_to_the_instance_only(fake):
    p = provider(fake)
    info = p.create(spec(bid_usd_per_gpu_hr=1.0))
    put = fake.calls("PUT", "/api/v0/asks/")
    assert len(put) == 1 and put[0].path == "/api/v0/asks/12"     # the cheapest bid
    body = put[0].body
    assert body["runtype"] == "ssh_direct" and body["label"] == "tplab-lab1"
    assert body["price"] == pytest.approx(0.40 * 1.02 + 0.15 * 20 / 720 * 0.02, abs=1e-5)
    assert isinstance(body["env"], dict) and len(body["onstart"]) <= 4096   # Vast's limits
    assert all(len(v) <= 256 for v in body["env"].values())
    chunks = sorted(k for k in body["env"] if k.startswith(shapes.PAYLOAD_PREFIX))
    assert "".join(body["env"][k] for k in chunks) == spec().boot.payload_b64
    ssh = fake.calls("POST", f"/api/v0/instances/{info.id}/ssh")
    assert [s.body for s in ssh] == [{"ssh_key": PUB}]
    assert fake.calls("POST", "/api/v0/ssh") == []                # never the account's keys
    assert info.id and info.name == "tplab-lab1"    # as read back: its state is the boot's to poll
    info = p.status(info.id)
    assert info.state == "RUNNING" and info.ssh.host == "127.0.0.1" and info.ssh.port == 40022


def test_a_bid_that_rose_above_the_authorized_price_creates_nothing(fake):
    with pytest.raises(SpotUnavailableError, match="rose to .* above the .* the lab authorized"):
        provider(fake).create(spec(bid_usd_per_gpu_hr=0.1))
    assert fake.calls("PUT", "/api/v0/asks/") == []


def test_a_failed_bid_that_leaves_a_stopped_instance_is_destroyed_and_handed_over(fake):
    """The end call goes out at once, and the instance comes back with the error so the lab
    proves it gone before it says anything about what is left."""
    from tplab.cloud.base import LeftBehindError
    fake.create_mode = "failed_bid"
    with pytest.raises(LeftBehindError, match="left instance 9000 behind, stopped and billing "
                       "its storage; it is destroyed now") as left:
        provider(fake).create(spec())
    assert "nothing" not in str(left.value) and left.value.info.id == "9000"
    assert [s.path for s in fake.calls("DELETE", "/api/v0/instances/")] == \
        ["/api/v0/instances/9000"]
    assert fake.instances == {}


def test_429_and_5xx_are_backed_off_and_a_create_is_never_repeated(fake):
    sleeps: list = []
    fake.faults[("POST", "/api/v0/bundles")] = [
        (429, {"detail": "API requests too frequent endpoint threshold=2.0"}),
        (502, {"error": "bad gateway"})]
    q = provider(fake, sleeps).quote(GPU, 2)
    # the 429 named its endpoint's threshold: the next search waits that long (and the
    # pacer's margin for the trips); the 502 the first retry delay
    assert q.spot_available and [round(s, 2) for s in sleeps[:2]] == [2.35, 1.0]
    fake.faults[("PUT", "/api/v0/asks/")] = [(500, {"error": "server_error", "msg": "oops"})]
    with pytest.raises(AmbiguousCreateError) as err:
        provider(fake).create(spec())
    assert err.value.pod_name == "tplab-lab1" and len(fake.calls("PUT", "/api/v0/asks/")) == 1
    fake.faults[("GET", "/api/v0/users/current")] = [(429, {"detail": "too frequent"})] * 9
    with pytest.raises(RateLimitedError, match="API requests too frequent"):
        provider(fake).balance()


def test_a_refused_key_is_one_sentence_without_the_key(fake):
    with pytest.raises(AuthError) as err:
        VastProvider("wrong_key_0123456789", fake.url).quote(GPU, 2)
    assert "Vast.ai refused the API key from the key tplab was given (HTTP 404: " \
        "auth_error" in str(err.value)
    assert "wrong_key" not in str(err.value)


def test_outbid_is_an_interruption_and_exited_never_reaches_running(fake):
    p = provider(fake)
    info = p.create(spec())
    fake.instances[info.id].update(actual_status="stopped", intended_status="running",
                                   status_msg="outbid")
    got = p.status(info.id)
    assert got.state == INTERRUPTED and "paused" in got.note and "outbid" in got.note
    fake.boot_status = "exited"
    second = p.create(spec(name="tplab-lab2"))
    with pytest.raises(NotReadyError, match="went EXITED before SSH came up.*destroyed"):
        p.wait_ready(second.id, 5)
    assert second.id not in fake.instances


def test_destroy_is_idempotent_and_gone_is_verified_by_show_and_list(fake):
    p = provider(fake)
    info = p.create(spec())
    p.terminate(info.id)
    p.terminate(info.id)                       # 404: already gone
    proof = p.verify_gone(info.id)
    assert proof.gone and proof.answer == {"pod": None} and not proof.listed
    other = p.create(spec(name="tplab-lingers"))
    fake.faults[("DELETE", "/api/v0/instances/")] = [(200, {"success": True})]  # says yes ...
    p.terminate(other.id)
    assert not p.verify_gone(other.id).gone    # ... but show and list still have it


def test_spend_is_vasts_charges_never_below_price_times_window(fake):
    p = provider(fake)
    now = time.time()
    fake.charges = [{"source": "instance-77", "type": "instance", "amount": 0.02},
                    {"source": "instance-78", "type": "instance", "amount": 9.0}]
    r = p.actual_cost("77", None, now - 60, now, 1.0)          # floor: 60 s at $1/h
    assert r.source == "billing" and r.actual_usd == pytest.approx(0.02, abs=1e-6)
    assert "Vast's charges" in r.note
    r = p.actual_cost("77", None, now - 600, now, 1.0)         # charges lag: the floor
    assert r.source == "rate_x_seconds" and r.actual_usd == pytest.approx(600 / 3600, abs=1e-6)
    q = fake.calls("GET", "/api/v0/charges")[0].query
    assert set(json.loads(q["select_filters"][0])["day"]) == {"gte", "lte"}


def test_the_key_comes_from_the_environment_or_the_cli_files(tmp_path):
    assert find_api_key({"VAST_API_KEY": " k_env_0123456789 "}).source == "VAST_API_KEY"
    xdg = tmp_path / "xdg"
    (xdg / "vastai").mkdir(parents=True)
    (xdg / "vastai" / "vast_api_key").write_text("k_file_0123456789\n")
    found = find_api_key({"XDG_CONFIG_HOME": str(xdg)})
    assert found.key == "k_file_0123456789" and found.source.endswith("vastai/vast_api_key")
    assert "k_file" not in repr(found)


def test_onstart_keeps_the_instance_key_on_the_instance_and_starts_the_guard(tmp_path):
    """The on-start script, run as Vast runs it (the container's environment): the id and key
    land in a 0600 file for SSH sessions; the guard's zip is unpacked and its command runs."""
    import base64
    boot = BootStep("$HOME/.tplab-guard/guard.zip", base64.b64encode(b"ZIPDATA").decode(),
                    'echo started > "$HOME/.tplab-guard/ran"')
    body = shapes.create_body(spec(boot=boot), 0.5)
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "CONTAINER_ID": "4242",
           "CONTAINER_API_KEY": "inst_secret_key", **body["env"]}
    subprocess.run(["bash", "-c", body["onstart"]], env=env, check=True, timeout=30)
    saved = tmp_path / ".tplab-guard" / "instance.env"
    assert "export CONTAINER_ID=4242" in saved.read_text()
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert (tmp_path / ".tplab-guard" / "guard.zip").read_bytes() == b"ZIPDATA"
    assert (tmp_path / ".tplab-guard" / "ran").read_text().strip() == "started"
    assert "inst_secret_key" not in json.dumps(body)


def test_on_demand_only_when_asked_by_name_and_then_without_a_bid(fake):
    info = provider(fake).create(spec(spot=False))
    body = fake.calls("PUT", "/api/v0/asks/")[0].body
    assert "price" not in body and fake.calls("PUT", "/api/v0/asks/")[0].path == "/api/v0/asks/11"
    assert [s.body["type"] for s in fake.calls("POST", "/api/v0/bundles")] == ["ondemand"]
    assert info.spot is False


def test_an_interruptible_create_never_goes_out_without_its_bid():
    with pytest.raises(ValueError, match="rents on demand"):
        shapes.create_body(spec(spot=True), None)
    assert "price" not in shapes.create_body(spec(spot=False), None)   # --on-demand, by name


def test_which_rental_an_instance_is_comes_from_is_bid_and_its_rate():
    bid = 0.41
    assert shapes.rental_problem({"is_bid": True, "dph_base": 0.41}, bid) is None
    assert shapes.rental_problem({"is_bid": True, "dph_base": 0.30}, bid) is None  # cheaper
    assert shapes.rental_problem({"is_bid": False, "dph_base": 0.8}, bid) \
        == "rented it on demand at $0.800/h"
    assert "on demand" in shapes.rental_problem({"dph_base": 0.41}, bid)   # is_bid missing
    assert "above the bid" in shapes.rental_problem({"is_bid": True, "dph_base": 0.5}, bid)
    assert "could not be confirmed" in shapes.rental_problem({"is_bid": True}, bid)
    assert shapes.pod_info({"id": 1}).spot is False      # no is_bid: not called interruptible


def test_a_bid_rented_on_demand_is_destroyed_at_once_and_never_given_the_key(fake):
    fake.create_mode = "ondemand"
    with pytest.raises(RentalMismatchError) as err:
        provider(fake).create(spec())
    text = str(err.value)
    assert "rented it on demand at $0.800/h" in text and "verified gone" in text
    assert err.value.info.id == "9000" and err.value.info.name == "tplab-lab1"
    assert [s.path for s in fake.calls("DELETE", "/api/v0/instances/")] \
        == ["/api/v0/instances/9000"]
    assert fake.calls("POST", "/api/v0/instances/9000/ssh") == [] and fake.instances == {}


def test_the_list_is_read_through_v1_to_its_last_page(fake):
    fake.page_size = 2
    for i in range(5):
        fake.instances[str(100 + i)] = {"id": 100 + i, "label": f"tplab-{i}" if i != 2 else
                                        "someone-else", "actual_status": "running"}
    pods = provider(fake).list_pods()
    assert [p.id for p in pods] == ["100", "101", "103", "104"]
    pages = fake.calls("GET", "/api/v1/instances")
    assert [c.query.get("after_token") for c in pages] == [None, ["101"], ["103"]]
    assert not [c for c in fake.seen if c.path.rstrip("/") == "/api/v0/instances"]  # the v0 list


def test_a_list_answer_without_instances_is_an_error_not_none(fake):
    fake.faults[("GET", "/api/v1/instances")] = [
        (200, {"success": False, "error": "deprecated_endpoint", "msg": "use v1"})]
    with pytest.raises(ProviderError, match="does not read that as 'no instances'"):
        provider(fake).list_pods()


def test_ssh_falls_back_to_vasts_proxy_without_direct_ports():
    inst = {"actual_status": "running", "public_ipaddr": "", "ports": None,
            "ssh_host": "ssh5.vast.ai", "ssh_port": 12345}
    assert shapes.ssh_endpoint(inst) == shapes.SshEndpoint("ssh5.vast.ai", 12345, "root")
    direct = {**inst, "public_ipaddr": "203.0.113.7",
              "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]}}
    assert shapes.ssh_endpoint(direct) == shapes.SshEndpoint("203.0.113.7", 40022, "root")
    assert shapes.ssh_endpoint({**inst, "actual_status": "loading"}) is None

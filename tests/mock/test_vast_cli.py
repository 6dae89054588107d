"""The Vast mock under Vast's own command-line client: ``vastai`` (pyproject's ``vast-cli`` pin, in
``.venv-vastai``, made by scripts/setup) pointed at the mock with ``--url`` and ``--api-key``, for
every step of a lab's life and for what each fault looks like through it.

A mock only tplab's client accepts could hide a tplab client only the mock accepts: the CLI is
what Vast's users run and what its SDK wraps, so where it and Vast's published document
disagree the mock does what the CLI expects (tplab/mock/vast_mock/departures.py). Each call is a
process of its own bounded by a timeout, forked from one that imported the CLI once
(tests/mock/vastai_forks.py: a fresh ``vastai`` spends ~0.5 s importing before it sends its
request), with a HOME of its own (the CLI reads and writes its key file and caches there) and its
update check off; the installed ``vastai`` script itself runs once, for its version. The CLI exits 0 even when a call failed (it prints
"Failed with error ..." or, with --raw, a JSON error on stderr), so every step is also checked
for those lines.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.mock.vast_helpers import MACHINE, VASTAI, VastCLI, destroy, vastai_env

pytestmark = pytest.mark.slow

PIN = "1.9.1"
IMAGE = "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
#: what the CLI prints when a call went wrong, whatever its exit status says ("invalid" as a
#: word: "invalid return Content-Type", not the mock account's address, mock@vast.invalid)
TROUBLE = re.compile(r"(?<![.\w])invalid|Failed with error|\"error\": true|Traceback", re.I)


@pytest.fixture(scope="module")
def cli(vast, tmp_path_factory):
    """``cli(*args) -> (exit status, stdout, stderr)``: one ``vastai`` call against the mock."""
    if not VASTAI.is_file():
        pytest.fail(f"Vast's CLI is not installed at {VASTAI}: run ./scripts/setup --tests (it installs "
                    "pyproject's `vast-cli` pin into .venv-vastai)")
    home = tmp_path_factory.mktemp("vastai-home")
    env = vastai_env(home)
    # the installed entry point itself, once: it runs, and it is the pinned version
    version = subprocess.run([str(VASTAI), "--version"], env=env, capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL).stdout.strip()
    assert version == PIN, f".venv-vastai has vastai {version}, pyproject pins {PIN}"
    run = VastCLI(vast.api_url, vast.api_key, env, tmp_path_factory.mktemp("vastai-forks") / "log")
    try:
        assert run("--version")[1].strip() == PIN   # each call: the same CLI, a process of its own
        yield run
    finally:
        run.close()


def ok(result: tuple[int, str, str]) -> str:
    """The call's stdout, after checking it exited 0 and printed no trouble."""
    code, out, err = result
    assert code == 0, (code, out, err)
    assert not TROUBLE.search(out) and not TROUBLE.search(err), (out, err)
    return out


def raw(result: tuple[int, str, str]) -> Any:
    return json.loads(ok(result))


def show(cli, inst_id: int) -> dict[str, Any] | None:
    found = raw(cli("show", "instance", str(inst_id), "--raw"))
    return None if found == {"instances": None} else found


def wait_status(cli, inst_id: int, want: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    seen: list[Any] = []
    while True:
        inst = show(cli, inst_id)
        status = inst["actual_status"] if inst else None
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == want:
            assert inst is not None
            return inst
        assert time.monotonic() < deadline, f"instance {inst_id} never became {want}: {seen}"
        time.sleep(0.05)


def create(cli, label: str, *extra: str) -> dict[str, Any]:
    return raw(cli("create", "instance", str(MACHINE.ask_id), "--image", IMAGE, "--disk", "20",
                   "--ssh", "--direct", "--label", label, *extra, "--raw"))


def test_a_labs_whole_life_through_vasts_own_cli(cli, vast):
    user = raw(cli("show", "user", "--raw"))
    assert 0 < user["credit"] <= 5.0 and user["balance"] <= 0.0   # credit is what is left
    query = "num_gpus=2 gpu_name=RTX_4090 cuda_max_good>=12.4"
    search = cli("search", "offers", "--bid", query, "-o", "dph_total", "--raw")
    offers = raw(search)
    assert {(o["gpu_name"], o["num_gpus"], o["is_bid"]) for o in offers} == {("RTX 4090", 2,
                                                                            True)}
    assert offers[0]["id"] == MACHINE.ask_id and offers[0]["min_bid"] == MACHINE.min_bid
    table = ok(cli("search", "offers", "--bid", query, "-o", "dph_total"))
    assert str(MACHINE.ask_id) in table

    bid = round(MACHINE.min_bid * 1.05, 4)
    made = create(cli, "tplab-cli-life", "--bid_price", str(bid))
    assert made["success"] is True and made["instance_api_key"]
    inst_id = made["new_contract"]
    try:
        inst = wait_status(cli, inst_id, "running")
        assert inst["is_bid"] is True and inst["dph_base"] == bid
        assert inst["label"] == "tplab-cli-life" and inst["image_runtype"] == "ssh_direc ssh_proxy"
        assert inst["ports"]["22/tcp"][0]["HostPort"] == str(inst["ssh_port"])
        listed = raw(cli("show", "instances", "--raw"))
        assert [i["id"] for i in listed] == [inst_id]
        assert str(inst_id) in ok(cli("show", "instances"))
        assert ok(cli("show", "instances", "-q")).split() == [str(inst_id)]

        assert "bid price changed" in ok(cli("change", "bid", str(inst_id), "--price",
                                             str(round(bid + 0.02, 4))))
        assert show(cli, inst_id)["dph_base"] == round(bid + 0.02, 4)
        assert f"stopping instance {inst_id}" in ok(cli("stop", "instance", str(inst_id)))
        stopped = wait_status(cli, inst_id, "stopped")
        assert stopped["intended_status"] == "stopped"
        assert f"destroying instance {inst_id}" in ok(cli("destroy", "instance", str(inst_id),
                                                          "-y"))
    finally:
        destroy(vast, inst_id)
    assert show(cli, inst_id) is None
    assert raw(cli("show", "instances", "--raw")) == []
    assert "No instances found" in ok(cli("show", "instances"))
    calls = vast.calls()
    assert calls.get("GET /api/v1/instances", 0) >= 3
    assert "GET /api/v0/instances (deprecated list)" not in calls  # the CLI lists through v1


def test_without_a_price_the_cli_rents_on_demand_and_the_answer_does_not_say(cli, vast):
    made = create(cli, "tplab-cli-ondemand")
    assert made == {"success": True, "new_contract": made["new_contract"],
                    "instance_api_key": made["instance_api_key"]}
    try:
        inst = show(cli, made["new_contract"])
        assert inst["is_bid"] is False and inst["dph_base"] == MACHINE.ondemand_dph
    finally:
        destroy(vast, made["new_contract"])


def test_each_fault_as_the_cli_shows_it(cli, vast):
    # a bid below the minimum: an error answer that still names the (stopped) instance made
    failed = create(cli, "tplab-cli-lowbid", "--bid_price", str(round(MACHINE.min_bid / 2, 4)))
    assert failed["success"] is False and failed["error"] == "bid_failed"
    left = failed["new_contract"]
    try:
        inst = show(cli, left)
        assert (inst["actual_status"], inst["intended_status"]) == ("stopped", "stopped")
    finally:
        ok(cli("destroy", "instance", str(left), "-y"))
    assert show(cli, left) is None

    # outbid: stopped while it is meant to run
    made = create(cli, "tplab-cli-outbid", "--bid_price", str(MACHINE.min_bid))
    try:
        wait_status(cli, made["new_contract"], "running")
        vast.outbid(made["new_contract"])
        inst = wait_status(cli, made["new_contract"], "stopped")
        assert inst["intended_status"] == "running" and "outbid" in inst["status_msg"]
    finally:
        destroy(vast, made["new_contract"])

    # 429 per endpoint and per key, no Retry-After: the CLI's own 3 tries (0.15 s, then x1.5)
    # all land inside the interval, and it says so on stderr (exit status 0 all the same)
    vast.set_faults(rate_scale=30.0)   # Vast's own intervals x 30: the v1 list's 1 s is 30 s
    raw(cli("show", "instances", "--raw"))
    code, out, err = cli("show", "instances", "--raw")
    assert code == 0 and out == ""
    assert json.loads(err.strip().splitlines()[-1]) == {"error": True, "status_code": 429,
                                                       "msg": None}
    assert vast.state()["rateLimited"].get("GET /api/v1/instances") == 3
    raw(cli("show", "user", "--raw"))    # another endpoint, with no limit of its own
    req = urllib.request.Request(vast.api_url + "/api/v1/instances/",
                                 headers={"Authorization": f"Bearer {vast.api_key}"})
    with pytest.raises(urllib.error.HTTPError) as limited:
        urllib.request.urlopen(req, timeout=30)
    assert limited.value.code == 429 and "Retry-After" not in limited.value.headers
    assert json.loads(limited.value.read()) == {
        "detail": "API requests too frequent endpoint threshold=30"}

"""Loading the runpod SDK starts no other process: its serverless debugger asks py-cpuinfo for the
CPU's name at import, which would start a second interpreter (about 1.2 s of CPU on each lab's
first quote); tplab lends that import a stand-in and takes it back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.fresh_imports import REPO

_PROBE = """
import json, subprocess, sys
started = []
_init = subprocess.Popen.__init__
def _record(self, args, *a, **kw):
    started.append(str(args)[:120])
    return _init(self, args, *a, **kw)
subprocess.Popen.__init__ = _record
from tplab.cloud.runpod.sdk import import_runpod
runpod = import_runpod()
from runpod.serverless.utils import rp_debugger
print(json.dumps({"started": started, "cpuinfo_left": "cpuinfo" in sys.modules,
                  "processor": rp_debugger.PROCESSOR,
                  "graphql": callable(runpod.api.graphql.run_graphql_query)}))
"""


def test_importing_the_sdk_starts_no_process_and_leaves_no_stand_in():
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["started"] == []
    assert seen["cpuinfo_left"] is False  # a later `import cpuinfo` gets py-cpuinfo itself
    assert seen["processor"] and seen["processor"] != "Unable to get processor info."
    assert seen["graphql"]

"""Where the job runs: backend and device selection, process-group setup, environment capture.

NCCL when the ranks have GPUs, gloo on the CPU when there are none (said in a log event by the
caller), and a clear error when more GPU ranks are launched than GPUs are visible. The job sets
no ``NCCL_*`` variable (the lab forbids NCCL tuning: the point is to see the communication, not to
optimise it); it only records the ones it found, so a run's results say what it ran under.

Pod-side: torch and the standard library only.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from . import pod_check
from .job_error import JobError  # noqa: F401 - raised here, and imported from here by callers


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines its header


@dataclass(frozen=True, slots=True)
class Runtime:
    rank: int
    local_rank: int
    world_size: int
    backend: str
    device: torch.device
    threads: int
    fallback_reason: str  # why the CPU was chosen ("" on GPU)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise JobError(f"{name} is not set: run the job under torchrun, e.g. "
                       "`torchrun --nproc-per-node=2 -m tplab.job`.")
    try:
        return int(value)
    except ValueError:
        raise JobError(f"{name}={value!r} is not an integer.") from None


def choose(device: str, n_gpu: int, local_rank: int) -> tuple[str, torch.device, str]:
    """(backend, device, fallback reason) for ``device`` in {"auto", "cuda", "cpu"}, once
    ``pod_check`` has found that the pod can run the job (so "cuda" has its GPUs)."""
    if device == "cpu":
        return "gloo", torch.device("cpu"), "the CPU was asked for (--device cpu)"
    if n_gpu == 0:
        return "gloo", torch.device("cpu"), "no GPU is visible"
    return "nccl", torch.device("cuda", local_rank), ""


def init(device: str = "auto", threads: int = 1, timeout_s: float = 600.0) -> Runtime:
    """Join the torchrun-launched process group and pin this rank to its device."""
    rank = _env_int("RANK")
    world = _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK")
    if world < 2:
        raise JobError(f"tensor parallelism needs at least 2 ranks; got WORLD_SIZE={world} "
                       "(use --nproc-per-node=2).")
    if device not in ("auto", "cuda", "cpu"):
        raise JobError(f"--device must be auto, cuda or cpu, not {device!r}.")
    found = pod_check.facts()
    bad = pod_check.problem(found, device, world)
    if bad is not None:
        raise JobError(bad)
    backend, dev, reason = choose(device, len(found.gpus), local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout_s),
                                device_id=dev)
    else:
        torch.set_num_threads(threads)
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return Runtime(rank=rank, local_rank=local_rank, world_size=world, backend=backend,
                   device=dev, threads=torch.get_num_threads(), fallback_reason=reason)


#: how long leaving the process group may take once every rank has reached the end together
SHUTDOWN_TIMEOUT_S = 15.0


def shutdown(timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
    """Leave the process group; False when that did not return within ``timeout_s``.

    Every rank has passed a barrier before this (nothing is left to say), yet on torch 2.4 a gloo
    rank can now and then wait forever in ``destroy_process_group`` (its peer already gone): seen
    about once in tens of runs here. The wait runs on a thread of its own, so the caller can end
    the process instead of leaving a finished job, and the pod it bills, waiting for nothing.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return True
    leaving = threading.Thread(target=dist.destroy_process_group, name="tplab-pg-destroy",
                               daemon=True)
    leaving.start()
    leaving.join(timeout_s)
    return not leaving.is_alive()


def nccl_env() -> dict[str, str]:
    """The NCCL_* variables this process found (the job sets none)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


def _run(cmd: list[str], timeout_s: float = 20.0) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"<{' '.join(cmd)} failed: {exc}>"
    return _ANSI.sub("", done.stdout) if done.returncode == 0 else f"<{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}>"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def capture_env(rt: Runtime) -> dict[str, Any]:
    """What the run ran on: versions, backend, devices, NCCL variables and, on GPU, topology."""
    env: dict[str, Any] = {
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "backend": rt.backend,
        "world_size": rt.world_size,
        "device_type": rt.device.type,
        "threads_per_rank": rt.threads,
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "nccl_env": nccl_env(),
        "nccl_env_set_by_job": {},
        "fallback_reason": rt.fallback_reason,
    }
    if rt.is_cuda:
        nccl = torch.cuda.nccl.version()
        env["nccl_version"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl)
        env["cuda_version"] = torch.version.cuda
        env["device_names"] = [torch.cuda.get_device_name(i) for i in range(rt.world_size)]
        env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        if shutil.which("nvidia-smi"):
            env["nvidia_smi_topo_m"] = _run(["nvidia-smi", "topo", "-m"])
            env["nvidia_smi_topo_p2p_n"] = _run(["nvidia-smi", "topo", "-p2p", "n"])
        else:
            env["nvidia_smi_topo_m"] = env["nvidia_smi_topo_p2p_n"] = "<nvidia-smi not found>"
    else:
        env["nccl_version"] = None
        env["device_names"] = [f"cpu: {env['cpu']}"] * rt.world_size
    return env

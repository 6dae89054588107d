"""RunPod's REST v2 pod shapes and tplab's records: the create body, and a ``Pod`` as ``PodInfo``.

Why apart from the provider: these are pure functions of RunPod's documented shapes
(``CreatePodRequest``, ``Pod``, ``PodSsh``, ``PodRuntime``; see the mock's copy of the OpenAPI
document), so they can be read and tested against it without a network.

- Create: ``name``, ``image``, ``gpu {id, count, allowedCudaVersions}`` (the hosts' CUDA
  versions that run the image's CUDA, ``host_fit``; without a list from the catalog,
  ``minCudaVersion`` = the CUDA of the image's tag: either way the pod lands on a host whose
  driver runs it), ``cloud`` (SECURE), ``disk``,
  ``ports: ["22/tcp"]``, ``env`` (``PUBLIC_KEY`` + the spec's), and ``args`` only when the spec
  gives one (it replaces the image's start script, which is what starts sshd).
- SSH endpoint: ``ssh.direct`` (``host``, ``port``, ``username``), else the ``runtime.ports``
  entry with private port 22 and type tcp that has a public ip and port. Neither: not yet.
- Billing: ``/v2/billing/pods`` records summed for one pod (``billing_total``).
- Price: the pod's ``cost`` (USD per hour; RunPod shows 0 once the pod no longer bills).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from tplab.cloud import images
from tplab.cloud.base import PodInfo, PodSpec, SshEndpoint

#: the image a pod gets unless the spec names one (RunPod's official PyTorch image: /start.sh)
DEFAULT_IMAGE = images.RUNPOD_TORCH_24.name
_CUDA_IN_TAG = re.compile(r"cuda(\d+)\.(\d+)|cu(\d{2})(\d)\d?\b", re.I)
#: fields of a pod never kept in PodInfo.raw (env holds what the user passed to the pod)
_NOT_KEPT = ("env",)


def cuda_of_image(image: str) -> str | None:
    """'runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04' -> '12.4';
    'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404' -> '12.8'; None when the tag says nothing."""
    tag = image.rsplit(":", 1)[-1] if ":" in image else ""
    m = _CUDA_IN_TAG.search(tag)
    if not m:
        return None
    if m.group(1):
        return f"{int(m.group(1))}.{int(m.group(2))}"
    return f"{int(m.group(3))}.{int(m.group(4))}"


def image_of(spec: PodSpec) -> str:
    return spec.image or DEFAULT_IMAGE


def container_args(spec: PodSpec) -> str:
    """The container command: the spec's ``args``, else its boot step (unpack the guard, start it
    in the background) handing over to the image's start script, which starts sshd (on the
    mock, ``$TPLAB_MOCK_START_SH`` names the mock's); "" without either (the image's own)."""
    if spec.args or spec.boot is None:
        return spec.args
    boot = spec.boot
    d = boot.path.rsplit("/", 1)[0]
    inner = (f'mkdir -p "{d}" && echo {boot.payload_b64} | base64 -d > "{boot.path}" && '
             f'{boot.command}; exec "${{TPLAB_MOCK_START_SH:-/start.sh}}"')
    return f"bash -c '{inner}'"


def create_body(spec: PodSpec, cloud: str = "SECURE",
                allowed_cuda: list[str] | None = None) -> dict[str, Any]:
    """The ``POST /v2/pods`` body for ``spec`` (an on-demand pod: v2 has no spot);
    ``allowed_cuda``: the host CUDA versions that run the image (else its CUDA as a floor)."""
    gpu: dict[str, Any] = {"id": spec.gpu_type, "count": int(spec.gpu_count)}
    cuda = cuda_of_image(image_of(spec))
    if allowed_cuda:
        gpu["allowedCudaVersions"] = list(allowed_cuda)
    elif cuda:
        gpu["minCudaVersion"] = cuda
    body: dict[str, Any] = {
        "name": spec.name, "image": image_of(spec), "gpu": gpu, "cloud": cloud,
        "disk": int(spec.container_disk_gb), "ports": ["22/tcp"],
        "env": {"PUBLIC_KEY": spec.public_key.strip(), **spec.env},
    }
    args = container_args(spec)
    if args:
        body["args"] = args
    return body


def _float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def ssh_endpoint(pod: dict[str, Any]) -> SshEndpoint | None:
    """Where the pod's sshd is reachable, or None while 22/tcp has no public port."""
    direct = (pod.get("ssh") or {}).get("direct")
    if isinstance(direct, dict) and direct.get("host") and direct.get("port"):
        return SshEndpoint(host=str(direct["host"]), port=int(direct["port"]),
                           user=str(direct.get("username") or "root"))
    runtime = pod.get("runtime") or {}
    for port in runtime.get("ports") or []:
        if (isinstance(port, dict) and port.get("private") == 22
                and str(port.get("type") or "tcp").lower() == "tcp"
                and port.get("ip") and port.get("public")):
            return SshEndpoint(host=str(port["ip"]), port=int(port["public"]))
    return None


def pod_info(pod: dict[str, Any], spot: bool | None = None) -> PodInfo:
    """A v2 ``Pod`` as tplab's record (``spot``: what tplab asked for; v2 does not say)."""
    runtime = pod.get("runtime") or {}
    gpu = pod.get("gpu") or {}
    uptime = runtime.get("uptime")
    return PodInfo(
        id=str(pod.get("id")), name=str(pod.get("name") or ""),
        state=str(pod.get("status") or "UNKNOWN").upper(),
        gpu_type=gpu.get("id"), gpu_count=gpu.get("count"),
        usd_per_hr=_float_or_none(pod.get("cost")), spot=spot,
        ssh=ssh_endpoint(pod), uptime_s=float(uptime) if uptime is not None else None,
        raw={k: v for k, v in pod.items() if k not in _NOT_KEPT})


def billing_total(records: Iterable[dict[str, Any]], pod_id: str) -> float | None:
    """The pod's billed amount over ``records`` (None when none is the pod's)."""
    amounts = [float(r.get("totalAmount") or 0.0) for r in records
               if isinstance(r, dict) and r.get("podId") == pod_id]
    return round(sum(amounts), 8) if amounts else None

"""The mock's schema accepts exactly what the runpod SDK and tplab send, and rejects what RunPod would."""

from __future__ import annotations

import graphql
import pytest

from tplab.cloud import graphql_ops as ops
from tplab.mock.graphql_api import root_fields, schema


def _errors(query: str) -> list[str]:
    return [e.message for e in graphql.validate(schema(), graphql.parse(query))]


def test_sdk_queries_and_mutations_validate():
    from runpod.api.mutations import pods as m
    from runpod.api.queries import gpus, pods, user

    texts = [
        gpus.QUERY_GPU_TYPES, gpus.generate_gpu_query("NVIDIA GeForce RTX 4090", 2),
        pods.QUERY_POD, pods.generate_pod_query("abc"), user.QUERY_USER,
        m.generate_pod_deployment_mutation(
            "tplab-x", "img", "NVIDIA GeForce RTX 4090", gpu_count=2, volume_in_gb=0,
            container_disk_in_gb=20, min_vcpu_count=1, min_memory_in_gb=1, docker_args=None,
            ports="22/tcp", volume_mount_path="/workspace", env={"PUBLIC_KEY": "ssh-ed25519 AAA x"}),
        m.generate_pod_stop_mutation("abc"), m.generate_pod_terminate_mutation("abc"),
    ]
    for text in texts:
        assert _errors(text) == [], text


def test_tplab_operations_validate():
    texts = [
        ops.gpu_quote_query("NVIDIA GeForce RTX 4090", 2), ops.pod_query("p1"), ops.BALANCE_QUERY,
        ops.spot_create_mutation(name="tplab-a", image="img", gpu_type="NVIDIA GeForce RTX 4090",
                                 gpu_count=2, bid_per_gpu=0.35, env={"PUBLIC_KEY": "k"},
                                 container_disk_gb=20),
        ops.on_demand_create_mutation(name="tplab-a", image="img", gpu_type="G", gpu_count=1,
                                      env={"A": 'quote " and \\ and\nnewline'},
                                      container_disk_gb=20),
    ]
    for text in texts:
        assert _errors(text) == [], text


@pytest.mark.parametrize("query, needle", [
    ("query { myself { id bogusField } }", "bogusField"),
    ("query { pod(input: {}) { id } }", "podId"),
    ("query { gpuTypes { lowestPrice { minimumBidPrice } } }", None),
    ("query { pod(input: {podId: \"x\"}) { runtime } }", "runtime"),
    ("mutation { podRentInterruptable(input: {gpuCount: 1}) { id } }", "bidPerGpu"),
    ("mutation { podTerminate(input: {podId: \"x\"}) { id } }", "podTerminate"),
])
def test_rejects_what_runpod_rejects(query, needle):
    errors = _errors(query)
    if needle is None:
        assert errors == []
    else:
        assert errors and any(needle in e for e in errors), errors


def test_gql_str_cannot_break_out_of_its_literal():
    evil = '") { id } } mutation { podTerminate(input: {podId: "victim"}) }#'
    doc = graphql.parse(ops.pod_query(evil))
    assert root_fields(doc) == ["pod"]
    arg = doc.definitions[0].selection_set.selections[0].arguments[0]
    assert arg.value.fields[0].value.value == evil

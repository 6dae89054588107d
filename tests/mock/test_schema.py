"""The mock's contracts: RunPod's OpenAPI document (REST v2) and the GraphQL subset tplab still uses."""

from __future__ import annotations

import json
from pathlib import Path

import graphql
import pytest

from tplab.cloud.runpod import graphql_ops as ops
from tplab.mock.runpod_mock import contract
from tplab.mock.runpod_mock.graphql_api import root_fields, schema

REPO = Path(__file__).resolve().parents[2]
#: shared/ sits beside the checkout (CI) or two levels up (a worktree under wt/)
#: RunPod's whole published document (tests/mock/documents/README.md says where it is from)
REFERENCE = Path(__file__).resolve().parent / "documents" / "runpod-rest-v2-openapi.json"


def _errors(query: str, spot_removed: bool = False) -> list[str]:
    return [e.message for e in graphql.validate(schema(spot_removed), graphql.parse(query))]


# ---- OpenAPI ---------------------------------------------------------------------------------
def test_shipped_document_is_runpods_own_cut_to_our_routes():
    full = json.loads(REFERENCE.read_text())
    assert contract.extract_subset(full) == contract.document()
    assert "runpod/docs" in contract.document()["x-tplab-source"]
    assert set(contract.document()["paths"]) == set(contract.ROUTES)


def test_create_body_is_held_to_the_document():
    good = {"name": "tplab-x", "image": "img", "gpu": {"id": "g", "count": 2,
                                                       "minCudaVersion": "12.4"},
            "cloud": "SECURE", "disk": 20, "ports": ["22/tcp"], "env": {"PUBLIC_KEY": "k"},
            "args": "exec /start.sh"}
    contract.check_request_body("/v2/pods", "post", good)
    for bad, needle in (({**good, "interruptible": True}, "interruptible"),
                        ({**good, "gpu": {"id": "g", "bidPerGpu": 0.3}}, "bidPerGpu"),
                        ({**good, "cloud": "SPOT"}, "SPOT"),
                        ({**good, "gpu": {"id": "g", "minCudaVersion": "12"}}, "12"),
                        ({k: v for k, v in good.items() if k != "name"}, "name")):
        with pytest.raises(contract.SchemaViolation) as err:
            contract.check_request_body("/v2/pods", "post", bad)
        assert any(needle in e for e in err.value.errors), err.value.errors


def test_answers_are_held_to_the_document():
    with pytest.raises(contract.SchemaViolation, match="required"):
        contract.check_response("/v2/pods/{id}", "get", 200, {"id": "x"})
    assert contract.check_response("/v2/pods/{id}", "delete", 204, None) == ""
    with pytest.raises(contract.SchemaViolation, match="no body"):
        contract.check_response("/v2/pods/{id}", "delete", 204, {"x": 1})
    assert contract.check_response("/v2/pods", "post", 400, {
        "title": "Bad Request", "status": 400, "detail": "x"}) == "application/problem+json"


def test_query_parameters_are_typed_and_unknown_ones_refused():
    q = contract.check_query("/v2/catalog/gpus", "get", {"include": "AVAILABILITY",
                                                        "product": "POD", "count": "2"})
    assert q == {"include": ["AVAILABILITY"], "product": ["POD"], "count": 2}
    with pytest.raises(contract.SchemaViolation, match="unknown query parameter 'gpuId'"):
        contract.check_query("/v2/catalog/gpus", "get", {"gpuId": "x"})
    with pytest.raises(contract.SchemaViolation, match="count"):
        contract.check_query("/v2/catalog/gpus", "get", {"count": "0"})


# ---- GraphQL ---------------------------------------------------------------------------------
def test_tplab_operations_validate():
    texts = [
        ops.spot_quote_query("NVIDIA GeForce RTX 4090", 2), ops.BALANCE_QUERY,
        ops.MUTATIONS_QUERY,
        ops.spot_create_mutation(name="tplab-a", image="img", gpu_type="NVIDIA GeForce RTX 4090",
                                 gpu_count=2, bid="0.35", env={"A": 'quote " and \\ and\nnewline'},
                                 container_disk_gb=20, args="exec /start.sh"),
        'mutation { podTerminate(input: {podId: "abc"}) }',
    ]
    for text in texts:
        assert _errors(text) == [], text


def test_spot_removed_schema_answers_the_mutation_as_unknown():
    mutation = ops.spot_create_mutation(name="tplab-a", image="img", gpu_type="G", gpu_count=1,
                                        bid="0.35", env={}, container_disk_gb=20)
    errors = _errors(mutation, spot_removed=True)
    assert errors and "Cannot query field 'podRentInterruptable'" in errors[0]
    assert _errors(ops.BALANCE_QUERY, spot_removed=True) == []


@pytest.mark.parametrize("query, needle", [
    ("query { myself { id bogusField } }", "bogusField"),
    ("query { pod(input: {podId: \"x\"}) { id } }", "pod"),      # pods are REST v2 now
    ("mutation { podFindAndDeployOnDemand(input: {gpuCount: 1}) { id } }", "podFind"),
    ("mutation { podRentInterruptable(input: {gpuCount: 1}) { id } }", "bidPerGpu"),
    ("mutation { podTerminate(input: {podId: \"x\"}) { id } }", "podTerminate"),
])
def test_rejects_what_runpod_rejects(query, needle):
    errors = _errors(query)
    assert errors and any(needle in e for e in errors), errors


def test_gql_str_cannot_break_out_of_its_literal():
    evil = '") { id } } mutation { podTerminate(input: {podId: "victim"}) }#'
    doc = graphql.parse(ops.spot_quote_query(evil, 1))
    assert root_fields(doc) == ["gpuTypes"]


@pytest.mark.parametrize("bid, minimum", [(0.35, 0.35), (0.1234567, 0.1234567),
                                          (0.3, 0.33), (1 / 3, 1 / 3), (0.0000001, 0.0000004)])
def test_bid_never_falls_below_the_minimum_by_rounding(bid, minimum):
    literal = ops.bid_literal(bid, minimum)
    assert float(literal) >= minimum and float(literal) >= min(bid, minimum)
    assert len(literal.split(".")[-1]) <= 6

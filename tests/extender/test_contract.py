"""The captured kube-scheduler bodies, POSTed over real HTTP to a running uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.policy import default_policy
from tests.extender.nodes import (
    as_daemonset_pod,
    cool,
    fixture,
    fixture_names,
    hot_cpu,
    with_annotations,
)
from tests.support import http_client
from tests.support.asgi_server import serve


@pytest.fixture
def full_mode_url() -> Iterator[str]:
    with serve(ExtenderApp(Extender(default_policy()))) as url:
        yield url


@pytest.fixture
def seeded_url() -> Iterator[str]:
    """An extender whose table knows n1..n3 (n2 hot), as a synced node cache would."""
    extender = Extender(default_policy(), mode="test")
    extender.table.upsert("n1", cool())
    extender.table.upsert("n2", hot_cpu())
    extender.table.upsert("n3", {})
    with serve(ExtenderApp(extender)) as url:
        yield url


def post(url: str, verb: str, body: dict[str, Any]) -> httpx.Response:
    return http_client.post(f"{url}/{verb}", json=body, timeout=5)


def verb_of(name: str) -> str:
    return name.split("-", 1)[0]


@pytest.mark.parametrize("name", fixture_names())
def test_every_captured_body_is_accepted(name: str, full_mode_url: str, seeded_url: str) -> None:
    for url in (full_mode_url, seeded_url):
        response = post(url, verb_of(name), fixture(name))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("name", ["filter-fullnodes.json", "filter-fullnodes-replicaset-pod.json"])
def test_full_nodes_filter_returns_the_passing_node_objects_unchanged(
    name: str, full_mode_url: str
) -> None:
    body = with_annotations(fixture(name), {"n1": cool(), "n2": hot_cpu()})
    answer = post(full_mode_url, "filter", body).json()
    by_name = {n["metadata"]["name"]: n for n in body["Nodes"]["items"]}
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n1", "n3"]
    assert answer["Nodes"]["items"] == [by_name["n1"], by_name["n3"]]
    assert answer["NodeNames"] is None
    assert answer["FailedNodes"] == {}
    assert answer["FailedAndUnresolvableNodes"] == {
        "n2": "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    }
    assert answer["Error"] == ""


def test_full_nodes_prioritize_scores_each_node_in_range(full_mode_url: str) -> None:
    body = with_annotations(fixture("prioritize-fullnodes.json"), {"n1": cool(), "n2": hot_cpu()})
    answer = post(full_mode_url, "prioritize", body).json()
    scores = {item["Host"]: item["Score"] for item in answer}
    assert set(scores) == {"n1", "n2", "n3"}
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())
    assert scores["n1"] > scores["n2"]  # cooler node scores higher
    assert scores["n1"] > scores["n3"]  # a node without data never beats fresh data


def test_node_cache_filter_answers_with_names_from_the_input(seeded_url: str) -> None:
    answer = post(seeded_url, "filter", fixture("filter-nodecache.json")).json()
    assert answer["NodeNames"] == ["n1", "n3"]
    assert answer["FailedAndUnresolvableNodes"] == {
        "n2": "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    }
    assert answer["FailedNodes"] == {}
    assert answer["Error"] == ""
    assert "Nodes" not in answer or answer["Nodes"] is None


def test_node_cache_prioritize_keeps_input_order(seeded_url: str) -> None:
    answer = post(seeded_url, "prioritize", fixture("prioritize-nodecache.json")).json()
    assert [item["Host"] for item in answer] == ["n1", "n3", "n2"]


def test_daemonset_pods_pass_every_node(seeded_url: str, full_mode_url: str) -> None:
    answer = post(seeded_url, "filter", as_daemonset_pod(fixture("filter-nodecache.json"))).json()
    assert answer["NodeNames"] == ["n1", "n3", "n2"]
    assert answer["FailedAndUnresolvableNodes"] == {}
    body = with_annotations(fixture("filter-fullnodes.json"), {"n2": hot_cpu()})
    answer = post(full_mode_url, "filter", as_daemonset_pod(body)).json()
    assert len(answer["Nodes"]["items"]) == 3


def test_reasons_group_across_nodes(full_mode_url: str) -> None:
    body = with_annotations(
        fixture("filter-fullnodes.json"), {n: hot_cpu() for n in ("n1", "n2", "n3")}
    )
    answer = post(full_mode_url, "filter", body).json()
    assert answer["Nodes"]["items"] == []  # an empty list, never null: null would mean "all out"
    assert len(set(answer["FailedAndUnresolvableNodes"].values())) == 1


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_a_verb_with_another_method_is_405_naming_post(
    verb: str, method: str, full_mode_url: str
) -> None:
    response = http_client.request(method, f"{full_mode_url}/{verb}", timeout=5)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json() == {"error": f"{verb}: method {method} not allowed, use POST"}

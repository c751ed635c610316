"""The extender in node-cache mode against the fake API server, through lightkube."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.policy import default_policy
from tests.extender.nodes import cool, fixture, hot_cpu
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.fakekube_fixtures import FakeKube


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


@pytest.fixture
def extender_url(fake_kube: FakeKube) -> Iterator[str]:
    fake_kube.store.add_node("n1", annotations=cool(), internal_ip="10.0.0.1")
    fake_kube.store.add_node("n2", annotations=hot_cpu(), internal_ip="10.0.0.2")
    fake_kube.store.add_node("n3", internal_ip="10.0.0.3")
    cache = NodeCache(client_for_server(fake_kube.url), retry_delay_s=0.05)
    with serve(ExtenderApp(Extender(default_policy(), node_cache=cache))) as url:
        wait_for(lambda: http_client.get(f"{url}/readyz").status_code == 200)
        yield url


def filter_names(url: str, body: dict[str, Any] | None = None) -> Any:
    answer = http_client.post(f"{url}/filter", json=body or fixture("filter-nodecache.json")).json()
    return answer


def test_captured_node_cache_bodies_are_filtered_by_watched_annotations(extender_url: str) -> None:
    answer = filter_names(extender_url)
    assert answer["NodeNames"] == ["n1", "n3"]
    assert list(answer["FailedAndUnresolvableNodes"]) == ["n2"]
    scores = http_client.post(
        f"{extender_url}/prioritize", json=fixture("prioritize-nodecache.json")
    )
    assert [s["Host"] for s in scores.json()] == ["n1", "n3", "n2"]


def test_annotation_patch_reaches_the_verdict_through_the_watch(
    extender_url: str, fake_kube: FakeKube
) -> None:
    fake_kube.client().patch(
        Node, "n1", {"metadata": {"annotations": hot_cpu()}}, patch_type=PatchType.MERGE
    )
    wait_for(lambda: "n1" in filter_names(extender_url)["FailedAndUnresolvableNodes"])


def test_deleted_node_leaves_the_table(extender_url: str, fake_kube: FakeKube) -> None:
    fake_kube.client().delete(Node, "n2")
    wait_for(lambda: http_client.get(f"{extender_url}/debug/nodes/n2").status_code == 404)
    # kube-scheduler may still name it: an unknown node passes.
    assert "n2" in filter_names(extender_url)["NodeNames"]


def test_expired_watch_relists_and_catches_up(extender_url: str, fake_kube: FakeKube) -> None:
    fake_kube.store.compact()
    fake_kube.store.close_watches()
    fake_kube.client().patch(
        Node, "n3", {"metadata": {"annotations": hot_cpu()}}, patch_type=PatchType.MERGE
    )
    wait_for(lambda: "n3" in filter_names(extender_url)["FailedAndUnresolvableNodes"])
    assert len(fake_kube.requests("GET", "/api/v1/nodes")) >= 2  # listed again


def test_readyz_waits_for_the_first_node_list(fake_kube: FakeKube) -> None:
    fake_kube.fail_next("GET", "/api/v1/nodes", 503, times=3)
    cache = NodeCache(client_for_server(fake_kube.url), retry_delay_s=0.3)
    with serve(ExtenderApp(Extender(default_policy(), node_cache=cache))) as url:
        first = http_client.get(f"{url}/readyz")
        assert first.status_code == 503
        assert "node cache" in first.json()["not_ready_because"]
        # Scheduling is never blocked meanwhile: unknown nodes pass.
        assert filter_names(url)["NodeNames"] == ["n1", "n3", "n2"]
        wait_for(lambda: http_client.get(f"{url}/readyz").status_code == 200)


def test_debug_nodes_shows_values_ages_and_verdicts(extender_url: str) -> None:
    view = http_client.get(f"{extender_url}/debug/nodes/n2").json()
    assert view["verdict"] == "overloaded"
    assert view["reasons"][0]["usage"] == 0.9
    metric = view["metrics"]["cpu_usage_avg_5m"]
    assert metric["freshness"] == "fresh"
    assert 25 <= metric["age_seconds"] <= 120
    listing = http_client.get(f"{extender_url}/debug/nodes").json()
    assert [n["name"] for n in listing["nodes"]] == ["n1", "n2", "n3"]
    assert listing["mode"] == "node-cache"
    missing = http_client.get(f"{extender_url}/debug/nodes/nope")
    assert missing.status_code == 404
    assert "not known" in missing.json()["error"]


def test_metrics_expose_requests_rejections_and_cache_age(extender_url: str) -> None:
    filter_names(extender_url)
    text = http_client.get(f"{extender_url}/metrics").text
    assert 'loadaware_extender_requests_total{code="200",verb="filter"} 1.0' in text
    assert 'loadaware_extender_nodes_rejected_total{metric="cpu_usage_avg_5m"} 1.0' in text
    assert "loadaware_extender_node_cache_age_seconds" in text
    assert "loadaware_extender_nodes 3.0" in text

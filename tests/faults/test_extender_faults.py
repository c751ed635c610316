"""Extender faults through its real HTTP path: a (re)start before the node cache has
synced, an API server that goes away and comes back, and clock skew between the
annotator that stamped a value and the extender that reads it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache, scheduled_pod
from app.load.model import MAX_FUTURE_SKEW_S
from app.load.samples import format_usage
from app.policy import default_policy
from tests.extender.nodes import cool, fixture, hot_cpu
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.fakekube import FakeKubeServer
from tests.support.fakekube_fixtures import FakeKube

TIMEOUT_S = 10.0


def wait_for(condition: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


SKEWED = "cpu_usage_avg_5m"


def hot_stamped(at_s: float) -> dict[str, str]:
    """Cool, fresh annotations but for one hot CPU value stamped at ``at_s``."""
    return {**cool(), SKEWED: format_usage(0.9, at_s)}


def filtered(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = http_client.post(
        f"{url}/filter", json=fixture("filter-nodecache.json")
    ).json()
    return answer


def readyz(url: str) -> httpx.Response:
    return http_client.get(f"{url}/readyz")


@pytest.fixture
def cluster(fake_kube: FakeKube) -> FakeKube:
    fake_kube.store.add_node("n1", annotations=cool(), internal_ip="10.0.0.1")
    fake_kube.store.add_node("n2", annotations=hot_cpu(), internal_ip="10.0.0.2")
    fake_kube.store.add_node("n3", internal_ip="10.0.0.3")
    return fake_kube


def extender(fake_kube: FakeKube, *, outage_grace_s: float = 60.0) -> ExtenderApp:
    cache = NodeCache(client_for_server(fake_kube.url), retry_delay_s=0.05,
                      max_retry_delay_s=0.05)
    cache.outage_grace_s = outage_grace_s
    return ExtenderApp(Extender(default_policy(), node_cache=cache))


def test_a_restarted_extender_is_not_ready_and_fails_open_until_its_node_cache_syncs(
    cluster: FakeKube,
) -> None:
    cluster.fail_next("GET", "/api/v1/nodes", 500, times=1_000_000)  # the list keeps failing
    with serve(extender(cluster)) as url:
        wait_for(lambda: "500" in readyz(url).json()["not_ready_because"])
        answer = readyz(url)
        assert answer.status_code == 503
        assert "node cache has not synced" in answer.json()["not_ready_because"]
        # Until then every node is unknown: the filter passes them all, never blocks.
        assert filtered(url)["NodeNames"] == ["n1", "n3", "n2"]
        cluster.faults.clear()
        wait_for(lambda: readyz(url).status_code == 200)
        assert list(filtered(url)["FailedAndUnresolvableNodes"]) == ["n2"]


def test_with_estimation_the_extender_is_not_ready_until_its_pod_cache_syncs(
    cluster: FakeKube,
) -> None:
    cluster.fail_next("GET", "/api/v1/pods", 500, times=1_000_000)  # pods cannot be listed
    client = client_for_server(cluster.url)
    app = ExtenderApp(
        Extender(
            default_policy(),
            node_cache=NodeCache(client, retry_delay_s=0.05, max_retry_delay_s=0.05),
            pod_cache=PodCache(client, scheduled_pod, retry_delay_s=0.05, max_retry_delay_s=0.05),
        )
    )
    with serve(app) as url:
        wait_for(lambda: "pod cache" in (readyz(url).json()["not_ready_because"] or ""))
        assert readyz(url).status_code == 503
        cluster.faults.clear()
        wait_for(lambda: readyz(url).status_code == 200)


def test_readyz_turns_503_while_the_api_server_is_away_and_200_when_it_is_back(
    cluster: FakeKube,
) -> None:
    with serve(extender(cluster, outage_grace_s=0.2)) as url:
        wait_for(lambda: readyz(url).status_code == 200)
        port = int(cluster.url.rsplit(":", 1)[1])
        cluster.server.stop()
        wait_for(lambda: readyz(url).status_code == 503)
        assert "has not reached the API server" in readyz(url).json()["not_ready_because"]
        # The cached verdicts keep being served meanwhile: still a correct answer.
        assert list(filtered(url)["FailedAndUnresolvableNodes"]) == ["n2"]
        successor = FakeKubeServer(cluster.store)
        successor.start(port=port)
        cluster.server = successor
        wait_for(lambda: readyz(url).status_code == 200)


@pytest.mark.parametrize(
    ("case", "stamp_offset_s", "rejected"),
    [
        ("just inside the future skew allowance", MAX_FUTURE_SKEW_S - 10, True),
        ("from further in the future than the allowance", MAX_FUTURE_SKEW_S + 60, False),
        ("fresh, just inside the window", "window-10", True),
        ("just past its freshness window", "window+10", False),
    ],
)
def test_clock_skew_hot_annotations_filter_only_while_trusted_and_fresh(
    fake_kube: FakeKube, case: str, stamp_offset_s: float | str, rejected: bool
) -> None:
    window_s = default_policy().freshness_window_s(SKEWED)
    assert window_s is not None
    if isinstance(stamp_offset_s, str):
        offset_s = window_s - 10 if stamp_offset_s == "window-10" else window_s + 10
        at_s = time.time() - offset_s  # stamped in the past by a slow clock
    else:
        at_s = time.time() + stamp_offset_s  # stamped by a clock running ahead
    fake_kube.store.add_node("n1", annotations=cool(), internal_ip="10.0.0.1")
    fake_kube.store.add_node("n2", annotations=hot_stamped(at_s), internal_ip="10.0.0.2")
    fake_kube.store.add_node("n3", internal_ip="10.0.0.3")
    with serve(extender(fake_kube)) as url:
        wait_for(lambda: readyz(url).status_code == 200)
        answer = filtered(url)
    assert ("n2" in answer["FailedAndUnresolvableNodes"]) is rejected, case
    assert ("n2" in answer["NodeNames"]) is not rejected, case

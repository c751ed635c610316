"""Attacks 1 and 2 of docs/security.md, over real HTTP against a cache-mode extender.

A caller that reaches the extender's port must not be able to change how the real nodes
are judged (attack 1: Node objects in a request) nor hold load on them for pods that do
not exist (attack 2: reservations). The caches here watch the fake API server.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.extender import reservations, verbs
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.extender.verbs import RequestNodes
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache, scheduled_pod
from app.objects.pods import ScheduledPod
from app.policy import default_policy
from tests.extender.nodes import cool, hot_cpu, usage_annotations
from tests.extender.test_node_cache_mode import wait_for
from tests.support import http_client
from tests.support.asgi_server import serve
from tests.support.fakekube import PODS
from tests.support.fakekube_fixtures import FakeKube

REAL_NODES = ("node-a", "node-b")
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110"}
# A node at 0.45 CPU: one pod with a 4-CPU limit (0.425 of it) takes it over 0.65.
WARM = 0.45


def pod_body(
    name: str, uid: str, cpu_limit: str = "4", cpu_request: str = "100m"
) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu_request}, "limits": {"cpu": cpu_limit}}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "app", "resources": resources}]},
        "status": {"phase": "Pending"},
    }


def node_object(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations}}


class Clock:
    """Wall-clock time, moved ahead by hand to end a grace without waiting for it."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead_s


CLOCK = Clock()


@pytest.fixture
def extender(fake_kube: FakeKube) -> Iterator[tuple[Extender, str]]:
    """A cache-mode extender with its node and pod caches synced on two real nodes."""
    for name in REAL_NODES:
        fake_kube.store.add_node(
            name, annotations=usage_annotations(WARM, 0.3), allocatable=ALLOCATABLE
        )
    client = client_for_server(fake_kube.url)
    pod_cache: PodCache[ScheduledPod] = PodCache(client, scheduled_pod, retry_delay_s=0.05)
    CLOCK.ahead_s = 0.0
    instance = Extender(
        default_policy(),
        node_cache=NodeCache(client, retry_delay_s=0.05),
        pod_cache=pod_cache,
        clock=CLOCK,
    )
    with serve(ExtenderApp(instance)) as url:
        wait_for(lambda: http_client.get(f"{url}/readyz").status_code == 200)
        yield instance, url


def filter_names(url: str, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    response = http_client.post(f"{url}/filter", json={"Pod": pod, "NodeNames": names})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def sample(url: str, name: str, **labels: str) -> float:
    text = http_client.get(f"{url}/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{wanted}}}" if wanted else name
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


# --------------------------------------------------------------------------- attack 1


def test_cache_mode_judges_request_nodes_by_the_api_servers_data_and_keeps_none(
    extender: tuple[Extender, str],
) -> None:
    instance, url = extender
    pod = pod_body("p", "uid-p")
    # The real names with hot annotations, and 2,000 invented names.
    items = [node_object(name, hot_cpu()) for name in REAL_NODES]
    items += [node_object(f"invented-{i}", hot_cpu()) for i in range(2000)]
    response = http_client.post(f"{url}/filter", json={"Pod": pod, "Nodes": {"items": items}})
    assert response.status_code == 200
    answer = response.json()
    # Judged as the API server says (0.45: passes); the request's annotations are ignored.
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]][:2] == list(REAL_NODES)
    assert answer["FailedAndUnresolvableNodes"] == {}
    # Nothing of the request was kept: the table holds the two real nodes only.
    assert len(instance.table) == len(REAL_NODES)
    assert filter_names(url, pod, list(REAL_NODES))["NodeNames"] == list(REAL_NODES)


def test_cache_mode_scores_request_nodes_by_the_api_servers_data(
    extender: tuple[Extender, str], fake_kube: FakeKube
) -> None:
    instance, url = extender
    fake_kube.store.add_node("cold", annotations=cool(), allocatable=ALLOCATABLE)
    wait_for(lambda: instance.table.get("cold") is not None)
    # The request claims node-a is idle and cold is hot; the API server says otherwise.
    items = [node_object("node-a", usage_annotations(0.0, 0.0)), node_object("cold", hot_cpu())]
    body = {"Pod": pod_body("p", "uid-p"), "Nodes": {"items": items}}
    answer = http_client.post(f"{url}/prioritize", json=body).json()
    scores = {s["Host"]: s["Score"] for s in answer}
    assert scores["cold"] > scores["node-a"]


def test_full_nodes_mode_bounds_what_requests_bring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verbs, "MAX_NODES", 50)
    instance = Extender(default_policy())  # no node cache: the requests are the source
    assert Extender.request_nodes_mode(None) is RequestNodes.STORE
    with serve(ExtenderApp(instance)) as url:
        pod = pod_body("p", "uid-p")
        too_many = [node_object(f"n-{i}", cool()) for i in range(51)]
        response = http_client.post(
            f"{url}/filter", json={"Pod": pod, "Nodes": {"items": too_many}}
        )
        assert response.status_code == 400
        assert "at most 50" in response.json()["error"]
        for batch in range(5):  # 200 names in all, 40 at a time
            items = [node_object(f"n-{batch}-{i}", cool()) for i in range(40)]
            items[0]["metadata"]["annotations"]["cpu_usage_avg_5m"] = "9" * 5000  # garbage
            response = http_client.post(
                f"{url}/filter", json={"Pod": pod, "Nodes": {"items": items}}
            )
            assert response.status_code == 200
        assert len(instance.table) == 50  # the least recently seen were forgotten
        assert instance.table.get("n-4-39") is not None
        assert instance.table.get("n-0-1") is None
        kept = instance.table.get("n-4-0")
        assert kept is not None
        assert "cpu_usage_avg_5m" not in kept.annotations


# --------------------------------------------------------------------------- attack 2


def test_reservations_for_pods_that_do_not_exist_end_after_the_grace(
    extender: tuple[Extender, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    instance, url = extender
    # Long enough that no request below outlives it on a slow machine; the test moves
    # the extender's clock past it instead of waiting (twice 120 s keeps the nodes'
    # samples fresh, so the verdicts below are real ones, not the stale fail-open).
    monkeypatch.setattr(reservations, "UNVERIFIED_GRACE_S", 120.0)
    real = pod_body("real", "uid-real")
    # Two invented pods with 4-CPU limits take both real nodes over their limit...
    for i in range(2):
        body = {"Pod": pod_body(f"ghost-{i}", f"uid-ghost-{i}"), "NodeNames": list(REAL_NODES)}
        assert http_client.post(f"{url}/prioritize", json=body).status_code == 200
    assert filter_names(url, real, list(REAL_NODES))["NodeNames"] == []
    # ...only until the grace ends without the pod watch showing them.
    CLOCK.ahead_s = reservations.UNVERIFIED_GRACE_S
    refused = "loadaware_extender_reservations_refused_total"
    wait_for(lambda: sample(url, refused, reason="unverified") == 2)
    assert filter_names(url, real, list(REAL_NODES))["NodeNames"] == list(REAL_NODES)
    # And no more than MAX_UNVERIFIED such pods hold anything at once.
    for i in range(60):
        body = {"Pod": pod_body(f"tiny-{i}", f"uid-tiny-{i}", "1m", "1m"), "NodeNames": ["node-a"]}
        assert http_client.post(f"{url}/prioritize", json=body).status_code == 200
    assert sample(url, refused, reason="unverified-limit") == 60 - reservations.MAX_UNVERIFIED
    CLOCK.ahead_s += reservations.UNVERIFIED_GRACE_S
    wait_for(lambda: sample(url, refused, reason="unverified") == 2 + reservations.MAX_UNVERIFIED)
    assert instance.reserve is not None
    assert instance.reserve.reservations == 0


def test_a_pending_pod_reserves_what_the_api_server_says_it_asks(
    extender: tuple[Extender, str], fake_kube: FakeKube
) -> None:
    instance, url = extender
    stored = fake_kube.store.add(PODS, pod_body("small", "", cpu_limit="100m"))
    pod_cache = instance.pod_cache
    assert pod_cache is not None
    wait_for(lambda: "default/small" in pod_cache.objects)
    # The request claims a 32-CPU limit; the pod in the API server has 100m.
    claimed = pod_body("small", stored["metadata"]["uid"], cpu_limit="32")
    http_client.post(f"{url}/prioritize", json={"Pod": claimed, "NodeNames": ["node-a"]})
    assert instance.reserve is not None
    reserved = instance.reserve.contributions("node-a", None, instance.clock())
    assert [(c.pod, c.kind) for c in reserved] == [("default/small", "reserved")]
    assert reserved[0].usage.cpu_cores == pytest.approx(0.1 * 0.85)
    assert filter_names(url, claimed, ["node-a"])["NodeNames"] == ["node-a"]


@pytest.mark.parametrize("case", ["bound", "other-uid"])
def test_pods_that_are_not_pending_reserve_nothing(
    extender: tuple[Extender, str], fake_kube: FakeKube, case: str
) -> None:
    instance, url = extender
    body = pod_body("web", "")
    if case == "bound":
        body["spec"]["nodeName"] = "node-b"
    stored = fake_kube.store.add(PODS, body)
    pod_cache = instance.pod_cache
    assert pod_cache is not None
    wait_for(lambda: "default/web" in pod_cache.objects)
    uid = stored["metadata"]["uid"] if case == "bound" else "uid-forged"
    http_client.post(
        f"{url}/prioritize", json={"Pod": pod_body("web", uid), "NodeNames": ["node-a"]}
    )
    refused = "loadaware_extender_reservations_refused_total"
    assert sample(url, refused, reason="not-pending") == 1
    assert instance.reserve is not None
    assert instance.reserve.reservations == 0

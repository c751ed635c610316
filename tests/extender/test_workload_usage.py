"""The extender follows the annotator's workload-usage ConfigMap (fake API server) and
raises its estimate of a pod just bound, or reserved, to what its workload's pods use;
missing, stale or garbage data leaves every estimate as without it, and a tenant's pods
only ever change the estimate of their own workloads (docs/security.md)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from app.extender.extender import Extender
from app.extender.request_pod import request_pod_workload
from app.extender.verbs import Outcome, parse_args
from app.extender.workload_usage import WorkloadUsageFollower, WorkloadUsageSource
from app.kube import WORKLOAD_USAGE_NAME, WorkloadUsageStore
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache, scheduled_pod
from app.kube.workload_usage import MAX_WORKLOADS, USAGE_KEY, decode, encode
from app.objects import Resources, ScheduledPod
from app.policy import default_policy
from tests.extender.test_estimates import Clock, added_cpu, set_node, usage
from tests.support.fakekube import CONFIGMAPS
from tests.support.fakekube_fixtures import FakeKube

NAMESPACE = "loadaware"
WEB = "shop/Deployment/web"
CPUSVC_REQUESTS = Resources(0.1, 256 * 2.0**20)  # 100m, no limit: estimated at 85m


def document(workloads: dict[str, Any], published_at_s: float) -> str:
    return json.dumps({"version": 1, "publishedAt": published_at_s, "workloads": workloads})


def store_configmap(fake_kube: FakeKube, text: str) -> None:
    body = {"metadata": {"name": WORKLOAD_USAGE_NAME, "namespace": NAMESPACE},
            "data": {USAGE_KEY: text}}
    if fake_kube.store.get(CONFIGMAPS, WORKLOAD_USAGE_NAME, NAMESPACE) is None:
        fake_kube.store.add(CONFIGMAPS, body)
    else:
        fake_kube.store.modify(
            CONFIGMAPS, WORKLOAD_USAGE_NAME, lambda cm: cm.update(data=body["data"]),
            namespace=NAMESPACE,
        )


def refresh(fake_kube: FakeKube, follower_of: Callable[[WorkloadUsageStore], Any]) -> Any:
    async def run() -> Any:
        async with fake_kube.async_client() as client:
            follower = follower_of(WorkloadUsageStore(client, NAMESPACE))
            await follower.refresh()
            return follower

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("text", "state"),
    [
        (None, "missing"),
        ("{not json", "unreadable"),
        (json.dumps({"version": 2, "publishedAt": 0, "workloads": {}}), "unreadable"),
        (document({WEB: [0.7, 1e8]}, time.time() + 3600), "unreadable"),  # dated ahead
        (document({WEB: [0.7, 1e8]}, time.time() - 3600), "stale"),
        (document({WEB: [0.7, 1e8]}, time.time() - 30), "ok"),
    ],
)
def test_only_a_fresh_readable_document_is_followed(
    fake_kube: FakeKube, text: str | None, state: str
) -> None:
    if text is not None:
        store_configmap(fake_kube, text)
    changes: list[int] = []
    reads: list[str] = []

    def follower_of(store: WorkloadUsageStore) -> WorkloadUsageFollower:
        return WorkloadUsageFollower(
            WorkloadUsageSource(store, max_age_s=600.0),
            clock=time.time,
            on_change=lambda: changes.append(1),
            on_read=reads.append,
        )

    follower = refresh(fake_kube, follower_of)
    assert follower.state == state
    assert reads == [state]
    if state == "ok":
        assert follower.observed(WEB) == Resources(0.7, 1e8)
        assert changes == [1]
    else:
        assert follower.observed(WEB) is None
        assert follower.workloads == {}
        assert changes == []


def test_garbage_entries_are_skipped_one_by_one_and_the_rest_is_kept() -> None:
    now_s = 1_700_000_000.0
    text = document(
        {
            WEB: [0.7, 1e8],
            "shop/Deployment/nan": ["NaN", 1e8],
            "shop/Deployment/negative": [-1, 1e8],
            "shop/Deployment/huge": [1e9, 1e8],
            "shop/Deployment/short": [0.5],
            "no-kind-or-name": [0.5, 1e8],
            "shop/Deployment/flag": [True, 1e8],
            "shop/Deployment/mem": [0.1, 1e30],
        },
        now_s,
    )
    usage_, skipped = decode(text, now_s)
    assert dict(usage_.workloads) == {WEB: Resources(0.7, 1e8)}
    assert skipped == 7


def test_a_document_is_cut_at_its_bound_most_pods_first() -> None:
    entries = [
        (f"ns/Deployment/w{i}", Resources(0.1, 1.0), 5) for i in range(MAX_WORKLOADS + 10)
    ]
    text = encode(entries, 1_700_000_000.0)
    usage_, skipped = decode(text, 1_700_000_000.0)
    assert len(usage_.workloads) == MAX_WORKLOADS
    assert "ns/Deployment/w0" in usage_.workloads
    assert f"ns/Deployment/w{MAX_WORKLOADS}" not in usage_.workloads
    assert skipped == 0
    assert len(text) < 512 * 1024  # a ConfigMap holds at most 1 MiB


class StaticFollower:
    """The extender's follower, its document set by the test (no API server)."""

    def __init__(self, follower: WorkloadUsageFollower | None) -> None:
        assert follower is not None
        self.follower = follower

    def publish(
        self, workloads: dict[str, Resources], pods: dict[str, int] | None = None
    ) -> None:
        """``pods``: how many running pods each was measured on (10 where not said)."""
        measured = {workload: 10 for workload in workloads} if pods is None else pods
        self.follower._adopt(MappingProxyType(workloads), time.time(), "ok", "", measured)

    def go_stale(self) -> None:
        self.follower._adopt(MappingProxyType({}), None, "stale", "test")


def make_extender(clock: Clock) -> tuple[Extender, StaticFollower]:
    client = client_for_server("http://127.0.0.1:9")  # never contacted: caches fed by hand
    pod_cache: PodCache[ScheduledPod] = PodCache(client, scheduled_pod)
    extender = Extender(
        default_policy(),
        node_cache=NodeCache(client),
        pod_cache=pod_cache,
        clock=clock,
        registry=CollectorRegistry(),
        workload_usage=WorkloadUsageSource(WorkloadUsageStore(client, NAMESPACE)),
    )
    follower = StaticFollower(extender.workload_usage)
    for name in ("cool", "warm"):
        set_node(extender, name, usage(0.15, clock() - 30))
    return extender, follower


def bind(extender: Extender, key: str, workload: str | None, at_s: float) -> None:
    """A cpusvc-like pod (100m, no limit) as the watch shows a scheduler's binding."""
    assert extender.pod_cache is not None
    name = key.split("/")[1]
    pending = ScheduledPod(f"uid-{name}", None, CPUSVC_REQUESTS, Resources(), at_s, False, workload)
    extender.pod_cache.apply(key, pending)
    bound = ScheduledPod(f"uid-{name}", "cool", CPUSVC_REQUESTS, Resources(), at_s, False, workload)
    extender.pod_cache.apply(key, bound)


def test_a_bound_pod_counts_at_its_workloads_observed_usage_and_falls_back_when_stale() -> None:
    clock = Clock()
    extender, follower = make_extender(clock)
    bind(extender, "shop/web-1", WEB, clock() - 5)
    assert added_cpu(extender, "cool") == pytest.approx(0.085 / 8)
    follower.publish({WEB: Resources(0.7, 0.0)})  # the change redoes the node's unsampled usage
    assert added_cpu(extender, "cool") == pytest.approx(0.7 / 8)
    follower.go_stale()
    assert added_cpu(extender, "cool") == pytest.approx(0.085 / 8)
    assert extender.metrics.registry.get_sample_value("loadaware_extender_workloads_observed") == 0


def test_a_tenant_can_only_make_its_own_pods_look_heavier() -> None:
    """A tenant's workload uses 6 cores a pod: its own pods count 6 cores; its pods
    claiming shop's ReplicaSet name a workload of its own namespace, and shop's pods,
    whose workload uses 0.7, count 0.7, not 6."""
    clock = Clock()
    extender, follower = make_extender(clock)
    follower.publish({WEB: Resources(0.7, 0.0), "evil/Deployment/web": Resources(6.0, 0.0)})
    bind(extender, "shop/web-1", WEB, clock() - 5)
    assert added_cpu(extender, "cool") == pytest.approx(0.7 / 8)
    forged = {
        "metadata": {
            "namespace": "evil",
            "name": "web-7d9f-x",
            "labels": {"pod-template-hash": "7d9f"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "web-7d9f", "uid": "u", "controller": True}
            ],
        }
    }
    assert request_pod_workload(forged) == "evil/Deployment/web"
    bind(extender, "evil/web-7d9f-x", request_pod_workload(forged), clock() - 5)
    assert added_cpu(extender, "cool") == pytest.approx((0.7 + 6.0) / 8)


@pytest.mark.parametrize(
    ("metadata", "workload"),
    [
        ({"namespace": "a", "ownerReferences": [
            {"kind": "StatefulSet", "name": "db", "controller": True}]}, "a/StatefulSet/db"),
        ({"ownerReferences": [{"kind": "Job", "name": "j", "controller": True}]},
         "default/Job/j"),
        ({"namespace": "a", "ownerReferences": [{"kind": "Job", "name": "j"}]}, None),
        ({"namespace": "a", "ownerReferences": "garbage"}, None),
        ({"namespace": "a", "ownerReferences": [{"kind": 3, "name": "j", "controller": True}]},
         None),
        ({"namespace": ["a"], "ownerReferences": []}, None),
        ({}, None),
    ],
)
def test_a_request_pods_workload_is_read_defensively(
    metadata: dict[str, Any], workload: str | None
) -> None:
    assert request_pod_workload({"metadata": metadata}) == workload
    assert request_pod_workload({"metadata": "garbage"}) is None


def test_a_reservation_of_a_pod_of_the_workload_is_priced_at_its_observed_usage() -> None:
    """prioritize reserves the pod on the preferred node; the pod is read from the pod
    cache (pending), with its workload."""
    clock = Clock()
    extender, follower = make_extender(clock)
    follower.publish({WEB: Resources(0.7, 0.0)})
    assert extender.pod_cache is not None
    pending = ScheduledPod("uid-web-2", None, CPUSVC_REQUESTS, Resources(), clock(), False, WEB)
    extender.pod_cache.apply("shop/web-2", pending)
    pod = {
        "metadata": {"name": "web-2", "namespace": "shop", "uid": "uid-web-2"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    body = httpx.Request("POST", "/", json={"Pod": pod, "NodeNames": ["cool", "warm"]}).read()
    outcome = Outcome()
    extender.verbs.prioritize(parse_args(body), outcome)
    extender.record("prioritize", 200, 0.0, outcome)
    assert outcome.best_node is not None
    assert added_cpu(extender, outcome.best_node) == pytest.approx(0.7 / 8)


def test_the_room_check_estimates_a_pending_pod_at_its_workloads_usage() -> None:
    """prioritize's room check (the preferred node must have room for the pod) takes the
    pod's workload from the pod cache (the API server's word, not the request's), and
    looks it up only for a shape that can be raised: not for a pod with both limits."""
    clock = Clock()
    extender, follower = make_extender(clock)
    assert extender.pod_cache is not None
    pending = ScheduledPod("uid-web-3", None, CPUSVC_REQUESTS, Resources(), clock(), False, WEB)
    extender.pod_cache.apply("shop/web-3", pending)
    pod: dict[str, Any] = {
        "metadata": {"name": "web-3", "namespace": "shop", "uid": "uid-web-3"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    estimate = extender.verbs._pod_estimate
    assert estimate(pod, extender.table)[0] == pytest.approx(0.085)
    follower.publish({WEB: Resources(0.7, 0.0)})
    assert estimate(pod, extender.table)[0] == pytest.approx(0.7)
    follower.publish({WEB: Resources(0.9, 0.0)})  # a new document: estimated anew
    assert estimate(pod, extender.table)[0] == pytest.approx(0.9)
    looked_up: list[str] = []

    def workload_of(key: str) -> str | None:
        looked_up.append(key)
        return WEB

    extender.verbs.workload_of_pod = workload_of
    limited = {**pod, "spec": {"containers": [{"name": "c", "resources": {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "128Mi"}}}]}}
    assert estimate(limited, extender.table)[0] == pytest.approx(0.85)
    assert looked_up == []

"""A bound pod's estimate is no higher than what its workload is measured to use
(``app.load.estimate``, "Lowered to what is measured"; issue 43): at a step rise the
limit-based guess of the pods just bound held further pods off nodes with room by
requests and by real use, until the next samples."""

from __future__ import annotations

from typing import Any

from app.objects import Resources, ScheduledPod
from tests.extender.test_estimates import Clock
from tests.extender.test_workload_usage_bounds import (
    NODES,
    cluster,
    follow_document,
    ordinary_pod,
    passing,
)
from tests.support.fakekube_fixtures import FakeKube

WEB = "shop/Deployment/web"
REQUESTS, LIMITS = Resources(0.5, 0.0), Resources(2.0, 0.0)  # estimated at 2 x 0.85 cores


def bind_rise(extender: Any, at_s: float, per_node: int) -> None:
    """``per_node`` pods of web bound by a scheduler on node-0 and node-1 each."""
    cache = extender.pod_cache
    for node in NODES[:2]:
        for i in range(per_node):
            key, uid = f"shop/web-{node}-{i}", f"uid-web-{node}-{i}"
            cache.apply(key, ScheduledPod(uid, None, REQUESTS, LIMITS, at_s, False, WEB))
            cache.apply(key, ScheduledPod(uid, node, REQUESTS, LIMITS, at_s, False, WEB, at_s))


def test_pods_of_a_measured_workload_count_what_it_uses(fake_kube: FakeKube) -> None:
    """4 pods at 1.7 cores each would put an 8-CPU node at 15 % + 85 %; measured at
    0.2 core a pod on 5 pods, they put it at 25 %: the node takes the next pod."""
    clock = Clock()
    extender, follower = cluster(clock)
    follow_document(fake_kube, follower, {WEB: [0.2, 1e8, 5]})
    bind_rise(extender, clock() - 5, per_node=4)
    assert passing(extender, ordinary_pod()) == NODES


def test_a_workload_measured_on_too_few_pods_keeps_the_guess(fake_kube: FakeKube) -> None:
    """Measured on 2 pods (fewer than MIN_MEASURED_PODS): its word lowers nothing."""
    clock = Clock()
    extender, follower = cluster(clock)
    follow_document(fake_kube, follower, {WEB: [0.2, 1e8, 2]})
    bind_rise(extender, clock() - 5, per_node=4)
    assert passing(extender, ordinary_pod()) == NODES[2:]


def test_without_a_document_the_guess_holds_the_node(fake_kube: FakeKube) -> None:
    clock = Clock()
    extender, _ = cluster(clock)
    bind_rise(extender, clock() - 5, per_node=4)
    assert passing(extender, ordinary_pod()) == NODES[2:]

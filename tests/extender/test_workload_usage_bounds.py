"""Issue 42, point 1, replayed on the extender (fake API server for the document, the
pod cache fed as its watch would be): a tenant runs a "burner" (1m request, no limit,
7.5 cores used), so its workload's published usage is 7.5 cores a pod, then binds a
wave of pods of the same workload key that request 1m and never start. Each one counted
at 7.5 cores, a whole 8-CPU node, and on 10 nodes at 15 % an ordinary pod passed the
filter on 0 of 10 ("too high", unresolvable: no preemption either).

The bounds (``app.load.estimate``, "Bounds"): a usage measured on fewer than 3 running
pods raises nothing; no more of a workload's pods hold a raise at once than it has
measured running pods; a pod whose containers have not started within 2 minutes of its
binding loses its raise; and system-critical pods pass the load filter whatever it
reads (docs/security.md)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import orjson
import pytest

from app.extender.verbs import Outcome, parse_args
from app.kube import WorkloadUsageStore
from app.load import START_GRACE_S
from app.objects import Resources, ScheduledPod
from tests.extender.test_estimates import Clock, set_node, usage
from tests.extender.test_workload_usage import (
    NAMESPACE,
    StaticFollower,
    make_extender,
    store_configmap,
)
from tests.support.fakekube_fixtures import FakeKube

NODES = [f"node-{i}" for i in range(10)]
BURNER = "evil/Deployment/burner"
WAVE_REQUESTS = Resources(0.001, 0.0)  # 1m, no limit: never started, never measured


def cluster(clock: Clock) -> tuple[Any, StaticFollower]:
    """10 nodes of 8 CPUs at 15 % CPU, read 30 s ago."""
    extender, follower = make_extender(clock)
    for name in NODES:
        set_node(extender, name, usage(0.15, clock() - 30))
    return extender, follower


def follow_document(fake_kube: FakeKube, follower: StaticFollower, entries: dict[str, Any]) -> None:
    """The annotator's document as the API server serves it, read by the follower."""
    text = json.dumps({"version": 1, "publishedAt": time.time(), "workloads": entries})
    store_configmap(fake_kube, text)

    async def read() -> None:
        async with fake_kube.async_client() as client:
            follower.follower._store = WorkloadUsageStore(client, NAMESPACE)
            await follower.follower.refresh()

    asyncio.run(read())
    assert follower.follower.state == "ok"


def bind_wave(extender: Any, at_s: float, count: int = len(NODES)) -> None:
    """``count`` pods of the burner's workload, seen pending and then bound one a node
    by a scheduler; their containers never start (no ``started_at_s``)."""
    cache = extender.pod_cache
    for i in range(count):
        key, uid, node = f"evil/wave-{i}", f"uid-wave-{i}", NODES[i % len(NODES)]
        cache.apply(key, ScheduledPod(uid, None, WAVE_REQUESTS, Resources(), at_s, False, BURNER))
        cache.apply(key, ScheduledPod(uid, node, WAVE_REQUESTS, Resources(), at_s, False, BURNER))


def start(extender: Any, i: int, at_s: float) -> None:
    """The kubelet reports wave pod ``i``'s container started at ``at_s``."""
    key = f"evil/wave-{i}"
    pod = extender.pod_cache.objects[key]
    extender.pod_cache.apply(
        key,
        ScheduledPod(
            pod.uid, pod.node, pod.requests, pod.limits, pod.bound_at_s, False, BURNER, at_s
        ),
    )


def ordinary_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "uid-web-1"},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            **spec,
        },
    }


def passing(extender: Any, pod: dict[str, Any]) -> list[str]:
    """The nodes the filter lets ``pod`` onto, of all ten (estimates that ended by the
    clock expired first, as the extender's background task does, off the request path)."""
    extender.table.expire_estimates(extender.clock())
    body = httpx.Request("POST", "/", json={"Pod": pod, "NodeNames": NODES}).read()
    answer = orjson.loads(extender.verbs.filter(parse_args(body), Outcome()))
    names: list[str] = answer["NodeNames"]
    return names


def test_a_usage_measured_on_one_pod_raises_no_wave(fake_kube: FakeKube) -> None:
    """The attack as issue 42 replayed it: the document an annotator writes for one
    burner (no count of pods measured, or 1), a wave of 10 never-started pods. Before:
    0 of 10 nodes passed; now the burner's usage is its own word and raises nothing."""
    clock = Clock()
    extender, follower = cluster(clock)
    assert passing(extender, ordinary_pod()) == NODES
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8]})
    bind_wave(extender, clock() - 5)
    assert passing(extender, ordinary_pod()) == NODES
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8, 1]})
    assert passing(extender, ordinary_pod()) == NODES


def test_no_more_pods_are_raised_at_once_than_were_measured(fake_kube: FakeKube) -> None:
    """Three burners measured: of the wave, three pods hold a raise, and three nodes
    are blocked (what the three burners use of their own nodes, no more); the other
    seven take an ordinary pod."""
    clock = Clock()
    extender, follower = cluster(clock)
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8, 3]})
    bind_wave(extender, clock() - 5)
    assert len(passing(extender, ordinary_pod())) == 7
    # The document read again (a new publication) hands the raises out again, in binding
    # order: still three.
    follow_document(fake_kube, follower, {BURNER: [7.4, 1e8, 3]})
    assert len(passing(extender, ordinary_pod())) == 7


def test_a_pod_not_started_within_its_grace_loses_its_raise(fake_kube: FakeKube) -> None:
    """Past two minutes with no container started, the wave's raises are gone and every
    node takes an ordinary pod; a pod whose container started in time keeps its raise,
    and a freed raise goes to the next pod bound, not back to the one that lost it."""
    clock = Clock()
    extender, follower = cluster(clock)
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8, 3]})
    bound_at_s = clock() - 5
    bind_wave(extender, bound_at_s)
    start(extender, 0, bound_at_s + 20)  # node-0's pod really runs
    assert len(passing(extender, ordinary_pod())) == 7
    clock.now_s = bound_at_s + START_GRACE_S + 1
    assert passing(extender, ordinary_pod()) == NODES[1:]
    start(extender, 1, clock())  # too late: its raise is not given back
    assert passing(extender, ordinary_pod()) == NODES[1:]


def test_the_room_check_of_the_pod_in_hand_takes_a_raise_only_while_one_is_left(
    fake_kube: FakeKube,
) -> None:
    """prioritize's room check estimates a pending pod of the workload at its usage only
    while its workload has a raise left; with all three held, at its requests."""
    clock = Clock()
    extender, follower = cluster(clock)
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8, 3]})
    pending = ScheduledPod("uid-next", None, WAVE_REQUESTS, Resources(), clock(), False, BURNER)
    extender.pod_cache.apply("evil/next", pending)
    pod = {
        "metadata": {"name": "next", "namespace": "evil", "uid": "uid-next"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1m"}}}]},
    }
    estimate = extender.verbs._pod_estimate
    assert estimate(pod, extender.table)[0] == pytest.approx(7.5)
    bind_wave(extender, clock() - 5, count=3)
    assert estimate(pod, extender.table)[0] == pytest.approx(0.001 * 0.85)


@pytest.mark.parametrize(
    "spec",
    [
        {"priorityClassName": "system-cluster-critical", "priority": 2_000_000_000},
        {"priorityClassName": "system-node-critical", "priority": 2_000_001_000},
        {"priority": 2_000_000_000},
    ],
)
def test_system_critical_pods_pass_the_load_filter_on_nodes_it_rejects(
    spec: dict[str, Any],
) -> None:
    """Every node at 90 % CPU: an ordinary pod passes nowhere, a system-critical one
    (DNS, the CNI, loadaware's own extender) everywhere."""
    clock = Clock()
    extender, _ = cluster(clock)
    for name in NODES:
        set_node(extender, name, usage(0.90, clock() - 30))
    assert passing(extender, ordinary_pod()) == []
    assert passing(extender, ordinary_pod(**spec)) == NODES
    assert passing(extender, ordinary_pod(priority=1_999_999_999)) == []
    assert passing(extender, ordinary_pod(priorityClassName="tenant-critical")) == []


def test_the_raise_of_the_largest_raised_pod_is_a_metric_by_namespace(
    fake_kube: FakeKube,
) -> None:
    """What the alert (deploy/prometheus/loadaware-alerts.yaml) watches: of one pod's
    estimate, the part its workload's usage adds, as a fraction of its node, with the
    namespace that published it; absent while no pod holds a raise."""
    clock = Clock()
    extender, follower = cluster(clock)
    name = "loadaware_extender_pod_estimate_raise_max_fraction"
    labels = {"resource": "cpu", "namespace": "evil"}
    registry = extender.metrics.registry
    assert registry.get_sample_value(name, labels) is None
    follow_document(fake_kube, follower, {BURNER: [7.5, 1e8, 3]})
    bind_wave(extender, clock() - 5)
    assert registry.get_sample_value(name, labels) == pytest.approx((7.5 - 0.001 * 0.85) / 8)
    clock.now_s += START_GRACE_S + 1  # never started: the raises are gone
    assert registry.get_sample_value(name, labels) is None

"""On a real control plane: the descheduler never evicts a pod that no cool node would
take the way kube-scheduler places it (inter-pod anti-affinity, topology spread), and the
replacement of a pod it does evict, scheduled by the real kube-scheduler calling the
loadaware extender, lands on a cool node: not back on its source, and not Pending; and a
later run, with that node turned hot, does not evict the replacement again.

Pods are placed by the real kube-scheduler (no ``nodeName`` pinning), so the constraints
the planner checks are the ones the scheduler enforced."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

from app.descheduler.descheduler import RunResult
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from app.rebalance.outcome import SkipCode
from tests.descheduler.cluster import load_annotations
from tests.e2e.burst import outcome_of, scheduler_with_shared_extender
from tests.e2e.descheduler import deployment, descheduler_allowed, run_once
from tests.e2e.harness import ControlPlane, scheduler_config, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

POD_CORES = 0.3  # each pod's measured usage: 7.5 % of a 4-core node
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def live_pods(client: Client, namespace: str) -> dict[str, str | None]:
    """Pod name -> its node (None while Pending), for pods not being deleted."""
    return {
        pod.metadata.name or "": pod.spec.nodeName if pod.spec else None
        for pod in client.list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    }


def all_bound(client: Client, namespace: str, count: int) -> bool:
    pods = live_pods(client, namespace)
    return len(pods) == count and all(pods.values())


@pytest.fixture
def descheduler_state(cluster: ControlPlane) -> Iterator[None]:
    with descheduler_allowed(cluster):
        yield


def usage_series(client: Client, namespace: str) -> list[PodSeries]:
    return [
        PodSeries(namespace, name, {"app": (POD_CORES, 100 * 2**20)}, node=node)
        for name, node in live_pods(client, namespace).items()
        if node is not None
    ]


def fast_config() -> DeschedulerConfig:
    """Debounce off and fast calls; every rule of the planner is the shipped default."""
    return config_from_mapping({"consecutiveHotRounds": 1, "evictionsPerSecond": 50})


def make_nodes(cluster: ControlPlane, load: Mapping[str, tuple[float, str]]) -> None:
    for name, (cpu, zone) in load.items():
        cluster.make_node(
            name, cpu="4", memory="16Gi", annotations=load_annotations(cpu), labels={ZONE: zone}
        )


def test_a_pod_whose_anti_affinity_or_spread_no_cool_node_satisfies_is_never_evicted(
    cluster: ControlPlane, namespace: str, descheduler_state: None
) -> None:
    # hot (85 %) is alone in zone a; the cool nodes share zone b.
    make_nodes(cluster, {"hot": (0.85, "a"), "cool-1": (0.2, "b"), "cool-2": (0.2, "b")})
    client = cluster.client()
    one_per_node = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "lonely"}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    client.create(deployment(namespace, "lonely", 3, affinity=one_per_node))
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "zonal"}},
        }
    ]
    client.create(deployment(namespace, "zonal", 2, topologySpreadConstraints=spread))
    # Pods free to move (a preferred rule puts them on hot, and binds no replacement),
    # so the run shows it does evict where it may.
    prefer_hot = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["hot"]}]
                    },
                }
            ]
        }
    }
    client.create(deployment(namespace, "free", 2, affinity=prefer_hot))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: all_bound(client, namespace, 7), 120, "7 pods placed")
    placed = live_pods(client, namespace)
    on_hot = {name.split("-")[0] for name, node in placed.items() if node == "hot"}
    assert on_hot == {"lonely", "zonal", "free"}, placed
    assert cluster.kubelet_mark_ready(namespace) == 7

    with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
        report = run_once(cluster, prometheus_url, fast_config())
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    # Without the inter-pod checks all three would go (85 % - 3 x 7.5 % = 62.5 %).
    evicted = [key.split("/")[1].split("-")[0] for key in report.evicted]
    assert evicted == ["free"], report.plan.skipped
    refused = {
        s.pod_key.split("/")[1].split("-")[0]: s.reason
        for s in report.plan.skipped
        if s.node == "hot" and s.code is SkipCode.NO_DESTINATION
    }
    assert set(refused) == {"lonely", "zonal"}, report.plan.skipped
    assert "pod anti-affinity" in refused["lonely"]
    assert "topology spread" in refused["zonal"]
    left = live_pods(client, namespace)
    assert {n for n, node in left.items() if node == "hot" and not n.startswith("free")} == {
        n for n, node in placed.items() if node == "hot" and not n.startswith("free")
    }


def test_an_evicted_pod_is_replaced_on_a_cool_node_by_the_real_scheduler_and_extender(
    cluster: ControlPlane,
    namespace: str,
    descheduler_state: None,
    request: pytest.FixtureRequest,
) -> None:
    make_nodes(cluster, {"hot": (0.85, "a"), "cool-1": (0.2, "a"), "cool-2": (0.2, "a")})
    client = cluster.client()
    # The Deployment is placed while the cool nodes are cordoned, so all of it lands on
    # hot; its pods carry no constraint that would keep a replacement there.
    for name in ("cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": True}})
    client.create(deployment(namespace, "web", 4))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: all_bound(client, namespace, 4), 120, "4 web pods on hot")
    assert set(live_pods(client, namespace).values()) == {"hot"}
    for name in ("cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == 4
    before = set(live_pods(client, namespace))

    with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
        report = run_once(cluster, prometheus_url, fast_config())
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    assert len(report.evicted) == 1, report.outcomes  # maxMigratingPerWorkload 1
    [planned] = report.plan.evictions
    assert planned.source == "hot"
    assert planned.destination in {"cool-1", "cool-2"}

    # The other cool node is cordoned while the replacement is scheduled, so that it
    # goes where the plan sent it (the extender alone would take either cool node).
    other = ({"cool-1", "cool-2"} - {planned.destination}).pop()
    client.patch(Node, other, {"spec": {"unschedulable": True}})
    cluster.kubelet_reap(namespace)  # no kubelet: finish the evicted pod's termination
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        wait_until(lambda: all_bound(client, namespace, 4), 120, "the replacement bound")
    after = live_pods(client, namespace)
    [replacement] = set(after) - before
    assert after[replacement] == planned.destination, outcome_of(client, namespace).describe()
    assert sorted(node or "" for node in after.values()).count("hot") == 3

    # Later the node it was sent to turns hot and hot cools down. With the workload
    # cooldown off, the run would move the replacement again to the other cool node; it
    # is held where it was sent for returnCooldown: the real API server's
    # creationTimestamp and the descheduler's clock agree on which pod replaced which.
    client.patch(Node, other, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == 1
    for name, cpu in ((planned.destination, 0.85), ("hot", 0.5)):
        fresh = load_annotations(cpu, at_s=time.time())
        client.patch(Node, name, {"metadata": {"annotations": fresh}})
    later_config = config_from_mapping(
        {"consecutiveHotRounds": 1, "evictionsPerSecond": 50, "workloadCooldown": "0s"}
    )
    with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
        again = run_once(cluster, prometheus_url, later_config)
    assert again.result is RunResult.OK, again.message
    assert again.plan is not None
    assert again.evicted == [], again.outcomes
    held = [s for s in again.plan.skipped if s.pod_key == f"{namespace}/{replacement}"]
    assert [s.code for s in held] == [SkipCode.COOLDOWN], again.plan.skipped
    assert f"was sent to {planned.destination} since (returnCooldown 1h)" in held[0].reason

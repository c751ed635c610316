"""On a real control plane, the descheduler as its own RBAC user through the real Eviction
API:

- the autoscalers' opt-outs (issue 40): pods with `safe-to-evict: "false"` or
  `do-not-disrupt: "true"` on a hot node are never evicted while the others are, and a
  Node with `do-not-disrupt: "true"` loses no pod;
- a tenant makes a node hot (issue 42, point 3): its burner (1m requested, 2 cores
  used), protected by an emptyDir and by being its Deployment's only replica, and
  asking to go last, heats a node shared with another tenant's pods that use what
  they request. None of those is evicted (before the fix, four were), and the Node
  gets a `LoadAwareHeldHot` Warning Event naming the burner.
"""

from __future__ import annotations

import pytest
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Event, Pod

from app.descheduler.descheduler import RunResult
from app.kube.events import HELD_HOT_REASON, NODE_EVENT_NAMESPACE
from app.rebalance.config import config_from_mapping
from app.rebalance.outcome import SkipCode
from tests.descheduler.cluster import load_annotations
from tests.e2e.descheduler import deployment, descheduler_allowed, pinned_deployment, run_once
from tests.e2e.harness import ControlPlane, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

MIB = 2**20
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
# Debounce off, fast calls, the per-workload limits open: only the opt-outs hold pods.
CONFIG = config_from_mapping({
    "consecutiveHotRounds": 1,
    "evictionsPerSecond": 50,
    "maxMigratingPerWorkload": 100,
    "maxUnavailablePerWorkload": "100%",
})  # fmt: skip


def annotated(deployment: Deployment, annotations: dict[str, str]) -> Deployment:
    """The Deployment with ``annotations`` on its pod template."""
    assert deployment.spec is not None
    assert deployment.spec.template.metadata is not None
    deployment.spec.template.metadata.annotations = annotations
    return deployment


def live(cluster: ControlPlane, namespace: str) -> dict[str, str]:
    """Pod name -> node, of the pods neither gone nor terminating."""
    return {
        pod.metadata.name or "": (pod.spec.nodeName if pod.spec else None) or ""
        for pod in cluster.client().list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    }


def running(cluster: ControlPlane, namespace: str, count: int) -> dict[str, str]:
    wait_until(lambda: len(live(cluster, namespace)) == count, 60, f"{count} pods")
    assert cluster.kubelet_mark_ready(namespace) == count
    return live(cluster, namespace)


def test_pods_and_nodes_that_opt_out_are_never_evicted_while_others_are(
    cluster: ControlPlane, namespace: str
) -> None:
    # hot: 85 % of 4 cores, 65 % target: 0.8 cores to shed; hot-2 the same, opted out.
    cluster.make_node("hot", cpu="4", memory="16Gi", annotations=load_annotations(0.85))
    cluster.make_node("hot-2", cpu="4", memory="16Gi",
                      annotations={**load_annotations(0.85), DO_NOT_DISRUPT: "true"})
    for name in ("cool-1", "cool-2", "cool-3"):
        cluster.make_node(name, cpu="4", memory="16Gi", annotations=load_annotations(0.2))
    admin = cluster.client()
    workloads = {  # name: (template annotations, node, replicas)
        "plain": ({}, "hot", 6),  # 6: four may go and keep a Ready replica
        "shy": ({SAFE_TO_EVICT: "false"}, "hot", 4),
        "pinned": ({DO_NOT_DISRUPT: "true"}, "hot", 4),
        "elsewhere": ({}, "hot-2", 4),
    }
    with descheduler_allowed(cluster):
        for name, (annotations, node, replicas) in workloads.items():
            made = pinned_deployment(namespace, name, replicas, "250m", "128Mi", node=node)
            admin.create(annotated(made, annotations))
        before = running(cluster, namespace, 18)
        # Each pod uses what it requests.
        usage = [PodSeries(namespace, pod, {"app": (0.25, 100 * MIB)}, node=node)
                 for pod, node in before.items()]
        with cadvisor_prometheus(usage) as prometheus_url:
            report = run_once(cluster, prometheus_url, CONFIG)
        assert report.result is RunResult.OK, report.message
        assert report.plan is not None
        gone = set(before) - set(live(cluster, namespace))
        # 0.8 cores at 0.25 each: four pods, all of them plain, none from hot-2.
        assert len(report.evicted) == 4, report.outcomes
        assert {key.split("/")[1] for key in report.evicted} == gone
        assert all(name.startswith("plain-") for name in gone), gone
        opted = {s.pod_key.split("/")[1].split("-")[0] for s in report.plan.skipped
                 if s.code is SkipCode.OPTED_OUT}
        assert opted == {"shy", "pinned", "elsewhere"}
        hot_2 = [s for s in report.plan.skipped if s.node == "hot-2"]
        assert len(hot_2) == 4
        assert all('do-not-disrupt: "true" on its node' in s.reason for s in hot_2)


@pytest.mark.parametrize("scheduler", ["extender", "requests"])
def test_a_tenants_protected_burner_gets_no_other_tenants_pod_evicted(
    cluster: ControlPlane, namespace: str, scheduler: str
) -> None:
    """Beside the extender, and beside a kube-scheduler that places by requests (where
    the burner's node looks nearly empty, so it is where new pods would land)."""
    config = CONFIG.model_copy(update={"scheduler": scheduler})
    tenant_a = namespace
    tenant_b = cluster.namespace(f"{namespace[:50]}-b")
    cluster.make_node("hot", cpu="4", memory="16Gi", annotations=load_annotations(0.85))
    for name in ("cool-1", "cool-2", "cool-3"):
        cluster.make_node(name, cpu="4", memory="16Gi", annotations=load_annotations(0.2))
    admin = cluster.client()
    with descheduler_allowed(cluster):
        burner = deployment(tenant_a, "burner", 1, "1m", "64Mi", nodeName="hot",
                            volumes=[{"name": "scratch", "emptyDir": {}}])
        admin.create(annotated(burner, {PREFER_NO_EVICTION: "true"}))
        admin.create(pinned_deployment(tenant_b, "web", 6, "250m", "128Mi"))
        burners = running(cluster, tenant_a, 1)
        neighbours = running(cluster, tenant_b, 6)
        usage = [PodSeries(tenant_a, pod, {"app": (2.0, 50 * MIB)}, node="hot")
                 for pod in burners]
        usage += [PodSeries(tenant_b, pod, {"app": (0.2, 100 * MIB)}, node="hot")
                  for pod in neighbours]
        with cadvisor_prometheus(usage) as prometheus_url:
            report = run_once(cluster, prometheus_url, config)
            again = run_once(cluster, prometheus_url, config)  # the next round: the same
        assert report.result is RunResult.OK, report.message
        assert again.result is RunResult.OK, again.message
        assert report.plan is not None
        # Before the fix: four of tenant-b's pods (0.2 cores each for 0.8 cores of excess).
        assert report.evicted == [], report.outcomes
        assert again.evicted == [], again.outcomes
        assert live(cluster, tenant_b) == neighbours
        codes = {s.pod_key: s.code for s in report.plan.skipped}
        assert {codes[f"{tenant_b}/{pod}"] for pod in neighbours} == {SkipCode.WITHIN_REQUESTS}
        held = report.plan.held_hot["hot"]
        assert [key for key, _, _ in held.pods] == [f"{tenant_a}/{pod}" for pod in burners]
        events = [
            e for e in admin.list(Event, namespace=NODE_EVENT_NAMESPACE)
            if e.reason == HELD_HOT_REASON and f"{tenant_a}/" in (e.message or "")
        ]
        # One per descheduler process that finds the node newly held: each run_once here
        # is a fresh process, so one each; the involved object is the Node.
        assert len(events) == 2
        assert {(e.involvedObject.kind, e.involvedObject.name) for e in events} == {
            ("Node", "hot")}
        assert all(e.type == "Warning" for e in events)

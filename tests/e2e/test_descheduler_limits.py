"""On a real control plane: one descheduler run takes at most the per-workload limit of a
Deployment with no PodDisruptionBudget, through the real Eviction API, as the
descheduler's own RBAC user."""

from __future__ import annotations

from lightkube.resources.core_v1 import Pod

from app.descheduler.descheduler import RunResult
from app.rebalance.config import config_from_mapping
from tests.descheduler.cluster import load_annotations
from tests.e2e.descheduler import descheduler_allowed, pinned_deployment, run_once
from tests.e2e.harness import ControlPlane, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

REPLICAS = 10


def web_pods(cluster: ControlPlane, namespace: str) -> list[Pod]:
    return [
        pod
        for pod in cluster.client().list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    ]


def test_one_run_evicts_at_most_the_per_workload_limit_of_a_deployment_without_a_pdb(
    cluster: ControlPlane, namespace: str
) -> None:
    cluster.make_node("hot", cpu="4", memory="16Gi", annotations=load_annotations(0.85))
    for name in ("cool-1", "cool-2", "cool-3"):
        cluster.make_node(name, cpu="4", memory="16Gi", annotations=load_annotations(0.2))
    admin = cluster.client()
    with descheduler_allowed(cluster):
        admin.create(pinned_deployment(namespace, "web", REPLICAS, "250m", "128Mi"))
        wait_until(
            lambda: len(web_pods(cluster, namespace)) == REPLICAS, 60, "the ReplicaSet's pods"
        )
        assert cluster.kubelet_mark_ready(namespace) == REPLICAS
        pods = [p.metadata.name for p in web_pods(cluster, namespace) if p.metadata]
        usage = [
            PodSeries(namespace, name or "", {"app": (0.3, 100 * 2**20)}, node="hot")
            for name in pods
        ]
        # Debounce off and fast calls; the per-workload limits are the shipped defaults.
        config = config_from_mapping({"consecutiveHotRounds": 1, "evictionsPerSecond": 50})
        assert config.max_migrating_per_workload == 5
        assert config.max_unavailable_per_workload == "10%"
        with cadvisor_prometheus(usage) as prometheus_url:
            report = run_once(cluster, prometheus_url, config)
        assert report.result is RunResult.OK, report.message
        # Without the per-workload limits the plan would take 3 (0.3 cores each, from 85 %
        # of 4 cores down to the 65 % target needs 0.8 cores, on 3 cool nodes); 10 % of
        # 10 replicas may be unavailable at once: one.
        assert report.plan is not None
        assert len(report.evicted) == 1, report.outcomes
        limit = "maxUnavailablePerWorkload 10% = 1"
        skipped = [s for s in report.plan.skipped if limit in s.reason]
        assert len(skipped) == REPLICAS - 1
        # The API server saw exactly one eviction: one web pod is gone or going.
        remaining = {p.metadata.name for p in web_pods(cluster, namespace) if p.metadata}
        assert len(set(pods) - remaining) == 1

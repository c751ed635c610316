"""Consolidation on a real control plane (issue 43): the descheduler, as its own RBAC
user, drains an underused node through the real Eviction API; kube-scheduler places
the replacements on the used nodes (the drain taint keeps them off the drained one),
which stay under the limits; and a stand-in for the node autoscaler
(``tests/e2e/autoscaler.py``: it deletes a Node empty of all but DaemonSet pods for
2 s) removes the empty node. A pod annotated
``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` keeps its node whole and
untainted, and the stand-in leaves it. The admission policy
``loadaware-descheduler-node-writes`` lets the descheduler's ServiceAccount put its
drain taint on and off and nothing else.

Pods are placed by the real kube-scheduler; no kubelet runs them, so the test marks
them Running and Ready and finishes the evicted pods' termination (``kubelet_reap``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod

from app.descheduler.descheduler import RunResult
from app.policy import default_policy
from app.rebalance import DRAIN_TAINT_KEY, render_consolidation
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from app.rebalance.outcome import SkipCode
from app.rebalance.run_guards import CLOCK_SKEW_S
from tests.descheduler.cluster import load_annotations
from tests.e2e.autoscaler import StandInAutoscaler
from tests.e2e.descheduler import deployment, descheduler_allowed, run_once
from tests.e2e.harness import REPO, ControlPlane, scheduler_config, wait_until
from tests.e2e.test_descheduler_placement import all_bound, live_pods
from tests.e2e.test_node_annotation_policy import DENIED, MERGE, POLICY_PATHS, Api
from tests.support.cadvisor import PodSeries, cadvisor_prometheus

LOAD = {"idle": 0.10, "used-a": 0.40, "used-b": 0.40}  # CPU used, share of 4 cores
POD_CORES = 0.1  # each pod's measured usage: 2.5 % of a 4-core node
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
NODE_POLICY = (
    REPO / "deploy" / "components" / "annotator-admission-policy" / "descheduler-node-writes.yaml"
)
DESCHEDULER_SA = "system:serviceaccount:loadaware:loadaware-descheduler"
# Debounce off, fast calls, the per-workload limits open but the last Ready replica's
# (no workloadCooldown between runs, which a drain goes on in); consolidation on.
CONFIG: DeschedulerConfig = config_from_mapping({
    "consecutiveHotRounds": 1,
    "evictionsPerSecond": 50,
    "maxMigratingPerWorkload": 100,
    "maxUnavailablePerWorkload": "100%",
    "workloadCooldown": "0s",
    "consolidation": {"enabled": True},
})  # fmt: skip


def usage_series(client: Client, namespace: str) -> list[PodSeries]:
    return [
        PodSeries(namespace, name, {"app": (POD_CORES, 100 * 2**20)}, node=node)
        for name, node in live_pods(client, namespace).items()
        if node is not None
    ]


def drain_taints(client: Client, name: str) -> list[Any]:
    node = client.get(Node, name)
    taints = (node.spec.taints if node.spec else None) or []
    return [t for t in taints if t.key == DRAIN_TAINT_KEY]


def node_names(client: Client) -> set[str]:
    return {n.metadata.name or "" for n in client.list(Node) if n.metadata is not None}


def place(cluster: ControlPlane, namespace: str, workloads: list[tuple[str, Deployment]]) -> None:
    """Create each Deployment while every other node is cordoned, so that its pods land
    on its node (their replacements are then free to go anywhere), and mark all Ready."""
    client = cluster.client()
    every = {node for node, _ in workloads}
    placed = 0
    with cluster.scheduler(scheduler_config()):
        for node, workload in workloads:
            for other in sorted(every):
                client.patch(Node, other, {"spec": {"unschedulable": other != node}})
            client.create(workload)
            placed += (workload.spec.replicas or 0) if workload.spec is not None else 0
            wait_until(
                lambda wanted=placed: all_bound(client, namespace, wanted),  # type: ignore[misc]
                120,
                f"{placed} pods placed",
            )
            assert set(live_pods(client, namespace).values()) <= every
    for node in sorted(every):
        client.patch(Node, node, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == placed


def ran_a_while(cluster: ControlPlane, namespace: str, load: dict[str, float]) -> None:
    """As if the pods had run ten minutes, longer than the estimate's maxAge (5m): their
    PodScheduled condition that long ago, and fresh load readings that show them. A
    destination with pods bound within maxAge counts their estimate on top (as the
    extender does), which a node being drained at night does not meet."""
    client = cluster.client()
    # A pod of a workload created within CLOCK_SKEW_S of one of its evictions counts as
    # its replacement, which returnCooldown keeps where it is: these are older.
    time.sleep(CLOCK_SKEW_S + 1)
    then = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600))
    for pod in client.list(Pod, namespace=namespace):
        if pod.metadata is None or pod.status is None:
            continue
        conditions = [c.to_dict() for c in pod.status.conditions or []]
        for condition in conditions:
            condition["lastTransitionTime"] = then
        client.patch(Pod.Status, pod.metadata.name or "", {"status": {"conditions": conditions}},
                     namespace=namespace)  # fmt: skip
    for name, cpu in load.items():
        fresh = load_annotations(cpu, 0.2, at_s=time.time())
        client.patch(Node, name, {"metadata": {"annotations": fresh}})


def make_nodes(cluster: ControlPlane, load: dict[str, float]) -> None:
    for name, cpu in load.items():
        cluster.make_node(name, cpu="4", memory="16Gi", annotations=load_annotations(cpu, 0.2))


def test_an_underused_node_is_drained_onto_used_nodes_and_the_autoscaler_removes_it(
    cluster: ControlPlane, namespace: str
) -> None:
    # idle: 10 % used, two batch pods of 500m; used-a and used-b: 40 % used (above
    # consolidation.thresholds' 30 %: no candidates), three web pods each.
    make_nodes(cluster, LOAD)
    client = cluster.client()
    place(cluster, namespace, [
        ("idle", deployment(namespace, "batch", 2, cpu="500m")),
        ("used-a", deployment(namespace, "web-a", 3, cpu="500m")),
        ("used-b", deployment(namespace, "web-b", 3, cpu="500m")),
    ])  # fmt: skip
    ran_a_while(cluster, namespace, LOAD)
    before = live_pods(client, namespace)
    assert sorted(n for n, node in before.items() if node == "idle") == sorted(
        n for n in before if n.startswith("batch-")
    )
    batch = sorted(n for n in before if n.startswith("batch-"))
    stand_in = StandInAutoscaler(cluster.client(), empty_for_s=2.0)
    evicted: list[str] = []
    with descheduler_allowed(cluster), stand_in.running(), cluster.scheduler(scheduler_config()):
        # Run 1 starts the drain: the taint, then what may go now (the last Ready
        # replica of batch stays until its first replacement is Ready); run 2 goes on.
        for run in (1, 2):
            with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
                report = run_once(cluster, prometheus_url, CONFIG)
            assert report.result is RunResult.OK, report.message
            assert report.consolidation is not None
            drains = [(d.node, d.continued) for d in report.consolidation.drains]
            assert drains == [("idle", run > 1)], report.consolidation.kept
            assert {e.destination for e in report.consolidation.evictions} <= {"used-a", "used-b"}
            evicted += [key.split("/")[1] for key in report.evicted]
            assert report.evicted, (render_consolidation(report.consolidation), report.outcomes)
            # The drain taint went on before the evictions, and stays while it drains.
            assert [t.effect for t in drain_taints(client, "idle")] == ["NoSchedule"]
            assert "idle" not in stand_in.removed
            cluster.kubelet_reap(namespace)  # no kubelet: finish the evicted pods' termination
            wait_until(lambda: all_bound(client, namespace, 8), 120, "the replacements bound")
            cluster.kubelet_mark_ready(namespace)
        assert sorted(evicted) == batch
        after = live_pods(client, namespace)
        landed = {name: node for name, node in after.items() if name.startswith("batch-")}
        assert set(landed.values()) <= {"used-a", "used-b"}, landed
        # The used nodes stay under the policy's limits with the replacements' usage added.
        limits = {p.name: p.max_limit_fraction for p in default_policy().spec.predicate}
        for node in ("used-a", "used-b"):
            arrived = sum(1 for n in landed.values() if n == node)
            cpu = LOAD[node] + arrived * POD_CORES / 4
            assert cpu <= limits["cpu_usage_avg_5m"], (node, cpu)
            assert cpu <= CONFIG.target_thresholds["cpu"] / 100
        wait_until(lambda: "idle" in stand_in.removed, 60, "the stand-in to remove idle")
    assert "idle" not in node_names(client)
    assert not {"used-a", "used-b"} & set(stand_in.removed)


def test_a_pod_not_safe_to_evict_keeps_its_node_whole(
    cluster: ControlPlane, namespace: str
) -> None:
    make_nodes(cluster, LOAD)
    client = cluster.client()
    shy = deployment(namespace, "shy", 2, cpu="500m")
    assert shy.spec is not None
    assert shy.spec.template.metadata is not None
    shy.spec.template.metadata.annotations = {SAFE_TO_EVICT: "false"}
    place(cluster, namespace, [
        ("idle", shy),
        ("used-a", deployment(namespace, "web-a", 3, cpu="500m")),
        ("used-b", deployment(namespace, "web-b", 3, cpu="500m")),
    ])  # fmt: skip
    ran_a_while(cluster, namespace, LOAD)
    stand_in = StandInAutoscaler(cluster.client(), empty_for_s=2.0)
    with descheduler_allowed(cluster), stand_in.running():
        with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
            report = run_once(cluster, prometheus_url, CONFIG)
        assert report.result is RunResult.OK, report.message
        assert report.evicted == []
        assert report.consolidation is not None
        assert report.consolidation.drains == []
        kept = {k.node: k for k in report.consolidation.kept}
        assert kept["idle"].code is SkipCode.OPTED_OUT
        assert SAFE_TO_EVICT in kept["idle"].reason
        assert drain_taints(client, "idle") == []
        stand_in_saw = dict(stand_in.empty_since)
    assert stand_in.removed == {}
    assert "idle" not in stand_in_saw
    assert set(live_pods(client, namespace).values()) == {"idle", "used-a", "used-b"}


@contextlib.contextmanager
def node_policy(api: Api) -> Iterator[None]:
    documents = [d for d in yaml.safe_load_all(NODE_POLICY.read_text()) if d]
    base = "/apis/admissionregistration.k8s.io/v1"
    try:
        for document in documents:
            path = f"{base}/{POLICY_PATHS[document['kind']]}"
            api.send("POST", path, document).raise_for_status()
        yield
    finally:
        for document in documents:
            name = document["metadata"]["name"]
            api.send("DELETE", f"{base}/{POLICY_PATHS[document['kind']]}/{name}", None)


def test_the_descheduler_may_write_its_drain_taint_and_nothing_else_on_a_node(
    cluster: ControlPlane,
) -> None:
    cluster.make_node("n1", cpu="4", memory="16Gi", annotations=load_annotations(0.1))
    api = Api(cluster)
    # system:masters lets the request past RBAC, so that admission judges it by name.
    as_descheduler = (DESCHEDULER_SA, ["system:masters", "system:authenticated"])
    drain = {"spec": {"taints": [{"key": DRAIN_TAINT_KEY, "value": "1764400000",
                                  "effect": "NoSchedule"}]}}  # fmt: skip
    label = {"metadata": {"labels": {"example.com/x": "y"}}}
    try:
        with node_policy(api):
            wait_until(
                lambda: api.send("PATCH", "/api/v1/nodes/n1?dryRun=All", label, as_descheduler,
                                 MERGE).status_code == DENIED,
                30,
                "the policy to be enforced",
            )  # fmt: skip
            put_on = api.send("PATCH", "/api/v1/nodes/n1", drain, as_descheduler, MERGE)
            assert put_on.status_code == 200, put_on.text
            fake = {"cpu_usage_avg_5m": "0.0,2030-01-01T00:00:00Z"}
            annotated = {"metadata": {"annotations": fake}}
            refused = api.send("PATCH", "/api/v1/nodes/n1", annotated, as_descheduler, MERGE)
            assert refused.status_code == DENIED, refused.text
            assert "may not change Node annotations" in refused.text
            cordon = {"spec": {"unschedulable": True}}
            assert api.send("PATCH", "/api/v1/nodes/n1", cordon, as_descheduler,
                            MERGE).status_code == DENIED  # fmt: skip
            taken_off = api.send("PATCH", "/api/v1/nodes/n1", {"spec": {"taints": None}},
                                 as_descheduler, MERGE)  # fmt: skip
            assert taken_off.status_code == 200, taken_off.text
    finally:
        api.http.close()

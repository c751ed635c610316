"""Destinations: never a hot spot, never a node the pod cannot run on; stale data rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.objects import Resources
from app.objects.nodes import Taint
from app.objects.pods import NodeSelectorRequirement, NodeSelectorTerm, Toleration
from app.rebalance import NodeKind, plan
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod


def run(nodes: list[Any], **pod_fields: Any) -> Any:
    pods = [pod("victim", "hot", cpu=3.0, **pod_fields), pod("twin", "elsewhere", cpu=0.1)]
    return plan(cluster(nodes, pods), config(), POLICY, NOW, {})


def test_no_destination_means_no_eviction() -> None:
    result = run([node("hot", 0.9), node("busy", 0.5)])
    assert result.evictions == []
    assert any("no destination" in note for note in result.notes)


def test_a_destination_that_fails_the_load_filter_is_never_chosen() -> None:
    # cool on the 5m average, but over the policy's 1h limit (0.75): the extender rejects it
    nodes = [node("hot", 0.9), node("filtered", 0.05, cpu_1h=0.8), node("ok", 0.08)]
    result = run(nodes)
    assert [e.destination for e in result.evictions] == ["ok"]
    alone = run([node("hot", 0.9), node("filtered", 0.05, cpu_1h=0.8)])
    assert alone.evictions == []
    assert any("load filter" in s.reason for s in alone.skipped)


def test_a_destination_must_stay_at_or_under_thresholds_with_the_pods_real_usage() -> None:
    # 0.15 + 3 cores of 10 = 45 % > thresholds 40 %, though under targetThresholds 65 %
    result = run([node("hot", 0.9), node("small-room", 0.15)])
    assert result.evictions == []
    assert any("cpu would be at 45% with the pod's real usage, above 40%" in s.reason
               for s in result.skipped)
    assert [e.destination for e in run([node("hot", 0.9), node("room", 0.1)]).evictions] == [
        "room"]


@pytest.mark.parametrize(
    ("destination", "pod_fields"),
    [
        (node("d", 0.1, labels={"disk": "hdd"}), {"node_selector": {"disk": "ssd"}}),
        (node("d", 0.1, taints=[Taint("gpu", "yes", "NoSchedule")]), {}),
        (node("d", 0.1, taints=[Taint("gpu", None, "NoExecute")]),
         {"tolerations": (Toleration("gpu", "Equal", "no", None),)}),
        (node("d", 0.1, labels={"zone": "b"}), {"required_node_affinity": (NodeSelectorTerm(
            (NodeSelectorRequirement("zone", "In", ("a",)),)),)}),
        (node("d", 0.1, labels={"cores": "8"}), {"required_node_affinity": (NodeSelectorTerm(
            (NodeSelectorRequirement("cores", "Gt", ("16",)),)),)}),
        (node("d", 0.1), {"required_node_affinity": (NodeSelectorTerm((), (
            NodeSelectorRequirement("metadata.name", "NotIn", ("d",)),)),)}),
        (node("d", 0.1, unschedulable=True), {}),
        (node("d", 0.1, ready=False), {}),
    ],
)
def test_a_node_the_pod_cannot_run_on_is_no_destination(
    destination: Any, pod_fields: dict[str, Any]
) -> None:
    assert run([node("hot", 0.9), destination], **pod_fields).evictions == []


@pytest.mark.parametrize(
    ("destination", "pod_fields"),
    [
        (node("d", 0.1, labels={"disk": "ssd"}), {"node_selector": {"disk": "ssd"}}),
        (node("d", 0.1, taints=[Taint("gpu", "yes", "NoSchedule")]),
         {"tolerations": (Toleration("gpu", "Equal", "yes", "NoSchedule"),)}),
        (node("d", 0.1, taints=[Taint("gpu", "yes", "PreferNoSchedule")]), {}),
        (node("d", 0.1, labels={"cores": "32"}), {"required_node_affinity": (NodeSelectorTerm(
            (NodeSelectorRequirement("cores", "Gt", ("16",)),)),)}),
        (node("d", 0.1), {"required_node_affinity": (NodeSelectorTerm((), (
            NodeSelectorRequirement("metadata.name", "In", ("d",)),)),)}),
    ],
)
def test_a_node_the_pod_can_run_on_is_a_destination(
    destination: Any, pod_fields: dict[str, Any]
) -> None:
    result = run([node("hot", 0.9), destination], **pod_fields)
    assert [e.destination for e in result.evictions] == ["d"]


@pytest.mark.parametrize("age_s", [3600.0, -3600.0])
def test_stale_or_future_data_makes_a_node_neither_source_nor_destination(age_s: float) -> None:
    stale_hot = plan(cluster([node("hot", 0.9, age_s=age_s), node("cool", 0.1)],
                             [pod("p", "hot", cpu=3.0)]), config(), POLICY, NOW, {})
    assert stale_hot.node_classes["hot"].kind is NodeKind.NO_DATA
    assert stale_hot.evictions == []
    stale_cool = run([node("hot", 0.9), node("cool", 0.1, age_s=age_s)])
    assert stale_cool.node_classes["cool"].kind is NodeKind.NO_DATA
    assert stale_cool.evictions == []


def test_deviation_thresholds_measure_from_the_mean() -> None:
    nodes = [node("hot", 0.6), node("a", 0.3), node("b", 0.3), node("c", 0.2)]
    settings = config(useDeviationThresholds=True, thresholds={"cpu": 5},
                      targetThresholds={"cpu": 10})
    pods = [pod(f"p{i}", "hot", cpu=1.0) for i in range(6)] + [pod("twin", "a", cpu=0.1)]
    result = plan(cluster(nodes, pods), settings, POLICY, NOW, {})
    # mean 35 %: hot above 45 %, destinations at or below 30 %
    assert result.node_classes["hot"].kind is NodeKind.SOURCE
    assert result.node_classes["c"].kind is NodeKind.DESTINATION
    # each pod is 10 %: only c (20 %) can take one and stay at or under 30 %
    assert [e.destination for e in result.evictions] == ["c"]
    # the static thresholds would see no hot node at all
    assert plan(cluster(nodes, pods), config(), POLICY, NOW, {}).evictions == []


# -- workload usage (issue 42, point 6): destinations count pods as the extender does ---

DB = "default/StatefulSet/db"


def with_db_pod_on(destination: str, measured: int) -> Any:
    """A pod of a StatefulSet that requests 100m and declares no limit, bound on
    ``destination`` a minute ago; its workload published at 6 cores a pod (60 % of a
    node), measured on ``measured`` running pods."""
    nodes = [node("hot", 0.9), node(destination, 0.1)]
    pods = [
        pod("victim", "hot", cpu=2.5),
        pod("twin", "elsewhere", cpu=0.1),
        pod("db-1", destination, owner="db", owner_kind="StatefulSet", cpu=0.1,
            bound_at_s=NOW - 60),
    ]
    view = replace(
        cluster(nodes, pods),
        workload_usage={DB: Resources(6.0, 1 * GI)},
        workloads_measured={DB: measured},
    )
    return plan(view, config(), POLICY, NOW, {})


def test_a_destination_counts_its_recent_pods_at_their_workloads_usage() -> None:
    """The extender estimates db-1 at 6 cores (its workload's usage): d reads
    0.1 + 0.6 + 0.25 > 0.65 with the victim and the extender would reject the victim's
    replacement there, so the plan does not send it (d has no room left under its
    ceiling); before, the planner counted db-1 at 85m and evicted into a node the
    extender then rejected."""
    result = with_db_pod_on("d", measured=3)
    assert result.evictions == []
    assert "stopped: the destinations' headroom ran out" in result.notes


def test_a_usage_measured_on_too_few_pods_raises_no_destinations_estimate() -> None:
    """The same bounds as the extender's: measured on one pod, nothing is raised."""
    result = with_db_pod_on("d", measured=1)
    assert [e.destination for e in result.evictions] == ["d"]

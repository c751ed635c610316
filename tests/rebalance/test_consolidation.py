"""Consolidation (``app/rebalance/consolidation.py``): a node underused by requests and
real usage is drained only when every pod on it has a destination that stays under its
limits, nothing that opted out moves, and the floor of spare capacity holds."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.objects.nodes import Taint
from app.objects.pods import PodInfo
from app.rebalance import SkipCode, plan_consolidation
from app.rebalance.config import ConfigError, config_from_mapping
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def consolidating(**fields: Any) -> Any:
    settings = {"enabled": True, "minSpare": {"cpu": 10, "memory": 10}, **fields}
    return config(consolidation=settings)


def idle_and_used(**idle_fields: Any) -> tuple[list[Any], list[PodInfo]]:
    """Three 10-core nodes: "idle" (2 cores requested, 5 % used), "used-a" and
    "used-b" (5 cores requested, 35 % used: above consolidation.thresholds, so no
    candidates themselves)."""
    nodes = [node("idle", 0.05, 0.1), node("used-a", 0.35, 0.2), node("used-b", 0.35, 0.2)]
    pods = [
        pod("small-1", "idle", cpu=1.0, owner="rs-a", **idle_fields),
        pod("small-2", "idle", cpu=1.0, owner="rs-b"),
        *(pod(f"a-{i}", "used-a", cpu=1.0, owner="rs-a") for i in range(5)),
        *(pod(f"b-{i}", "used-b", cpu=1.0, owner="rs-b") for i in range(5)),
    ]
    return nodes, pods


def test_it_is_off_unless_enabled() -> None:
    nodes, pods = idle_and_used()
    result = plan_consolidation(cluster(nodes, pods), config(), POLICY, NOW)
    assert result.drains == []
    assert result.notes == ["consolidation: off (consolidation.enabled)"]


def test_the_idle_node_is_drained_onto_the_used_ones() -> None:
    nodes, pods = idle_and_used()
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert [drain.node for drain in result.drains] == ["idle"]
    moved = {e.pod.name: e.destination for e in result.evictions}
    assert set(moved) == {"small-1", "small-2"}
    assert set(moved.values()) <= {"used-a", "used-b"}
    # the used nodes take them and are never candidates themselves this run
    assert all(e.source == "idle" for e in result.evictions)


def test_the_fullest_destination_that_takes_a_pod_is_chosen() -> None:
    nodes, pods = idle_and_used()
    pods.append(pod("b-extra", "used-b", cpu=1.0, owner="rs-b"))  # used-b: 6 cores
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert {e.destination for e in result.evictions} == {"used-b"}


@pytest.mark.parametrize(
    "annotations", [{SAFE_TO_EVICT: "false"}, {DO_NOT_DISRUPT: "true"}]
)
def test_one_pod_that_opted_out_keeps_the_whole_node(annotations: dict[str, str]) -> None:
    nodes, pods = idle_and_used(annotations=annotations)
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert result.evictions == []
    kept = {k.node: k for k in result.kept}
    assert kept["idle"].code is SkipCode.OPTED_OUT
    assert result.notes[-1] == "consolidation: no underused node can be freed safely"



def test_prefer_no_eviction_does_not_keep_a_node_a_drain_empties() -> None:
    """The hint orders a hot node's victims; a drain takes every pod of its node, so the
    hinted pod moves with the others (docs/reference.md), as it would when the
    autoscaler removed the node."""
    shy = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}
    nodes, pods = idle_and_used(annotations=shy)
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert [drain.node for drain in result.drains] == ["idle"]
    assert {e.pod.name for e in result.evictions} == {"small-1", "small-2"}

@pytest.mark.parametrize(
    "annotation", [{SCALE_DOWN_DISABLED: "true"}, {DO_NOT_DISRUPT: "true"}]
)
def test_a_node_the_autoscalers_must_not_remove_is_no_candidate(
    annotation: dict[str, str],
) -> None:
    nodes, pods = idle_and_used()
    idle = nodes[0]
    nodes[0] = dataclasses.replace(idle, annotations={**idle.annotations, **annotation})
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert "idle" not in [d.node for d in result.drains]


def test_a_node_is_not_drained_when_its_pods_would_leave_another_node_hot() -> None:
    # Each idle pod uses 4 cores for real (requests 1): on a used node (35 % of 10
    # cores) it would reach 75 %, above targetThresholds 65 %: the destination would be hot.
    nodes, pods = idle_and_used()
    usage = {p.key: p.requests for p in pods}
    for name in ("small-1", "small-2"):
        usage[f"default/{name}"] = usage[f"default/{name}"].__class__(4.0, 1 * 2.0**30)
    result = plan_consolidation(cluster(nodes, pods, usage), consolidating(), POLICY, NOW)
    assert result.evictions == []
    assert {k.node: k.code for k in result.kept}["idle"] is SkipCode.NO_DESTINATION


def test_an_evenly_busy_cluster_evicts_nothing() -> None:
    nodes = [node(f"n{i}", 0.55, 0.5) for i in range(4)]
    pods = [pod(f"p{i}-{j}", f"n{i}", cpu=1.5, owner=f"rs{i}") for i in range(4) for j in range(4)]
    result = plan_consolidation(cluster(nodes, pods), consolidating(), POLICY, NOW)
    assert result.evictions == []
    assert result.notes == ["consolidation: no node is underused by requests and real usage"]


def test_the_floor_of_spare_capacity_stops_a_drain() -> None:
    nodes, pods = idle_and_used()
    # Left after the drain: 20 cores, 12 requested: 40 % spare. A floor of 50 % stops it.
    result = plan_consolidation(
        cluster(nodes, pods), consolidating(minSpare={"cpu": 50}), POLICY, NOW
    )
    assert result.evictions == []
    assert "consolidation.minSpare 50%" in result.kept[0].reason


def test_a_pdb_that_allows_no_disruption_leaves_the_pod_for_a_later_run() -> None:
    from app.objects.budgets import PodDisruptionBudgetView
    from app.objects.selectors import LabelSelector

    nodes, pods = idle_and_used(labels={"app": "guarded"})
    budget = PodDisruptionBudgetView("default", "guarded", LabelSelector({"app": "guarded"}), 0)
    result = plan_consolidation(
        cluster(nodes, pods, budgets=[budget]), consolidating(), POLICY, NOW
    )
    # the node starts draining (its other pod goes); the guarded pod waits
    assert [e.pod.name for e in result.evictions] == ["small-2"]
    later = plan_consolidation(
        cluster(nodes, [p for p in pods if p.name != "small-2"], budgets=[budget]),
        consolidating(),
        POLICY,
        NOW,
        draining={"idle"},
    )
    assert later.evictions == []


def test_a_node_being_drained_loses_the_pods_that_may_go_now() -> None:
    nodes, pods = idle_and_used()
    draining = [node("idle", 0.05, 0.1, unschedulable=True), *nodes[1:]]
    result = plan_consolidation(
        cluster(draining, pods), consolidating(), POLICY, NOW, draining={"idle"}
    )
    assert {e.pod.name for e in result.evictions} == {"small-1", "small-2"}
    assert all(e.destination != "idle" for e in result.evictions)


def test_bad_consolidation_settings_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"consolidation: .*thresholds.cpu is 120"):
        config_from_mapping({"consolidation": {"thresholds": {"cpu": 120}}}, "f")
    with pytest.raises(ConfigError, match="maxNodesPerRun"):
        config_from_mapping({"consolidation": {"maxNodesPerRun": 0}}, "f")


def test_a_run_tries_at_most_max_candidates_and_every_candidate_within_a_few_runs() -> None:
    from app.rebalance.consolidation import tried_this_run

    candidates = [node(f"n{i:02d}", 0.05) for i in range(23)]
    seen: set[str] = set()
    for run in range(7):
        tried = tried_this_run(candidates, 6, run)
        assert len(tried) == 6
        assert [n.name for n in tried[:3]] == ["n00", "n01", "n02"]  # the least requested
        seen |= {n.name for n in tried}
    assert seen == {n.name for n in candidates}  # 3 + 20 others, 3 a run: 7 runs at most
    assert tried_this_run(candidates[:4], 6, 9) == candidates[:4]


def test_pods_waiting_for_a_node_count_against_the_floor() -> None:
    nodes, pods = idle_and_used()
    # 40 % spare left after the drain (8 of 20 cores); 4 cores waiting for a node take
    # it to 20 %, under a floor of 30 %: the drain is not made, nor kept going.
    waiting = pod("waiting", "", cpu=4.0, owner="rs-c", phase="Pending", ready=False)
    floor = consolidating(minSpare={"cpu": 30, "memory": 10})
    assert plan_consolidation(cluster(nodes, pods), floor, POLICY, NOW).drains
    kept = plan_consolidation(cluster(nodes, [*pods, waiting]), floor, POLICY, NOW)
    assert kept.drains == []
    assert "consolidation.minSpare 30%" in kept.kept[0].reason
    draining = [node("idle", 0.05, 0.1, unschedulable=True), *nodes[1:]]
    given_up = plan_consolidation(cluster(draining, [*pods, waiting]), floor, POLICY, NOW,
                                  draining={"idle"})  # fmt: skip
    assert [k.node for k in given_up.abandoned] == ["idle"]
    assert given_up.evictions == []
    # handed in by the caller (the simulator): the same
    handed = plan_consolidation(cluster(nodes, pods), floor, POLICY, NOW,
                                pending=waiting.requests)  # fmt: skip
    assert handed.drains == []


def test_mixed_sizes_drain_the_small_node_onto_the_large_one() -> None:
    """A 40-core node 10 % requested and a 10-core one 20 % requested are both
    candidates: the small one is tried first and its pods go to the large one (the
    largest destination first), though the large one is the less requested. Tried the
    other way (the least requested first, the fullest destination), the large node's
    pods filled the small ones past requestThresholds, and a night of mixed sizes kept
    more nodes than its requests need (tests/fixtures/simulate/diurnal-mixed-nodes.yaml)."""
    from app.objects import Resources

    large = dataclasses.replace(node("large", 0.05, 0.1), allocatable=Resources(40.0, 256 * GI))
    nodes = [large, node("small-a", 0.05, 0.1), node("small-b", 0.35, 0.2)]
    pods = [
        *(pod(f"l-{i}", "large", cpu=1.0, owner="rs-web") for i in range(4)),
        *(pod(f"a-{i}", "small-a", cpu=1.0, owner="rs-web") for i in range(2)),
        *(pod(f"b-{i}", "small-b", cpu=1.0, owner="rs-web") for i in range(5)),
    ]
    usage = {p.key: Resources(0.2, 0.5 * GI) for p in pods}
    result = plan_consolidation(cluster(nodes, pods, usage), consolidating(), POLICY, NOW)
    assert [drain.node for drain in result.drains] == ["small-a"]
    assert {e.destination for e in result.evictions} == {"large"}


@pytest.mark.parametrize(
    ("cpu", "memory_gib", "same_as"),
    [(8.0, 32.0, (7.9, 31.2)), (32.0, 128.0, (31.5, 125.0)), (16.0, 64.0, (15.89, 62.8))],
)
def test_nodes_of_one_type_share_a_size_class_whatever_small_allocatable_differences(
    cpu: float, memory_gib: float, same_as: tuple[float, float]
) -> None:
    from app.objects import Resources
    from app.rebalance.packing_rooms import size_class

    def sized(c: float, m: float) -> Any:
        return dataclasses.replace(node("n", 0.1), allocatable=Resources(c, m * GI))

    assert size_class(sized(cpu, memory_gib)) == size_class(sized(*same_as))
    assert size_class(sized(cpu, memory_gib)) < size_class(sized(2 * cpu, 2 * memory_gib))


def mixed(*, small_requested: int, small_fields: dict[str, Any] | None = None) -> Any:
    """A 40-core node 10 % requested ("large"), a 10-core one with ``small_requested``
    one-core pods at 20 % used ("small") and a 10-core one 35 % used with 5 ("used",
    no candidate); every pod uses 0.2 cores."""
    from app.objects import Resources

    large = dataclasses.replace(node("large", 0.05, 0.1), allocatable=Resources(40.0, 256 * GI))
    nodes = [large, node("small", 0.2, 0.2), node("used", 0.35, 0.2)]
    pods = [
        *(pod(f"l-{i}", "large", cpu=1.0, owner="rs-web") for i in range(4)),
        *(
            pod(f"s-{i}", "small", cpu=1.0, owner="rs-s", **(small_fields or {}))
            for i in range(small_requested)
        ),
        *(pod(f"u-{i}", "used", cpu=1.0, owner="rs-web") for i in range(5)),
    ]
    return nodes, pods, {p.key: Resources(0.2, 0.5 * GI) for p in pods}


def test_a_small_node_full_by_its_own_measure_may_go_onto_a_large_one_with_room() -> None:
    """8 of the small node's 10 cores are requested (80 %, above requestThresholds 60 %),
    but 20 % of the largest node's 40: it is a candidate, and goes onto "large"."""
    nodes, pods, usage = mixed(small_requested=8)
    result = plan_consolidation(cluster(nodes, pods, usage), consolidating(), POLICY, NOW)
    assert "small" not in result.not_candidates
    assert [drain.node for drain in result.drains] == ["small"]
    assert {e.destination for e in result.evictions} == {"large"}
    # nodes of one size: their own allocatable, as before
    even = [node("a", 0.2, 0.2), node("b", 0.05, 0.1)]
    full = [pod(f"a-{i}", "a", cpu=1.0, owner="rs-a") for i in range(8)]
    alone = plan_consolidation(cluster(even, full), consolidating(), POLICY, NOW)
    assert "requestThresholds" in alone.not_candidates["a"]


def test_no_larger_node_is_drained_while_a_smaller_one_waits_for_its_pdb() -> None:
    from app.objects.budgets import PodDisruptionBudgetView
    from app.objects.selectors import LabelSelector

    nodes, pods, usage = mixed(small_requested=2, small_fields={"labels": {"app": "guarded"}})
    budget = PodDisruptionBudgetView("default", "guarded", LabelSelector({"app": "guarded"}), 0)
    result = plan_consolidation(
        cluster(nodes, pods, usage, budgets=[budget]), consolidating(), POLICY, NOW
    )
    assert result.drains == []
    kept = {k.node: k.reason for k in result.kept}
    assert kept["large"] == "waits for the smaller small to drain first"


def test_no_new_drain_while_the_node_autoscaler_removes_nodes_of_its_own() -> None:
    from app.objects.nodes import Taint

    def candidate_of_the_autoscaler(set_s: float) -> Any:
        taint = Taint("DeletionCandidateOfClusterAutoscaler", str(int(set_s)), "PreferNoSchedule")
        return node("going", 0.05, 0.1, taints=[taint])

    nodes, pods = idle_and_used()
    paused = plan_consolidation(
        cluster([*nodes, candidate_of_the_autoscaler(NOW - 60)], pods), consolidating(), POLICY, NOW
    )
    assert paused.drains == []
    assert "the node autoscaler is removing 1 node(s) of its own (going)" in paused.notes[-1]
    assert {k.node: k.reason for k in paused.kept}["idle"].startswith(
        "waits while the node autoscaler removes nodes of its own"
    )
    # a taint set longer ago than abandonAfter (30m): the autoscaler is not removing it
    stale = plan_consolidation(
        cluster([*nodes, candidate_of_the_autoscaler(NOW - 7200)], pods),
        consolidating(),
        POLICY,
        NOW,
    )
    assert [drain.node for drain in stale.drains] == ["idle"]


@pytest.mark.parametrize(
    ("key", "value", "fresh"),
    [("ToBeDeletedByClusterAutoscaler", str(int(NOW - 60)), True),
     ("DeletionCandidateOfClusterAutoscaler", str(int(NOW - 60)), True),
     ("ToBeDeletedByClusterAutoscaler", str(int(NOW - 7200)), False),
     ("ToBeDeletedByClusterAutoscaler", str(int(NOW + 7200)), False),
     ("ToBeDeletedByClusterAutoscaler", "soon", False),
     ("ToBeDeletedByClusterAutoscaler", "nan", False),
     ("ToBeDeletedByClusterAutoscaler", "1e400", False),
     ("ToBeDeletedByClusterAutoscaler", None, False),
     ("karpenter.sh/disrupted", None, True), ("karpenter.sh/disrupted", "", True)],
)  # fmt: skip
def test_a_removal_taint_counts_while_its_time_is_fresh(
    key: str, value: str | None, fresh: bool
) -> None:
    from app.rebalance.consolidation import removing_on_its_own

    taint = Taint(key, value, "NoSchedule")
    tainted = [node("n", 0.05, taints=[taint])]
    assert removing_on_its_own(tainted, (), NOW, 1800.0) == (["n"] if fresh else [])
    assert removing_on_its_own(tainted, {"n"}, NOW, 1800.0) == []  # drained by loadaware

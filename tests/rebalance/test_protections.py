"""Every protection, limit and guard: a table of pods that must stay, and why."""

from __future__ import annotations

from typing import Any

import pytest

from app.objects.budgets import PodDisruptionBudgetView
from app.objects.evictions import EvictionRecord
from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.objects.selectors import LabelSelector
from app.rebalance import NodeKind, PlannerState, SkipCode, observe_round, plan
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod

NODES = [node("hot", 0.9), node("cool", 0.1)]


def victim(**fields: Any) -> PodInfo:
    return pod("victim", "hot", cpu=3.0, **fields)


def companions() -> list[PodInfo]:
    # another Ready replica elsewhere, so the victim is not the last one
    return [pod("victim-twin", "cool", cpu=0.1)]


@pytest.mark.parametrize(
    ("fields", "settings", "reason"),
    [
        ({"is_mirror": True}, {}, "mirror"),
        ({"owner_kind": "DaemonSet"}, {}, "DaemonSet"),
        ({"terminating": True}, {}, "terminating"),
        ({"priority": 2_000_000_000}, {}, "system-critical"),
        ({"priority": 500}, {"priorityThreshold": {"value": 100}}, "priorityThreshold"),
        ({"local_storage": True}, {}, "local storage"),
        ({"uses_pvc": True}, {}, "PersistentVolumeClaim"),
        ({"owner": None}, {}, "bare pod"),
        ({"namespace": "kube-system"}, {}, "not evictable"),
        ({"namespace": "shop"}, {"evictableNamespaces": {"include": ["web"]}}, "not evictable"),
        ({"created_s": NOW - 60}, {"minPodAge": "10m"}, "minPodAge"),
        ({}, {"minReplicas": 3}, "minReplicas"),
    ],
)
def test_a_protected_pod_is_never_evicted(
    fields: dict[str, Any], settings: dict[str, Any], reason: str
) -> None:
    pods = [victim(**fields), *companions()]
    result = plan(cluster(NODES, pods), config(**settings), POLICY, NOW, {})
    assert result.evictions == []
    assert any(reason in s.reason for s in result.skipped if s.pod_key.endswith("/victim"))


@pytest.mark.parametrize(
    ("fields", "settings"),
    [
        ({"local_storage": True}, {"evictLocalStoragePods": True}),
        ({"uses_pvc": True}, {"ignorePvcPods": False}),
        ({"owner": None}, {"evictBarePods": True}),
        ({"priority": 2_000_000_000}, {"evictSystemCriticalPods": True}),
        (
            {"local_storage": True, "annotations": {"descheduler.alpha.kubernetes.io/evict": "1"}},
            {},
        ),
    ],
)
def test_allowing_a_protection_lets_the_pod_move(
    fields: dict[str, Any], settings: dict[str, Any]
) -> None:
    pods = [victim(**fields), *companions()]
    result = plan(cluster(NODES, pods), config(**settings), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["victim"]


def test_the_last_ready_replica_stays_unless_allowed() -> None:
    pods = [victim()]
    assert plan(cluster(NODES, pods), config(), POLICY, NOW, {}).evictions == []
    allowed = plan(cluster(NODES, pods), config(evictLastReplica=True), POLICY, NOW, {})
    assert len(allowed.evictions) == 1


def test_prefer_no_eviction_pods_go_last() -> None:
    shy: dict[str, Any] = {
        "annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}
    }
    pods = [pod("a-shy", "hot", cpu=3.0, **shy), pod("b", "hot", cpu=3.0), *companions()]
    result = plan(cluster(NODES, pods), config(), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["b"]


def many(count: int, **fields: Any) -> list[PodInfo]:
    return [pod(f"p{i}", "hot", cpu=0.5, **fields) for i in range(count)] + companions()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"maxNoOfPodsToEvictPerNode": 2}, 2),
        ({"maxNoOfPodsToEvictPerNamespace": 1}, 1),
        ({"maxNoOfPodsToEvictTotal": 3}, 3),
        ({}, 5),  # 90 % -> 65 % of 10 cores: five pods of 0.5
    ],
)
def test_limits_cap_the_evictions(settings: dict[str, Any], expected: int) -> None:
    result = plan(cluster(NODES, many(12)), config(**settings), POLICY, NOW, {})
    assert len(result.evictions) == expected


def test_a_pdb_caps_the_evictions_it_covers() -> None:
    pdb = PodDisruptionBudgetView("default", "web", LabelSelector({"app": "web"}), 2)
    pods = many(12, labels={"app": "web"})
    result = plan(cluster(NODES, pods, budgets=[pdb]), config(), POLICY, NOW, {})
    assert len(result.evictions) == 2
    assert any("PodDisruptionBudget web" in s.reason for s in result.skipped)
    # The metric label is the fixed code; the budget's name stays in the text only.
    assert {s.code for s in result.skipped if "PodDisruptionBudget" in s.reason} == {SkipCode.PDB}


def test_each_pdb_caps_the_pods_of_its_own_namespace_and_labels() -> None:
    """Budgets are matched once per namespace and set of labels: pods alike in labels
    but in another namespace, or in the same namespace with other labels, are capped by
    their own budget (or none), not by the one matched first."""
    budgets = [
        PodDisruptionBudgetView("default", "web", LabelSelector({"app": "web"}), 2),
        PodDisruptionBudgetView("shop", "web", LabelSelector({"app": "web"}), 1),
    ]
    pods = [
        *(pod(f"web-{i}", "hot", owner="web", labels={"app": "web"}) for i in range(3)),
        *(pod(f"web-{i}", "hot", namespace="shop", owner="web", labels={"app": "web"})
          for i in range(3)),
        *(pod(f"api-{i}", "hot", owner="api", labels={"app": "api"}) for i in range(3)),
        *companions(),
    ]
    result = plan(cluster(NODES, pods, budgets=budgets), config(), POLICY, NOW, {})
    evicted = [(e.pod.namespace, e.pod.labels["app"]) for e in result.evictions]
    # Each workload keeps its last Ready replica; the budgets cap below that.
    assert sorted(evicted) == [("default", "api")] * 2 + [("default", "web")] * 2 + [
        ("shop", "web")]
    capped = [s.pod_key for s in result.skipped if s.code is SkipCode.PDB]
    assert capped == ["default/web-2"]  # the node was cool enough before shop's third


def test_a_workload_evicted_recently_cools_down() -> None:
    record = EvictionRecord(
        "default/old", "u", "hot", "cool", Resources(0.5, GI), NOW - 60, "default/ReplicaSet/rs"
    )
    # the record is older than the node's sample plus settle time: no convergence effect
    result = plan(
        cluster(NODES, many(12), recent=[record]), config(settleTime="0s"), POLICY, NOW, {}
    )
    assert result.evictions == []
    assert any("cooldown" in s.reason for s in result.skipped)
    assert SkipCode.COOLDOWN in {s.code for s in result.skipped}
    later = plan(
        cluster(NODES, many(12), recent=[record]),
        config(settleTime="0s", workloadCooldown="30s"),
        POLICY,
        NOW,
        {},
    )
    assert len(later.evictions) == 5


def test_a_node_becomes_a_source_only_after_consecutive_hot_rounds() -> None:
    view = cluster(NODES, many(12))
    settings = config(consecutiveHotRounds=3)
    state = PlannerState()
    kinds = []
    for _ in range(3):
        result = plan(view, settings, POLICY, NOW, state.hot_rounds)
        kinds.append(result.node_classes["hot"].kind)
        state = observe_round(state, result.node_classes)
    assert kinds == [NodeKind.DEBOUNCING, NodeKind.DEBOUNCING, NodeKind.SOURCE]
    assert result.evictions
    cooled = [node("hot", 0.5), node("cool", 0.1)]
    state = observe_round(
        state,
        plan(cluster(cooled, many(12)), settings, POLICY, NOW, state.hot_rounds).node_classes,
    )
    assert state.hot_rounds == {}


SHIPPED_WORKLOAD_LIMITS = {"maxMigratingPerWorkload": 1, "maxUnavailablePerWorkload": "10%"}


def replicas(count: int, *, not_ready: int = 0) -> list[PodInfo]:
    """A 10-replica ReplicaSet, all on the hot node, without a PDB."""
    return [
        pod(f"web-{i}", "hot", cpu=0.5, owner="web-rs", ready=i >= not_ready) for i in range(count)
    ]


def test_one_run_evicts_at_most_max_migrating_per_workload() -> None:
    result = plan(cluster(NODES, replicas(10)), config(**SHIPPED_WORKLOAD_LIMITS), POLICY, NOW, {})
    assert len(result.evictions) == 1
    limited = [s for s in result.skipped if s.code is SkipCode.WORKLOAD_LIMIT]
    assert len(limited) == 9
    assert "maxMigratingPerWorkload 1" in limited[0].reason
    wider = config(maxMigratingPerWorkload=3, maxUnavailablePerWorkload=3)
    assert len(plan(cluster(NODES, replicas(10)), wider, POLICY, NOW, {}).evictions) == 3


def test_a_replica_not_ready_yet_counts_as_unavailable() -> None:
    """A replacement still starting is unavailable: with 10% of 10 (= 1) allowed and one
    pod not Ready, no Ready pod of the workload is evicted."""
    pods = replicas(10, not_ready=1)
    per_run = config(maxMigratingPerWorkload=5, maxUnavailablePerWorkload="10%")
    result = plan(cluster(NODES, pods), per_run, POLICY, NOW, {})
    assert all(not eviction.pod.ready for eviction in result.evictions)
    refused = [s for s in result.skipped if s.code is SkipCode.WORKLOAD_UNAVAILABLE]
    assert refused
    assert "1 of 10 pods not Ready" in refused[0].reason
    # With every replica Ready, the same workload loses one.
    ready = plan(cluster(NODES, replicas(10)), config(**SHIPPED_WORKLOAD_LIMITS), POLICY, NOW, {})
    assert [e.pod.ready for e in ready.evictions] == [True]


def test_a_small_workload_loses_at_most_one_replica_at_a_time_by_default() -> None:
    result = plan(cluster(NODES, replicas(3)), config(**SHIPPED_WORKLOAD_LIMITS), POLICY, NOW, {})
    assert len(result.evictions) == 1


@pytest.mark.parametrize(
    ("value", "allowed"),
    [("1", {10: 1}), ("10%", {10: 1, 3: 1, 40: 4}), ("25%", {10: 2}), (2, {10: 2})],
)
def test_max_unavailable_per_workload_is_a_count_or_a_percentage(
    value: Any, allowed: dict[int, int]
) -> None:
    from app.rebalance.config import unavailable_allowed

    setting = config(maxUnavailablePerWorkload=value).max_unavailable_per_workload
    for replica_count, expected in allowed.items():
        assert unavailable_allowed(setting, replica_count) == expected


@pytest.mark.parametrize("value", ["0", "0%", "101%", "ten", True, 1.5, "-1"])
def test_a_bad_max_unavailable_per_workload_is_refused(value: Any) -> None:
    from app.rebalance.config import ConfigError

    with pytest.raises(ConfigError, match="maxUnavailablePerWorkload"):
        config(maxUnavailablePerWorkload=value)

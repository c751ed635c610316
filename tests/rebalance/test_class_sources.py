"""Where a class of pods is hot, the descheduler moves lower classes first (issue 45)."""

from __future__ import annotations

from app.objects.resources import Resources
from app.policy import default_policy, policy_from_mapping
from app.rebalance import NodeKind, plan
from app.rebalance.outcome import SkipCode
from tests.rebalance.builders import GI, NOW, cluster, config, node, pod

CLASSED = policy_from_mapping(
    {
        "spec": {
            "syncPolicy": [
                {"name": "cpu_usage_avg_5m", "period": "3m"},
                {"name": "mem_usage_avg_5m", "period": "3m"},
            ],
            "predicate": [
                {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65},
                {"name": "mem_usage_avg_5m", "maxLimitPecent": 0.65},
            ],
            "classes": [
                {
                    "name": "production",
                    "minPriority": 9000,
                    "maxPriority": 9999,
                    "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.55}],
                },
                {
                    "name": "batch",
                    "minPriority": 5000,
                    "maxPriority": 5999,
                    "predicate": [
                        {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.9},
                        {"name": "mem_usage_avg_5m", "maxLimitPecent": 0.9},
                    ],
                },
            ],
        }
    }
)


def pods_and_nodes() -> tuple[list, list]:  # type: ignore[type-arg]
    nodes = [node("mixed", 0.6), node("batchy", 0.8), node("cool", 0.1)]
    pods = [
        pod("web", "mixed", owner="web", cpu=3.0, priority=9500),
        pod("job-a", "mixed", owner="jobs", cpu=1.5, priority=5500),
        pod("job-b", "mixed", owner="jobs", cpu=1.5, priority=5500),
        *(pod(f"etl-{i}", "batchy", owner=f"etl-{i}", cpu=2.0, priority=5100) for i in range(4)),
    ]
    return nodes, pods


def usage_of(pods: list) -> dict[str, Resources]:  # type: ignore[type-arg]
    return {p.key: Resources(p.requests.cpu_cores, 1 * GI) for p in pods}


def test_batch_moves_off_a_node_where_production_is_over_its_own_limit() -> None:
    nodes, pods = pods_and_nodes()
    result = plan(cluster(nodes, pods, usage_of(pods)), config(), CLASSED, NOW, {})
    assert result.node_classes["mixed"].kind is NodeKind.SOURCE
    assert "class production is hot" in result.node_classes["mixed"].reason
    moved = {e.pod.name for e in result.evictions}
    assert len(moved) == 1  # 60 % -> under 55 %: one batch pod of 15 %
    assert moved <= {"job-a", "job-b"}
    kept = [s for s in result.skipped if s.pod_key == "default/web"]
    assert kept
    assert kept[0].code is SkipCode.PROTECTED


def test_a_batch_node_within_the_batch_limits_is_left_alone() -> None:
    nodes, pods = pods_and_nodes()
    result = plan(cluster(nodes, pods, usage_of(pods)), config(), CLASSED, NOW, {})
    batchy = result.node_classes["batchy"]
    assert batchy.kind is NodeKind.NEUTRAL  # 80 % > targetThresholds 65 %, < batch's 90 %
    assert "within the limits of its pods' classes (batch)" in batchy.reason
    assert not [e for e in result.evictions if e.source == "batchy"]


def test_without_classes_the_same_cluster_is_judged_by_targetthresholds_alone() -> None:
    nodes, pods = pods_and_nodes()
    result = plan(cluster(nodes, pods, usage_of(pods)), config(), default_policy(), NOW, {})
    assert result.node_classes["mixed"].kind is not NodeKind.SOURCE  # 60 % < 65 %
    assert result.node_classes["batchy"].kind is NodeKind.SOURCE


def test_a_batch_node_past_the_batch_limits_sheds_down_to_them_not_to_targetthresholds() -> None:
    nodes = [node("batchy", 0.95), node("cool", 0.1)]
    pods = [pod(f"etl-{i}", "batchy", owner="etl", cpu=1.9, priority=5100) for i in range(5)]
    result = plan(cluster(nodes, pods, usage_of(pods)), config(), CLASSED, NOW, {})
    batchy = result.node_classes["batchy"]
    assert batchy.kind is NodeKind.SOURCE
    assert batchy.high_fraction["cpu"] == 0.9  # batch's limit, not targetThresholds' 65 %
    assert len(result.evictions) == 1  # 95 % -> 76 %: one pod of 19 % does it

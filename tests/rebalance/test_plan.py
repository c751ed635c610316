"""The planning pass on small clusters: who moves, where, and why not."""

from __future__ import annotations

from app.objects.evictions import EvictionRecord
from app.objects.resources import Resources
from app.rebalance import NodeKind, plan, render_plan
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod


def hot_cluster(pods_on_hot: int = 10) -> tuple[list, list]:  # type: ignore[type-arg]
    nodes = [node("hot", 0.85), node("cool-a", 0.2), node("cool-b", 0.25)]
    # ten pods of 0.8 cores each with uniform requests: the hot node is 85 % of 10 cores
    pods = [pod(f"web-{i}", "hot", owner="web") for i in range(pods_on_hot)]
    pods += [pod(f"web-a{i}", "cool-a", owner="web") for i in range(2)]
    return nodes, pods


def measured(pods: list) -> dict[str, Resources]:  # type: ignore[type-arg]
    return {p.key: Resources(0.8, 1 * GI) for p in pods}


def test_one_hot_node_sheds_just_enough_pods_to_get_under_the_threshold() -> None:
    nodes, pods = hot_cluster()
    result = plan(cluster(nodes, pods, measured(pods)), config(), POLICY, NOW, {})
    # 85 % -> 65 % needs 2 cores off a 10-core node: three pods of 0.8 (two leave 69 %)
    assert len(result.evictions) == 3
    assert {e.source for e in result.evictions} == {"hot"}
    assert result.node_classes["hot"].kind is NodeKind.SOURCE
    after = result.evictions[-1].metric_values["cpu_usage_avg_5m after"]
    assert after <= 0.65 < result.evictions[-2].metric_values["cpu_usage_avg_5m after"]
    # spread: the roomiest destination first, not all on one node
    assert {e.destination for e in result.evictions} == {"cool-a", "cool-b"}
    assert all(e.usage_from == "prometheus" for e in result.evictions)


def test_a_second_plan_with_the_first_plans_evictions_evicts_nothing() -> None:
    nodes, pods = hot_cluster()
    first = plan(cluster(nodes, pods, measured(pods)), config(), POLICY, NOW, {})
    records = [
        EvictionRecord(e.pod.key, e.pod.uid, e.source, e.destination, e.usage, NOW, None)
        for e in first.evictions
    ]
    evicted = {e.pod.key for e in first.evictions}
    remaining = [p for p in pods if p.key not in evicted]
    second = plan(cluster(nodes, remaining, measured(remaining), recent=records), config(),
                  POLICY, NOW + 60, {})
    assert second.evictions == []
    assert second.node_classes["hot"].kind is NodeKind.NEUTRAL


def test_the_dry_run_table_names_sources_victims_and_skips() -> None:
    nodes, pods = hot_cluster()
    pods.append(pod("db", "hot", local_storage=True, owner="db"))
    text = render_plan(plan(cluster(nodes, pods, measured(pods)), config(), POLICY, NOW, {}))
    assert "hot" in text
    assert "default/web-9" in text or "default/web-0" in text
    assert "local storage" in text
    assert "prometheus" in text

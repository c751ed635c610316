"""Node pools in the descheduler's configuration: each pool's nodes classified by its own
thresholds (koordinator LowNodeLoad's nodePools), the rest by the configuration's, and
bad pools refused at load in one line."""

from __future__ import annotations

from typing import Any

import pytest

from app.objects.resources import Resources
from app.policy import DEFAULT_POLICY_YAML, policy_from_yaml
from app.rebalance import ConfigError, NodeKind, config_from_mapping, plan, pool_of
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod
from tests.support.pools import policy_with_pools

GPU = {"pool": "gpu"}
GENERAL = {"pool": "general"}
POOLS = [
    {
        "name": "gpu",
        "nodeSelector": {"matchLabels": GPU},
        "thresholds": {"cpu": 20},
        "targetThresholds": {"cpu": 40},
    },
    {
        "name": "general",
        "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In",
                                               "values": ["general"]}]},
        "thresholds": {"cpu": 60},
        "targetThresholds": {"cpu": 85},
    },
]  # fmt: skip


def test_each_node_is_classified_by_its_pool_s_thresholds() -> None:
    nodes = [
        node("gpu-1", 0.5, labels=GPU),  # above the gpu pool's 40
        node("gpu-2", 0.15, labels=GPU),  # at or below its 20
        node("general-1", 0.5, labels=GENERAL),  # at or below the general pool's 60
        node("general-2", 0.7, labels=GENERAL),  # between 60 and 85
        node("plain-1", 0.5),  # the configuration's own: between 40 and 65
        node("plain-2", 0.7),  # above 65
    ]
    result = plan(cluster(nodes, []), config(nodePools=POOLS), POLICY, NOW, {})
    kinds = {name: c.kind for name, c in result.node_classes.items()}
    assert kinds == {
        "gpu-1": NodeKind.SOURCE,
        "gpu-2": NodeKind.DESTINATION,
        "general-1": NodeKind.DESTINATION,
        "general-2": NodeKind.NEUTRAL,
        "plain-1": NodeKind.NEUTRAL,
        "plain-2": NodeKind.SOURCE,
    }
    gpu = result.node_classes["gpu-1"]
    assert (dict(gpu.high_fraction), dict(gpu.low_fraction)) == (
        {"cpu": 0.40, "memory": 0.75},  # memory: the configuration's, the pool names none
        {"cpu": 0.20, "memory": 0.50},
    )


def test_a_hot_pool_node_sheds_pods_until_it_is_under_its_pool_s_target() -> None:
    nodes = [node("gpu-1", 0.56, labels=GPU), node("general-1", 0.3, labels=GENERAL),
             node("general-2", 0.35, labels=GENERAL)]  # fmt: skip
    pods = [pod(f"web-{i}", "gpu-1", owner="web") for i in range(7)]
    usage = {p.key: Resources(0.8, 1 * GI) for p in pods}
    result = plan(cluster(nodes, pods, usage), config(nodePools=POOLS), POLICY, NOW, {})
    # 56 % -> 40 % of 10 cores: two pods of 0.8 (one leaves 48 %).
    assert len(result.evictions) == 2
    assert result.evictions[-1].metric_values["cpu_usage_avg_5m after"] <= 0.40
    assert {e.destination for e in result.evictions} <= {"general-1", "general-2"}
    # Without the pools, 56 % is under the configuration's 65: nothing moves.
    assert plan(cluster(nodes, pods, usage), config(), POLICY, NOW, {}).evictions == []


def test_a_destination_is_judged_by_its_pool_s_limits_in_the_policy() -> None:
    """The planner's check that the extender would take the pod uses the destination's
    pool's limits: here the general pool's looser one admits a node the policy's own
    0.65 would refuse."""
    policy = policy_from_yaml(
        DEFAULT_POLICY_YAML
        + """  nodePools:
    - name: general
      nodeSelector: {matchLabels: {pool: general}}
      predicate:
        - {name: cpu_usage_avg_5m, maxLimitPercent: 0.9}
        - {name: cpu_usage_max_avg_1h, maxLimitPercent: 0.9}
"""
    )
    nodes = [node("gpu-1", 0.56, labels=GPU), node("general-1", 0.6, labels=GENERAL)]
    pods = [pod(f"web-{i}", "gpu-1", owner="web") for i in range(7)]
    usage = {p.key: Resources(0.8, 1 * GI) for p in pods}
    view = cluster(nodes, pods, usage)
    # The general pool's nodes may take pods up to 80 % by the configuration.
    pools = [POOLS[0], {**POOLS[1], "thresholds": {"cpu": 80}, "targetThresholds": {"cpu": 90}}]
    with_pools = plan(view, config(nodePools=pools), policy, NOW, {})
    assert [e.destination for e in with_pools.evictions] == ["general-1", "general-1"]
    # Under the policy's own limits, general-1 at 60 % + 8 % is refused at 0.65.
    without = plan(view, config(nodePools=pools), POLICY, NOW, {})
    assert without.evictions == []


def test_deviation_thresholds_are_measured_from_each_pool_s_own_mean() -> None:
    nodes = [node("gpu-1", 0.30, labels=GPU), node("gpu-2", 0.10, labels=GPU),
             node("general-1", 0.80, labels=GENERAL),
             node("general-2", 0.60, labels=GENERAL)]  # fmt: skip
    pools = [{**p, "thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 5}} for p in POOLS]
    result = plan(
        cluster(nodes, []),
        config(nodePools=pools, useDeviationThresholds=True,
               thresholds={"cpu": 5}, targetThresholds={"cpu": 5}),
        POLICY, NOW, {},
    )  # fmt: skip
    classes = result.node_classes
    assert classes["gpu-1"].high_fraction["cpu"] == pytest.approx(0.25)  # mean 0.2 + 0.05
    assert classes["general-1"].high_fraction["cpu"] == pytest.approx(0.75)  # 0.7 + 0.05
    assert classes["gpu-1"].kind is NodeKind.SOURCE
    assert classes["gpu-2"].kind is NodeKind.DESTINATION
    assert classes["general-1"].kind is NodeKind.SOURCE


def test_a_node_two_pools_select_gets_the_configuration_s_thresholds() -> None:
    zone = {"name": "zone-a", "nodeSelector": {"matchLabels": {"zone": "a"}},
            "thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 10}}  # fmt: skip
    settings = config(nodePools=[*POOLS, zone])
    both = node("both", 0.5, labels={**GPU, "zone": "a"})
    assert pool_of(settings, both).overlap == ("gpu", "zone-a")
    result = plan(cluster([both, node("cool", 0.1)], []), settings, POLICY, NOW, {})
    # The configuration's own 65 %, neither the gpu pool's 40 nor the zone's 10.
    assert result.node_classes["both"].kind is NodeKind.NEUTRAL
    assert result.node_classes["both"].high_fraction["cpu"] == pytest.approx(0.65)


def _pool(**changes: Any) -> dict[str, Any]:
    return {**POOLS[0], **changes}


@pytest.mark.parametrize(
    ("pools", "says"),
    [
        ([_pool(), _pool(name="b")], "'gpu' and 'b' have the same nodeSelector"),
        ([_pool(), _pool(name="b", nodeSelector={"matchLabels": {**GPU, "zone": "a"}})],
         "'gpu' selects every node that 'b' selects"),
        ([_pool(), _pool(nodeSelector={"matchLabels": {"x": "y"}})], "names pool 'gpu' twice"),
        ([_pool(thresholds={"cpu": 50})], "thresholds.cpu (50) is above targetThresholds.cpu (40)"),
        ([_pool(thresholds={}, targetThresholds={})], "sets neither"),
        ([_pool(targetThresholds={"cpu": 140})], "give a percentage from 0 to 100"),
        ([_pool(targetThresholds={"gpu": 40})], "targetThresholds.gpu"),
        ([_pool(nodeSelector={})], "nodeSelector is empty"),
        ([_pool(nodeSelector="pool=gpu")], "nodeSelector"),
        ([_pool(name="Bad Name")], "name"),
        ([_pool(extra=1)], "extra"),
    ],
)
def test_bad_pools_are_refused_at_load_in_one_line(pools: list[Any], says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config_from_mapping({"nodePools": pools}, "config.yaml")
    message = str(raised.value)
    assert says in message
    assert "\n" not in message


def test_a_pool_may_not_name_a_resource_the_configuration_does_not_balance() -> None:
    with pytest.raises(ConfigError, match="memory, which targetThresholds does not balance"):
        config_from_mapping(
            {"thresholds": {"cpu": 40}, "targetThresholds": {"cpu": 65},
             "nodePools": [_pool(targetThresholds={"memory": 50})]}
        )


POLICY_POOLS = policy_with_pools({"gpu": ({"pool": "gpu"}, 0.4), "batch": ({"pool": "batch"}, 0.8)})


def test_each_pool_s_thresholds_are_checked_against_the_policy_s_pool_of_its_name() -> None:
    from app.rebalance import threshold_conflicts

    # gpu: 40 against the policy's gpu 0.4 agrees. general: no policy pool of that name,
    # so against the policy's own 0.65: its targetThresholds 85 is above, fine, but its
    # thresholds 60 agree too. batch: only in the policy; the configuration's own 65
    # lies below its 0.8, so pods bounce.
    conflicts = threshold_conflicts(config(nodePools=POOLS), POLICY_POOLS)
    assert len(conflicts) == 1, conflicts
    assert conflicts[0].startswith(
        "the policy's nodePools 'batch' (no pool of that name in the configuration): pods "
        "bounce on cpu: targetThresholds.cpu is 65% but the policy's cpu_usage_avg_5m "
        "maxLimitPercent is 80%"
    )
    strict = [{**POOLS[0], "targetThresholds": {"cpu": 30}}]
    said = threshold_conflicts(config(nodePools=strict), POLICY_POOLS)
    assert any(
        c.startswith("nodePools 'gpu': pods bounce on cpu: targetThresholds.cpu is 30%")
        for c in said
    ), said

"""The annotator's soft taints judge each node by its node pool's limits
(app/policy/pools.py), and a node two pools select by the policy's own, said once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.annotator.softtaints import SoftTaintKeeper
from app.annotator.telemetry import AnnotatorMetrics
from app.load import format_usage
from app.load.taints import SoftTaintSettings
from app.objects import NodeInfo, Resources
from app.policy import DEFAULT_POLICY_YAML, Policy, policy_from_yaml
from tests.annotator.helpers import Writer

NOW_S = 1_800_000_000.0
POOLS = policy_from_yaml(
    DEFAULT_POLICY_YAML
    + """  nodePools:
    - name: gpu
      nodeSelector: {matchLabels: {pool: gpu}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.4}]
    - name: general
      nodeSelector: {matchLabels: {pool: general}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.9},
                  {name: cpu_usage_max_avg_1h, maxLimitPercent: 0.9}]
    - name: zone-a
      nodeSelector: {matchLabels: {zone: a}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.3}]
"""
)


def at(name: str, cpu: float, labels: dict[str, str]) -> NodeInfo:
    annotations = {
        metric: format_usage(cpu if metric.startswith("cpu") else 0.2, NOW_S - 30)
        for metric in POOLS.metrics
    }
    return NodeInfo(name, annotations, None, labels=labels, allocatable=Resources(8.0, 32 * 2**30))


def tainted(
    nodes: list[NodeInfo], policy: Policy, keeper: SoftTaintKeeper | None = None
) -> list[str]:
    keeper = keeper or SoftTaintKeeper(
        Writer(),  # type: ignore[arg-type]
        SoftTaintSettings(max_share=1.0),
        telemetry=AnnotatorMetrics(),
        clock=lambda: NOW_S,
    )
    report = asyncio.run(keeper.run_round({n.name: n for n in nodes}, policy))
    return sorted(report.decided.tainted)


NODES = [
    at("gpu-1", 0.5, {"pool": "gpu"}),  # over its pool's 0.4, under the policy's 0.65
    at("general-1", 0.8, {"pool": "general"}),  # over 0.65, under its pool's 0.9
    at("plain-1", 0.7, {}),  # over the policy's own 0.65
    at("plain-2", 0.5, {}),
]


def test_each_node_is_tainted_at_its_pool_s_limit() -> None:
    assert tainted(NODES, POOLS) == ["gpu-1", "plain-1"]
    # The same nodes under the policy without pools: the policy's own 0.65 for all.
    plain = policy_from_yaml(DEFAULT_POLICY_YAML)
    assert tainted(NODES, plain) == ["general-1", "plain-1"]


def test_a_node_two_pools_select_follows_the_policy_s_own_limits_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    both = at("both", 0.5, {"pool": "gpu", "zone": "a"})  # under 0.65; over 0.4 and 0.3
    keeper = SoftTaintKeeper(
        Writer(),  # type: ignore[arg-type]
        SoftTaintSettings(max_share=1.0),
        telemetry=AnnotatorMetrics(),
        clock=lambda: NOW_S,
    )
    with caplog.at_level(logging.ERROR, logger="app.annotator.softtaints"):
        assert tainted([both, *NODES], POOLS, keeper) == ["gpu-1", "plain-1"]
        tainted([both, *NODES], POOLS, keeper)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1
    assert "node both is selected by node pools gpu, zone-a" in said[0]


def test_a_policy_that_limits_only_in_a_pool_still_limits_something() -> None:
    from app.annotator.softtaints import limits_any

    only_pools = policy_from_yaml(
        DEFAULT_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0").replace(
            "maxLimitPecent: 0.75", "maxLimitPecent: 0"
        )
        + """  nodePools:
    - name: gpu
      nodeSelector: {matchLabels: {pool: gpu}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.4}]
"""
    )
    assert not only_pools.limits
    assert limits_any(only_pools)
    assert tainted([at("gpu-1", 0.5, {"pool": "gpu"}), at("plain", 0.9, {})], only_pools) == [
        "gpu-1"
    ]
    nothing = policy_from_yaml(
        DEFAULT_POLICY_YAML.replace("0.65", "0").replace("0.75", "0")
        + """  nodePools:
    - name: gpu
      nodeSelector: {matchLabels: {pool: gpu}}
      predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0}]
"""
    )
    assert not limits_any(nothing)

"""The autoscalers' opt-outs keep a pod where it is, in the plan and in the live re-check."""

from __future__ import annotations

from typing import Any

import pytest

from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.rebalance import SkipCode, plan, recheck
from tests.rebalance.builders import NOW, POLICY, cluster, config, load_annotations, node, pod

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
EVICT = "descheduler.alpha.kubernetes.io/evict"


def pods_on_hot(**victim_fields: Any) -> list[PodInfo]:
    return [
        pod("victim", "hot", cpu=3.0, **victim_fields),
        pod("victim-twin", "cool", cpu=0.1),  # so the victim is not the last Ready replica
    ]


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ({SAFE_TO_EVICT: "false"}, 'safe-to-evict: "false" on the pod'),
        ({DO_NOT_DISRUPT: "true"}, 'do-not-disrupt: "true" on the pod'),
        # The evict annotation opts a pod past the soft protections, never past an opt-out.
        ({SAFE_TO_EVICT: "false", EVICT: ""}, "safe-to-evict"),
        ({DO_NOT_DISRUPT: "true", EVICT: ""}, "do-not-disrupt"),
    ],
)
def test_a_pod_that_opts_out_is_never_evicted(annotations: dict[str, str], reason: str) -> None:
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    result = plan(cluster(nodes, pods_on_hot(annotations=annotations)), config(), POLICY, NOW, {})
    assert result.evictions == []
    skipped = [s for s in result.skipped if s.pod_key == "default/victim"]
    assert [s.code for s in skipped] == [SkipCode.OPTED_OUT]
    assert reason in skipped[0].reason


@pytest.mark.parametrize(
    "annotations",
    [{SAFE_TO_EVICT: "true"}, {DO_NOT_DISRUPT: "false"}, {SAFE_TO_EVICT: ""}, {DO_NOT_DISRUPT: ""}],
)
def test_only_the_autoscalers_own_opt_out_values_keep_a_pod(annotations: dict[str, str]) -> None:
    """cluster-autoscaler reads exactly "false", Karpenter exactly "true"."""
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    result = plan(cluster(nodes, pods_on_hot(annotations=annotations)), config(), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["victim"]


def test_a_node_that_opts_out_keeps_every_pod_and_still_receives() -> None:
    hot = node("hot", 0.9, raw={**load_annotations(0.9), DO_NOT_DISRUPT: "true"})
    other_hot = node("hot-2", 0.9)
    pods = [
        *(pod(f"a{i}", "hot", cpu=1.0) for i in range(4)),
        *(pod(f"b{i}", "hot-2", cpu=1.0, owner="rs-b") for i in range(4)),
        pod("b-twin", "cool", cpu=0.1, owner="rs-b"),
    ]
    result = plan(cluster([hot, other_hot, node("cool", 0.1)], pods), config(), POLICY, NOW, {})
    assert {e.source for e in result.evictions} == {"hot-2"}
    kept = [s for s in result.skipped if s.node == "hot"]
    assert {s.code for s in kept} == {SkipCode.OPTED_OUT}
    assert len(kept) == 4
    assert 'do-not-disrupt: "true" on its node' in kept[0].reason


def test_prefer_no_eviction_goes_only_when_nothing_else_reaches_the_target() -> None:
    shy: dict[str, Any] = {"annotations": {PREFER_NO_EVICTION: "true"}}
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    # Enough without it: it stays.
    enough = [pod("shy", "hot", cpu=3.0, **shy), pod("plain", "hot", cpu=3.0),
              pod("twin", "cool", cpu=0.1)]
    result = plan(cluster(nodes, enough), config(), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["plain"]
    # Not enough without it: it goes after the others.
    short = [pod("shy", "hot", cpu=2.0, **shy), pod("plain", "hot", cpu=1.0),
             pod("twin", "cool", cpu=0.1)]
    result = plan(cluster(nodes, short), config(), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["plain", "shy"]


@pytest.mark.parametrize(
    ("pod_annotations", "node_annotations"),
    [
        ({SAFE_TO_EVICT: "false"}, {}),
        ({DO_NOT_DISRUPT: "true"}, {}),
        ({}, {DO_NOT_DISRUPT: "true"}),
    ],
)
def test_an_opt_out_added_after_the_plan_stops_the_eviction(
    pod_annotations: dict[str, str], node_annotations: dict[str, str]
) -> None:
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    view = cluster(nodes, pods_on_hot())
    planned = plan(view, config(), POLICY, NOW, {}).evictions
    assert [e.pod.name for e in planned] == ["victim"]
    pods = pods_on_hot(annotations=pod_annotations)
    hot = node("hot", 0.9, raw={**load_annotations(0.9), **node_annotations})
    live = cluster([hot, node("cool", 0.1)], pods)
    why = recheck(planned[0], live, config(), POLICY, NOW, {})
    assert why is not None
    assert why.startswith("opted out:")
    assert recheck(planned[0], view, config(), POLICY, NOW, {"cool": Resources()}) is None

"""``scripts/left_hot.py`` (issue 40): the source-minutes a round leaves hot, by skip
code, and the ``no_destination`` ones whose predicted landing is a node the run evicted
from before (docs/tuning.md uses them to find the cause of the 1.25x misses)."""

from __future__ import annotations

from app.objects import Resources
from app.rebalance.outcome import (
    EvictionPlan,
    NodeClass,
    NodeKind,
    PlannedEviction,
    SkipCode,
    SkippedPod,
)
from app.simulate.descheduling import PlanRecord
from tests.rebalance.builders import pod
from tests.support.scripts import load_script

script = load_script("left_hot")


def node_class(name: str, kind: NodeKind) -> NodeClass:
    return NodeClass(name, kind, {"cpu": 0.7}, {"cpu": 0.65}, {"cpu": 0.55}, hot=True)


def refused(pod_name: str, source: str, landing: str) -> SkippedPod:
    reason = (
        f"no destination: kube-scheduler would place the replacement on {landing} (best "
        f"score 689 of {landing}), which refuses it: cpu would be at 76%"
    )
    return SkippedPod(f"default/{pod_name}", source, reason, SkipCode.NO_DESTINATION)


def evicted(pod_name: str, source: str, destination: str) -> PlannedEviction:
    return PlannedEviction(
        pod(pod_name, source), source, destination, Resources(1.0, 0.0), "prometheus", {}, ""
    )


def test_a_refusal_onto_a_node_drained_earlier_is_told_apart_from_any_other() -> None:
    first = EvictionPlan(
        "soft-taints",
        {"b-0": node_class("b-0", NodeKind.SOURCE), "b-1": node_class("b-1", NodeKind.NEUTRAL)},
        evictions=[evicted("p0", "b-0", "a-1")],
    )
    # b-1 and b-2 hot later, their replacements predicted on b-0 (drained) and a-3 (not);
    # b-3 hot without the soft taint.
    second = EvictionPlan(
        "soft-taints",
        {
            "b-0": node_class("b-0", NodeKind.NEUTRAL),
            "b-1": node_class("b-1", NodeKind.SOURCE),
            "b-2": node_class("b-2", NodeKind.SOURCE),
            "b-3": node_class("b-3", NodeKind.UNTAINTED),
        },
        skipped=[refused("p1", "b-1", "b-0"), refused("p2", "b-2", "a-3")],
    )
    minutes, on_drained = script.left_hot([PlanRecord(0.0, first), PlanRecord(300.0, second)], 5.0)
    assert dict(minutes) == {"no_destination": 10.0, "untainted": 5.0}
    assert on_drained == 5.0


def test_a_source_that_gave_up_a_pod_is_not_left_hot() -> None:
    plan = EvictionPlan(
        "soft-taints",
        {"b-0": node_class("b-0", NodeKind.SOURCE)},
        evictions=[evicted("p0", "b-0", "a-1")],
        skipped=[refused("p1", "b-0", "b-5")],
    )
    minutes, on_drained = script.left_hot([PlanRecord(0.0, plan)], 5.0)
    assert dict(minutes) == {}
    assert on_drained == 0.0

"""Sources share one run's per-workload eviction limits (issue 40, memory-hot-spot)."""

from __future__ import annotations

from collections import Counter

from app.objects import workload_of
from app.rebalance import plan
from app.rebalance.outcome import EvictionPlan, SkipCode
from tests.rebalance.builders import NOW, POLICY, cluster, config, node, pod

# Two sources above targetThresholds (65 %) on 10 cores: hot-a must shed 1.05 cores,
# hot-b 1.0. Workload x (pods of 0.6) is on both; y (0.55) only on hot-a. Each
# workload may lose 2 pods in a run.
NODES = [node("hot-a", 0.755), node("hot-b", 0.75), node("cool-1", 0.1), node("cool-2", 0.1)]
PODS = [
    pod("x0", "hot-a", cpu=0.6, owner="x"),
    pod("x1", "hot-a", cpu=0.6, owner="x"),
    pod("y0", "hot-a", cpu=0.55, owner="y"),
    pod("y1", "hot-a", cpu=0.55, owner="y"),
    pod("x2", "hot-b", cpu=0.6, owner="x"),
    pod("x3", "hot-b", cpu=0.6, owner="x"),
    pod("x4", "cool-1", cpu=0.6, owner="x"),
    pod("y2", "cool-2", cpu=0.55, owner="y"),
]
LIMITS = {"maxMigratingPerWorkload": 2, "maxUnavailablePerWorkload": "100%"}


def taken(result: EvictionPlan) -> Counter[tuple[str, str]]:
    """(source, workload name) -> evictions planned."""
    return Counter(
        (e.source, (workload_of(e.pod) or "").rsplit("/", 1)[-1]) for e in result.evictions
    )


def test_the_first_source_leaves_the_workload_the_next_one_needs() -> None:
    """Drained hottest first and largest pod first, hot-a would take both x pods it can
    and leave hot-b hot with its x pods refused by maxMigratingPerWorkload; sharing the
    limit, hot-a sheds its y pods (enough alone) and hot-b its x pods."""
    result = plan(cluster(NODES, PODS), config(**LIMITS), POLICY, NOW, {})
    assert taken(result) == Counter({("hot-a", "y"): 2, ("hot-b", "x"): 2})
    assert not [s for s in result.skipped if s.code is SkipCode.WORKLOAD_LIMIT]


def test_without_a_source_short_of_the_limits_the_plain_order_stands() -> None:
    """With room for every workload, hot-a takes its largest pods (x) as before: the
    sharing pass runs only when a source is left hot for lack of the limits."""
    wide = config(maxMigratingPerWorkload=4, maxUnavailablePerWorkload="100%")
    result = plan(cluster(NODES, PODS), wide, POLICY, NOW, {})
    assert taken(result) == Counter({("hot-a", "x"): 2, ("hot-b", "x"): 2})


def test_when_sharing_cannot_help_the_first_plan_is_kept() -> None:
    """Only x pods on both sources and room for two: one source stays hot whatever the
    order, and the plan is the plain one (hot-a, the hotter, first)."""
    only_x = [p for p in PODS if p.name not in ("y0", "y1")] + [
        pod("y0", "cool-1", cpu=0.55, owner="y")
    ]
    result = plan(cluster(NODES, only_x), config(**LIMITS), POLICY, NOW, {})
    assert taken(result) == Counter({("hot-a", "x"): 2})
    refused = [s for s in result.skipped if s.code is SkipCode.WORKLOAD_LIMIT]
    assert {s.node for s in refused} == {"hot-b"}

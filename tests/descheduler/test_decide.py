"""The decide step on its own: the plan for a view, the debounce counts the memory is to
keep, and a dry-run loop's own counts (which the memory never gets)."""

from __future__ import annotations

from app.descheduler.decide import decide
from app.descheduler.gather import View
from app.kube.state import DeschedulerState
from app.rebalance import NodeKind, PlannerState
from tests.rebalance.builders import NOW, POLICY, cluster, config, node, pod

INTERVAL_S = 60.0
DEBOUNCED = config(consecutiveHotRounds=2, interval="60s", evictLastReplica=True)


def view(hot_rounds: dict[str, tuple[int, float]] | None = None, now_s: float = NOW) -> View:
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    return View(
        cluster(nodes, [pod("victim", "hot")]), DeschedulerState(hot_rounds=hot_rounds or {}), now_s
    )


def test_a_first_hot_round_debounces_and_is_remembered_with_its_time() -> None:
    decision = decide(view(), DEBOUNCED, POLICY, None)
    assert decision.plan.node_classes["hot"].kind is NodeKind.DEBOUNCING
    assert decision.plan.evictions == []
    assert decision.hot_rounds == {"hot": (1, NOW)}
    assert decision.dry_rounds == PlannerState()


def test_the_round_after_a_remembered_one_makes_the_node_a_source() -> None:
    decision = decide(view({"hot": (1, NOW - INTERVAL_S)}), DEBOUNCED, POLICY, None)
    assert decision.plan.node_classes["hot"].kind is NodeKind.SOURCE
    assert [e.pod.name for e in decision.plan.evictions] == ["victim"]
    assert decision.hot_rounds == {"hot": (2, NOW)}


def test_a_dry_run_loop_counts_its_own_rounds_on_top_of_an_unwritten_memory() -> None:
    first = decide(view(), DEBOUNCED, POLICY, PlannerState())
    assert first.dry_rounds == PlannerState({"hot": 1})
    # The memory is never written by a dry run: the next round reads it empty again.
    later = view(now_s=NOW + INTERVAL_S)
    second = decide(later, DEBOUNCED, POLICY, first.dry_rounds)
    assert second.plan.node_classes["hot"].kind is NodeKind.SOURCE
    assert second.dry_rounds == PlannerState({"hot": 2})
    # Without its own counts, the same round would still be debouncing.
    assert decide(later, DEBOUNCED, POLICY, None).plan.node_classes["hot"].kind is (
        NodeKind.DEBOUNCING
    )

"""Back-off (app/rebalance/backoff.py): where recent evictions did not help, the planner
leaves the node or workload alone, for a growing, bounded time, and resumes early when
the node's usage has changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.objects import MoveRecord, Resources
from app.rebalance import STOPPED_HELPING, SkipCode, back_off, plan
from app.rebalance.backoff import MAX_BACKOFF_ROUNDS
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod

INTERVAL_S = 300.0
WEB = "default/ReplicaSet/web"


def move(
    outcome: str,
    judged_ago_s: float,
    *,
    source: str = "hot",
    before: float = 0.85,
    workloads: tuple[str, ...] = (WEB,),
) -> MoveRecord:
    judged_s = NOW - judged_ago_s
    return MoveRecord(source, judged_s - 600, "cpu", before, 0.16, 0.6, "cool-a", 2, workloads,
                      outcome=outcome, judged_at_s=judged_s, reason="r")  # fmt: skip


@pytest.mark.parametrize(
    ("moves", "backed_off"),
    [
        ([], False),
        ([move("helped", 10)], False),
        ([move("no effect", 10)], True),  # one round wasted: one interval off
        ([move("no effect", 400)], False),  # ... which has passed
        ([move("no effect", 1000), move("backfired", 400)], True),  # two: two intervals
        ([move("no effect", 1000), move("no effect", 700)], False),  # two, passed
        ([move("backfired", 1000), move("helped", 400)], False),  # a helped move ends it
        ([move("no effect", 60, before=0.60)], False),  # the node changed since: resumes
    ],
)
def test_a_node_is_backed_off_after_moves_that_did_not_help(
    moves: list[MoveRecord], backed_off: bool
) -> None:
    result = back_off(moves, NOW, INTERVAL_S, {"hot": {"cpu": 0.85}})
    assert ("hot" in result.nodes) is backed_off
    assert (WEB in result.workloads) is (
        backed_off or moves == [move("no effect", 60, before=0.60)]
    )


def test_the_pause_grows_and_is_bounded() -> None:
    # Twelve moves in a row that did not help, the last judged 10 intervals ago: still off
    # (2^11 intervals, bounded to 16); 17 intervals after it, back on.
    streak = [move("no effect", 10 * INTERVAL_S + i) for i in range(12)]
    assert "hot" in back_off(streak, NOW, INTERVAL_S, {}).nodes
    assert back_off(streak, NOW + 7 * INTERVAL_S, INTERVAL_S, {}).nodes == {}
    assert MAX_BACKOFF_ROUNDS == 16


def test_pending_moves_back_nothing_off() -> None:
    pending = replace(move("no effect", 10), outcome=None, judged_at_s=None)
    assert back_off([pending], NOW, INTERVAL_S, {}).nodes == {}


def hot_cluster_with(moves: list[MoveRecord]):  # type: ignore[no-untyped-def]
    nodes = [node("hot", 0.85), node("hot-b", 0.85), node("cool-a", 0.2), node("cool-b", 0.25)]
    pods = [pod(f"web-{i}", "hot", owner="web") for i in range(10)]
    pods += [pod(f"api-{i}", "hot-b", owner="api") for i in range(10)]
    usage = {p.key: Resources(0.8, 1 * GI) for p in pods}
    return replace(cluster(nodes, pods, usage), moves=tuple(moves))


def test_the_plan_skips_a_backed_off_node_with_its_code_and_says_why() -> None:
    view = hot_cluster_with([move("no effect", 10, workloads=())])
    result = plan(view, config(), POLICY, NOW, {})
    assert {e.source for e in result.evictions} == {"hot-b"}
    skipped = [s for s in result.skipped if s.node == "hot"]
    assert len(skipped) == 10
    assert {s.code for s in skipped} == {SkipCode.BACKED_OFF}
    assert "did not help" in skipped[0].reason
    assert STOPPED_HELPING not in result.notes


def test_the_plan_skips_a_backed_off_workloads_pods_only() -> None:
    view = hot_cluster_with([move("backfired", 10, source="gone", workloads=(WEB,))])
    result = plan(view, config(), POLICY, NOW, {})
    assert {e.source for e in result.evictions} == {"hot-b"}
    assert {s.code for s in result.skipped if s.node == "hot"} == {SkipCode.BACKED_OFF}
    assert (
        "workload default/ReplicaSet/web"
        in next(s for s in result.skipped if s.node == "hot").reason
    )


def test_every_hot_node_backed_off_is_said_in_the_plan() -> None:
    moves = [move("no effect", 10, workloads=()), move("no effect", 10, source="hot-b",
                                                       workloads=())]  # fmt: skip
    result = plan(hot_cluster_with(moves), config(), POLICY, NOW, {})
    assert result.evictions == []
    assert STOPPED_HELPING in result.notes

"""The extender's prioritize answer: which node is lifted alone to the top, and why."""

from __future__ import annotations

import math

import pytest

from app.load import evaluate_node, format_usage
from app.load.prioritize import can_be_preferred, has_room, host_priorities, limit_room
from app.policy import default_policy

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("scores", "preferable", "roomy", "answer"),
    [
        # The first top score is lifted; the others answer at most 9 and at most its score.
        ([5, 7, 7], [True] * 3, [True] * 3, [5, 8, 7]),
        ([10, 10], [True] * 2, [True] * 2, [10, 9]),
        # A node that may not be preferred (rejected, or no fresh data) is never lifted,
        # and never answers above the one that is.
        ([8, 5], [False, True], [True] * 2, [5, 6]),
        # Nothing may be preferred: plain scores, kube-scheduler's plugins choose.
        ([8, 3], [False, False], [True] * 2, [8, 3]),
        ([10], [False], [False], [9]),
        # Room for the pod first: the top node without room yields to one with room.
        ([7, 5, 5], [True] * 3, [False, True, True], [5, 6, 5]),
        # No node has room: the top one is lifted all the same (the pod goes somewhere).
        ([7, 5], [True] * 2, [False, False], [8, 5]),
        ([], [], [], []),
    ],
)
def test_host_priorities(
    scores: list[int], preferable: list[bool], roomy: list[bool], answer: list[int]
) -> None:
    assert host_priorities(scores, preferable, roomy) == answer


def node_annotations(cpu: float, memory: float) -> dict[str, str]:
    return {
        m: format_usage(cpu if m.startswith("cpu") else memory, NOW - 30)
        for m in default_policy().metrics
    }


def test_limit_room_is_what_each_resource_can_take_before_a_predicate_rejects() -> None:
    policy = default_policy()  # avg_5m limits 0.65, max_avg_1h limits 0.75
    load = evaluate_node(node_annotations(0.55, 0.20), policy, NOW)
    rooms = limit_room(load, policy)
    assert rooms["cpu"] == pytest.approx(0.10)
    assert rooms["memory"] == pytest.approx(0.45)
    assert has_room(rooms, {"cpu": 0.09, "memory": 0.4})
    assert not has_room(rooms, {"cpu": 0.11, "memory": 0.0})


def test_a_node_without_fresh_data_has_room_for_anything_but_cannot_be_preferred() -> None:
    policy = default_policy()
    blind = evaluate_node({}, policy, NOW)
    assert limit_room(blind, policy) == {}  # no limit applies: room for anything
    assert has_room(limit_room(blind, policy), {"cpu": math.inf, "memory": 1e30})
    assert not can_be_preferred(blind)
    assert can_be_preferred(evaluate_node(node_annotations(0.3, 0.3), policy, NOW))
    assert not can_be_preferred(evaluate_node(node_annotations(0.9, 0.3), policy, NOW))  # rejected

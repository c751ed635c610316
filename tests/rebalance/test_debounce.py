"""Debounce rounds in the descheduler's state: consecutive only when recent, never
counted twice, forgotten when a node cools."""

from __future__ import annotations

import pytest

from app.rebalance.debounce import previous_hot_rounds, record_hot_rounds
from app.rebalance.outcome import NodeClass, NodeKind

NOW = 1_700_000_000.0
INTERVAL = 300.0


def hot_class(rounds: int, hot: bool = True) -> NodeClass:
    return NodeClass("n1", NodeKind.DEBOUNCING, {}, {}, {}, hot=hot, hot_rounds=rounds)


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        (None, 0),
        ((0, NOW - INTERVAL), 0),
        ((2, NOW - INTERVAL), 2),  # the previous run: consecutive
        ((2, NOW - 3 * INTERVAL), 0),  # a run was missed: start again
        ((2, NOW - 10), 1),  # this very round already counted
        ((2, NOW + 3600), 0),  # dated in the future: not trusted
    ],
)
def test_previous_hot_rounds(recorded: tuple[int, float] | None, expected: int) -> None:
    memory = {} if recorded is None else {"n1": recorded}
    assert previous_hot_rounds(memory, NOW, INTERVAL).get("n1", 0) == expected


def test_a_hot_round_after_the_previous_one_is_recorded_with_the_new_count() -> None:
    updated = record_hot_rounds({"n1": (1, NOW - INTERVAL)}, {"n1": hot_class(2)}, NOW, INTERVAL)
    assert updated == {"n1": (2, NOW)}


def test_a_second_run_in_the_same_round_keeps_the_rounds_time() -> None:
    recorded = {"n1": (2, NOW - 10)}
    assert record_hot_rounds(recorded, {"n1": hot_class(2)}, NOW, INTERVAL) == recorded


def test_a_stale_count_of_one_is_refreshed_so_the_next_round_is_consecutive() -> None:
    updated = record_hot_rounds(
        {"n1": (1, NOW - 5 * INTERVAL)}, {"n1": hot_class(1)}, NOW, INTERVAL
    )
    assert updated == {"n1": (1, NOW)}


def test_a_cool_round_or_a_node_that_is_gone_is_forgotten() -> None:
    recorded = {"n1": (2, NOW - INTERVAL), "gone": (3, NOW - INTERVAL)}
    assert record_hot_rounds(recorded, {"n1": hot_class(0, hot=False)}, NOW, INTERVAL) == {}

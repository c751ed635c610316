"""Debounce rounds kept on the Node: consecutive only when recent, never counted twice."""

from __future__ import annotations

import pytest

from app.descheduler.debounce import (
    HOT_ROUNDS_KEY,
    format_hot_rounds,
    hot_round_patches,
    previous_hot_rounds,
)
from app.kube.objects import NodeInfo
from app.rebalance.outcome import NodeClass, NodeKind

NOW = 1_700_000_000.0
INTERVAL = 300.0


def node(value: str | None) -> NodeInfo:
    return NodeInfo("n1", {HOT_ROUNDS_KEY: value} if value is not None else {}, None)


def hot_class(rounds: int, hot: bool = True) -> NodeClass:
    return NodeClass("n1", NodeKind.DEBOUNCING, {}, {}, {}, hot=hot, hot_rounds=rounds)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0),
        ("garbage", 0),
        ("-2," + format_hot_rounds(0, NOW)[2:], 0),
        (format_hot_rounds(2, NOW - INTERVAL), 2),  # the previous run: consecutive
        (format_hot_rounds(2, NOW - 3 * INTERVAL), 0),  # a run was missed: start again
        (format_hot_rounds(2, NOW - 10), 1),  # this very round already counted
    ],
)
def test_previous_hot_rounds(value: str | None, expected: int) -> None:
    assert previous_hot_rounds({"n1": node(value)}, NOW, INTERVAL).get("n1", 0) == expected


def test_a_hot_round_after_the_previous_one_is_written_with_the_new_count() -> None:
    patches = hot_round_patches({"n1": node(format_hot_rounds(1, NOW - INTERVAL))},
                                {"n1": hot_class(2)}, NOW, INTERVAL)
    assert patches == {"n1": {HOT_ROUNDS_KEY: format_hot_rounds(2, NOW)}}


def test_a_second_run_in_the_same_round_writes_nothing() -> None:
    assert hot_round_patches({"n1": node(format_hot_rounds(2, NOW - 10))},
                             {"n1": hot_class(2)}, NOW, INTERVAL) == {}


def test_a_stale_count_of_one_is_refreshed_so_the_next_round_is_consecutive() -> None:
    patches = hot_round_patches({"n1": node(format_hot_rounds(1, NOW - 5 * INTERVAL))},
                                {"n1": hot_class(1)}, NOW, INTERVAL)
    assert patches == {"n1": {HOT_ROUNDS_KEY: format_hot_rounds(1, NOW)}}


def test_a_cool_round_resets_once_and_then_writes_nothing() -> None:
    reset = hot_round_patches({"n1": node(format_hot_rounds(2, NOW - INTERVAL))},
                              {"n1": hot_class(0, hot=False)}, NOW, INTERVAL)
    assert reset == {"n1": {HOT_ROUNDS_KEY: format_hot_rounds(0, NOW)}}
    assert hot_round_patches({"n1": node(format_hot_rounds(0, NOW))},
                             {"n1": hot_class(0, hot=False)}, NOW + INTERVAL, INTERVAL) == {}
    assert hot_round_patches({"n1": node(None)}, {"n1": hot_class(0, hot=False)},
                             NOW, INTERVAL) == {}

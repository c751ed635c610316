"""The bounds on the workload-usage raise (``app.load.estimate``, "Bounds"; issue 42)
and the system-critical exemption from the load filter, as pure functions."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.load import (
    MIN_MEASURED_PODS,
    START_GRACE_S,
    Evidence,
    Heat,
    NodeHeat,
    PlacedPod,
    bounded_next_pod_heats,
    bounded_raises,
    is_exempt_from_filter,
    raises_left,
    started_in_grace,
)
from app.objects import Resources
from app.policy import default_policy

SETTINGS = default_policy().spec.estimation  # maxAge 5 minutes
W = "evil/Deployment/burner"
BURNER = Resources(7.5, 2.0**28)
ONE_M = Resources(0.001, 0.0)


def wave(count: int, at_s: float = 0.0, step_s: float = 1.0, **fields: Any) -> list[
    tuple[str | None, PlacedPod]
]:
    """``count`` pods of the burner's workload, 1m and no limit, bound ``step_s`` apart."""
    return [
        (W, PlacedPod(ONE_M, Resources(), at_s + i * step_s, observed=BURNER, **fields))
        for i in range(count)
    ]


def raised(pods: list[PlacedPod]) -> list[bool]:
    return [pod.observed is not None for pod in pods]


@pytest.mark.parametrize("measured", [0, 1, MIN_MEASURED_PODS - 1])
def test_a_usage_measured_on_too_few_pods_raises_nothing(measured: int) -> None:
    assert raised(bounded_raises(wave(10), {W: measured}, 20.0, SETTINGS)) == [False] * 10


def test_no_more_pods_hold_a_raise_at_once_than_were_measured() -> None:
    """In binding order: the first three hold one, the rest none."""
    got = raised(bounded_raises(wave(10), {W: 3}, 20.0, SETTINGS))
    assert got == [True] * 3 + [False] * 7


def test_a_raise_freed_at_max_age_goes_to_a_pod_bound_after() -> None:
    """Three bound at 0 s hold theirs until maxAge (started at once); one bound after
    maxAge takes a freed raise, one bound before does not."""
    pods = [
        *wave(3, started_at_s=1.0),
        (W, PlacedPod(ONE_M, Resources(), 200.0, observed=BURNER, started_at_s=201.0)),
        (W, PlacedPod(ONE_M, Resources(), SETTINGS.max_age_s + 1, observed=BURNER)),
    ]
    got = raised(bounded_raises(pods, {W: 3}, SETTINGS.max_age_s + 2, SETTINGS))
    assert got == [True, True, True, False, True]


def test_a_pod_never_started_holds_its_raise_for_its_grace_only() -> None:
    """Unstarted pods: raised within their grace, not after; their raises freed at the
    grace's end go to pods bound later; a pod started after its grace gets none."""
    first = wave(3, started_at_s=None)
    assert raised(bounded_raises(first, {W: 3}, 10.0, SETTINGS)) == [True] * 3
    late = START_GRACE_S + 5
    assert raised(bounded_raises(first, {W: 3}, late, SETTINGS)) == [False] * 3
    after = first + wave(3, at_s=late - 1, started_at_s=None)
    assert raised(bounded_raises(after, {W: 3}, late, SETTINGS)) == [False] * 3 + [True] * 3
    assert not started_in_grace(0.0, START_GRACE_S + 1, late)
    assert started_in_grace(0.0, START_GRACE_S - 1, late)
    assert started_in_grace(0.0, None, START_GRACE_S - 1)


def test_only_pods_the_usage_raises_take_one_and_workloads_are_apart() -> None:
    """A pod with both limits is not raised and takes no raise; a pod placed around the
    scheduler neither; another workload has its own count."""
    limited = PlacedPod(ONE_M, Resources(0.5, 2.0**27), 0.0, observed=BURNER)
    placed = PlacedPod(ONE_M, Resources(), 0.0, Evidence.PLACED, observed=BURNER)
    other = ("shop/Deployment/web", PlacedPod(ONE_M, Resources(), 0.0, observed=BURNER))
    pods = [(W, limited), (W, placed), *wave(3, at_s=1.0), other]
    got = raised(bounded_raises(pods, {W: 3, other[0]: 3}, 10.0, SETTINGS))
    assert got == [False, False, True, True, True, True]


def test_the_raises_left_count_what_is_held_now() -> None:
    bounded = list(zip([W] * 10, bounded_raises(wave(10), {W: 4}, 20.0, SETTINGS), strict=True))
    assert raises_left(bounded, {W: 4}, 20.0, SETTINGS) == {W: 0}
    bounded = list(zip([W] * 1, bounded_raises(wave(1), {W: 4}, 20.0, SETTINGS), strict=True))
    assert raises_left(bounded, {W: 4}, 20.0, SETTINGS) == {W: 3}


def heat(kind: Heat, excess: float) -> NodeHeat:
    return NodeHeat(kind, excess, "cpu_usage_avg_5m", 0.65 + excess, 0.65)


def test_no_more_nodes_are_hot_only_through_a_raised_next_pod_than_raises_left() -> None:
    raised_heats = {
        "a": heat(Heat.HOT, 0.10),  # hot as it stands too: kept
        "b": heat(Heat.HOT, 0.05),
        "c": heat(Heat.HOT, 0.03),
        "d": heat(Heat.HOT, 0.01),
    }
    plain = {
        "a": heat(Heat.HOT, 0.08),
        "b": heat(Heat.COOL, -0.5),
        "c": heat(Heat.COOL, -0.5),
        "d": heat(Heat.COOL, -0.5),
    }
    bounded = bounded_next_pod_heats(raised_heats, plain, 1)
    assert [name for name, h in bounded.items() if h.heat is Heat.HOT] == ["a", "b"]
    assert bounded["c"] is plain["c"]
    assert bounded_next_pod_heats(raised_heats, plain, 5) == raised_heats
    none_left = bounded_next_pod_heats(raised_heats, plain, 0)
    assert [name for name, h in none_left.items() if h.heat is Heat.HOT] == ["a"]


@pytest.mark.parametrize(
    ("spec", "exempt"),
    [
        ({"priority": 2_000_000_000}, True),
        ({"priority": 2_000_001_000, "priorityClassName": "system-node-critical"}, True),
        ({"priorityClassName": "system-cluster-critical"}, True),
        ({"priority": 1_999_999_999}, False),
        ({"priority": True}, False),
        ({"priority": "2000000000"}, False),
        ({"priority": math.inf}, False),
        ({"priorityClassName": "System-Cluster-Critical"}, False),
        ({}, False),
    ],
)
def test_system_critical_pods_are_exempt_from_the_load_filter(
    spec: dict[str, Any], exempt: bool
) -> None:
    assert is_exempt_from_filter({"spec": spec}) is exempt
    assert is_exempt_from_filter({"spec": "garbage"}) is False

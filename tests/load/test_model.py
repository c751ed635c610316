import math
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.load.model import (
    MAX_FUTURE_SKEW_S,
    Freshness,
    apply_hot_value,
    evaluate_node,
    hot_value_from_bindings,
    is_exempt_from_filter,
    read_metric,
    read_usage,
    to_extender_score,
)
from app.load.samples import format_hot_value, format_usage
from app.policy import default_policy, policy_from_yaml

POLICY = default_policy()
NOW = 1_700_000_000.0
FIVE_MIN = 300.0


def fresh(value: float, age_s: float = 10.0) -> str:
    return format_usage(value, NOW - age_s)


def annotations(cpu: tuple[float, float, float], mem: tuple[float, float, float]) -> dict[str, str]:
    names = ("usage_avg_5m", "usage_max_avg_1h", "usage_max_avg_1d")
    result = {f"cpu_{n}": fresh(v) for n, v in zip(names, cpu, strict=True)}
    result |= {f"mem_{n}": fresh(v) for n, v in zip(names, mem, strict=True)}
    return result


def reading(annotations: Mapping[str, str], metric: str, now: float = NOW) -> Freshness:
    load = evaluate_node(annotations, POLICY, now)
    return next(r.freshness for r in load.readings if r.metric == metric)


def test_crane_worked_example_scores_57() -> None:
    load = evaluate_node(annotations((0.630, 0.637, 0.637), (0.215, 0.217, 0.216)), POLICY, NOW)
    assert load.load_score == 57
    assert load.score == 57
    assert load.extender_score == 6
    assert not load.overloaded


# cpu_usage_avg_5m syncs every 3m; a value counts for 3m + 5m after its timestamp.
WINDOW = 3 * 60 + FIVE_MIN


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (format_usage(0.9, NOW - WINDOW + 1), Freshness.FRESH),
        (format_usage(0.9, NOW - WINDOW), Freshness.STALE),  # exactly at the window end
        (format_usage(0.9, NOW - WINDOW - 3600), Freshness.STALE),
        (format_usage(0.9, NOW + MAX_FUTURE_SKEW_S - 1), Freshness.FRESH),  # small clock skew
        (format_usage(0.9, NOW + 8 * 3600), Freshness.FUTURE),  # crane's time zone bug
        ("garbage", Freshness.UNREADABLE),
        ("-0.3," + format_usage(0, NOW).split(",")[1], Freshness.UNREADABLE),
        ("NaN," + format_usage(0, NOW).split(",")[1], Freshness.UNREADABLE),
        ("", Freshness.UNREADABLE),
    ],
)
def test_freshness_edges(raw: str, expected: Freshness) -> None:
    assert reading({"cpu_usage_avg_5m": raw}, "cpu_usage_avg_5m") == expected


def test_absent_annotation_is_missing() -> None:
    assert reading({}, "cpu_usage_avg_5m") == Freshness.MISSING


@pytest.mark.parametrize(
    ("raw", "overloaded"),
    [
        (fresh(0.66), True),
        (fresh(0.65), False),  # the limit itself passes: the rule is usage > limit
        (format_usage(0.99, NOW - WINDOW), False),  # stale: fails open
        (format_usage(0.99, NOW + 3600), False),  # future-dated: fails open
        ("0.99,not-a-time", False),
    ],
)
def test_filter_rejects_only_fresh_values_above_the_limit(raw: str, overloaded: bool) -> None:
    load = evaluate_node({"cpu_usage_avg_5m": raw}, POLICY, NOW)
    assert load.overloaded is overloaded


def test_rejection_reason_names_metric_and_limit_but_not_node_or_value() -> None:
    load = evaluate_node({"mem_usage_max_avg_1h": fresh(0.8731)}, POLICY, NOW)
    assert load.reason == "Load[mem_usage_max_avg_1h] is too high (> 0.75)"


def test_reason_is_the_first_overloaded_predicate_in_policy_order() -> None:
    load = evaluate_node(
        {"mem_usage_avg_5m": fresh(0.9), "cpu_usage_max_avg_1h": fresh(0.9)}, POLICY, NOW
    )
    assert [o.metric for o in load.overloads] == ["cpu_usage_max_avg_1h", "mem_usage_avg_5m"]
    assert load.reason == "Load[cpu_usage_max_avg_1h] is too high (> 0.75)"


def test_zero_limit_disables_a_predicate() -> None:
    policy = policy_from_yaml(
        """
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}]
"""
    )
    assert not evaluate_node({"cpu_usage_avg_5m": fresh(1.0)}, policy, NOW).overloaded


def test_hot_value_below_zero_clamps_to_zero() -> None:
    hot = {"node_hot_value": format_hot_value(12, NOW - 5)}
    load = evaluate_node(annotations((0.1,) * 3, (0.1,) * 3) | hot, POLICY, NOW)
    assert load.load_score == 90
    assert load.hot_value == 12
    assert load.score == 0
    assert load.extender_score == 0


def test_stale_hot_value_is_ignored() -> None:
    hot = {"node_hot_value": format_hot_value(3, NOW - FIVE_MIN)}
    load = evaluate_node(annotations((0.1,) * 3, (0.1,) * 3) | hot, POLICY, NOW)
    assert load.hot_value == 0
    assert load.score == 90


def test_hot_value_lowers_score_by_ten_per_unit() -> None:
    hot = {"node_hot_value": format_hot_value(2, NOW - 5)}
    load = evaluate_node(annotations((0.1,) * 3, (0.1,) * 3) | hot, POLICY, NOW)
    assert load.score == 70


def test_missing_data_scores_no_better_than_fresh_data_at_the_limits() -> None:
    at_limits = annotations((0.65, 0.75, 1.0), (0.65, 0.75, 1.0))
    unknown = evaluate_node({}, POLICY, NOW)
    assert unknown.load_score <= evaluate_node(at_limits, POLICY, NOW).load_score
    assert unknown.load_score > 0  # but a new node is not treated as completely full


@given(
    cpu=st.tuples(*[st.floats(0, 1)] * 3),
    mem=st.tuples(*[st.floats(0, 1)] * 3),
    drop=st.sets(st.sampled_from(sorted(annotations((0,) * 3, (0,) * 3)))),
)
def test_dropping_data_never_raises_the_score_of_a_feasible_node(
    cpu: tuple[float, float, float], mem: tuple[float, float, float], drop: set[str]
) -> None:
    full = annotations(cpu, mem)
    complete = evaluate_node(full, POLICY, NOW)
    partial = evaluate_node({k: v for k, v in full.items() if k not in drop}, POLICY, NOW)
    if not complete.overloaded:
        assert partial.load_score <= complete.load_score + 1  # +1: int() truncation


@given(score=st.integers(-1000, 1000))
def test_extender_score_is_in_range(score: int) -> None:
    assert 0 <= to_extender_score(score) <= 10


@pytest.mark.parametrize(
    ("score", "expected"), [(0, 0), (4, 0), (5, 1), (57, 6), (94, 9), (95, 10), (100, 10)]
)
def test_extender_score_rounds_half_up(score: int, expected: int) -> None:
    assert to_extender_score(score) == expected


def test_apply_hot_value_never_exceeds_100() -> None:
    assert apply_hot_value(100, 0) == 100
    assert apply_hot_value(30, 5) == 0


def test_recheck_time_is_when_the_first_value_goes_stale() -> None:
    written = NOW - 60
    load = evaluate_node(
        {
            "cpu_usage_avg_5m": format_usage(0.9, written),  # 3m + 5m window
            "cpu_usage_max_avg_1h": format_usage(0.5, written),  # 15m + 5m window
        },
        POLICY,
        NOW,
    )
    assert load.recheck_at_s == written + 8 * 60
    assert load.overloaded
    assert not evaluate_node(
        {"cpu_usage_avg_5m": format_usage(0.9, written)}, POLICY, load.recheck_at_s
    ).overloaded


@pytest.mark.parametrize(
    ("ages_s", "expected"),
    [
        ([], 0),
        ([10], 0),
        ([10, 20], 1),  # 2 in the last minute: floor(2/2) = 1, floor(2/5) = 0
        ([10, 20, 30, 40, 50], 3),  # floor(5/5) + floor(5/2)
        ([100, 120, 130, 200, 250], 1),  # 5 in 5m, none in 1m
        ([301, 400], 0),  # older than every range
    ],
)
def test_hot_value_from_bindings(ages_s: list[float], expected: int) -> None:
    times = [NOW - age for age in ages_s]
    assert hot_value_from_bindings(times, NOW, POLICY.spec.hot_value) == expected


@pytest.mark.parametrize(
    ("pod", "exempt"),
    [
        ({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": True}]}}, True),
        # issue 28, attack 7: an ownerReference that is not the controller is the tenant's word
        ({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": "x"}]}}, False),
        ({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": False}]}}, False),
        ({"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": "true"}]}}, False),
        ({"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "x"}]}}, False),
        ({"metadata": {}}, False),
        ({"metadata": {"ownerReferences": "garbage"}}, False),
        ({}, False),
    ],
)
def test_only_daemonset_pods_are_exempt_from_the_filter(
    pod: dict[str, object], exempt: bool
) -> None:
    assert is_exempt_from_filter(pod) is exempt


# -- usage the samples do not contain yet ------------------------------------------


def usage_of(
    load_annotations: Mapping[str, str], unsampled: Mapping[str, float]
) -> dict[str, float]:
    load = evaluate_node(load_annotations, POLICY, NOW, unsampled)
    return {r.metric: r.usage_fraction for r in load.readings if r.usage_fraction is not None}


def test_unsampled_usage_is_added_to_every_fresh_metric_of_its_resource() -> None:
    usage = usage_of(annotations((0.3, 0.4, 0.5), (0.2, 0.2, 0.2)), {"cpu": 0.25})
    assert usage["cpu_usage_avg_5m"] == pytest.approx(0.55)
    assert usage["cpu_usage_max_avg_1d"] == pytest.approx(0.75)
    assert usage["mem_usage_avg_5m"] == pytest.approx(0.2)


def test_unsampled_usage_can_push_a_node_over_its_limit() -> None:
    cool = annotations((0.15, 0.15, 0.15), (0.2, 0.2, 0.2))
    assert not evaluate_node(cool, POLICY, NOW).overloaded
    load = evaluate_node(cool, POLICY, NOW, {"cpu": 0.64})
    assert [o.metric for o in load.overloads] == ["cpu_usage_avg_5m", "cpu_usage_max_avg_1h"]
    reading = next(r for r in load.readings if r.metric == "cpu_usage_avg_5m")
    assert reading.measured_fraction == pytest.approx(0.15)
    assert reading.unsampled_fraction == pytest.approx(0.64)


def test_evicted_usage_is_taken_away_but_never_below_zero() -> None:
    usage = usage_of(annotations((0.3, 0.3, 0.3), (0.2, 0.2, 0.2)), {"memory": -0.5})
    assert usage["mem_usage_avg_5m"] == 0.0
    assert usage["cpu_usage_avg_5m"] == pytest.approx(0.3)


def test_unsampled_usage_never_makes_stale_or_missing_data_reject_a_node() -> None:
    stale = {"cpu_usage_avg_5m": fresh(0.6, age_s=3 * 60 + FIVE_MIN + 1)}
    load = evaluate_node(stale, POLICY, NOW, {"cpu": 0.9})
    assert not load.overloaded
    unknown = evaluate_node({}, POLICY, NOW)
    assert evaluate_node({}, POLICY, NOW, {"cpu": 0.9}).score == unknown.score


@given(
    cpu=st.tuples(*[st.floats(0, 1)] * 3),
    mem=st.tuples(*[st.floats(0, 1)] * 3),
    age_s=st.floats(0, 4 * 3600),
    added=st.floats(-0.5, 0.5),
)
def test_read_usage_is_what_the_full_verdict_reads(
    cpu: tuple[float, float, float],
    mem: tuple[float, float, float],
    age_s: float,
    added: float,
) -> None:
    """The descheduler sizes nodes with read_usage; it must read as evaluate_node does."""
    names = ("usage_avg_5m", "usage_max_avg_1h", "usage_max_avg_1d")
    values = {f"cpu_{n}": format_usage(v, NOW - age_s) for n, v in zip(names, cpu, strict=True)}
    values |= {f"mem_{n}": format_usage(v, NOW - age_s) for n, v in zip(names, mem, strict=True)}
    unsampled = {"cpu": added, "memory": -added}
    wanted = ("cpu_usage_avg_5m", "mem_usage_max_avg_1h", "not_a_policy_metric")
    read = read_usage(values, POLICY, NOW, wanted, unsampled)
    full = {r.metric: r for r in evaluate_node(values, POLICY, NOW, unsampled).readings}
    assert set(read) == {"cpu_usage_avg_5m", "mem_usage_max_avg_1h"}
    for metric, reading in read.items():
        assert reading == full[metric]


def test_a_reading_is_what_its_own_text_says_whatever_was_read_before() -> None:
    """Readings are made once per metric, text and freshness: the same text reads the
    same, at another freshness it reads as such, and "-0" (a tenant may write it) is
    -0.0, not the 0.0 read just before from the same instant's "0"."""
    now = 1_700_000_000.0
    zero = format_usage(0.0, now - 30)
    first, _ = read_metric({"cpu_usage_avg_5m": zero}, "cpu_usage_avg_5m", 300.0, now)
    again, _ = read_metric({"cpu_usage_avg_5m": zero}, "cpu_usage_avg_5m", 300.0, now)
    stale, _ = read_metric({"cpu_usage_avg_5m": zero}, "cpu_usage_avg_5m", 10.0, now)
    negative, _ = read_metric({"cpu_usage_avg_5m": "-" + zero}, "cpu_usage_avg_5m", 300.0, now)
    assert first == again
    assert (first.freshness, stale.freshness) == (Freshness.FRESH, Freshness.STALE)
    assert first.usage_fraction is not None
    assert negative.usage_fraction is not None
    assert math.copysign(1.0, first.usage_fraction) == 1.0
    assert math.copysign(1.0, negative.usage_fraction) == -1.0

"""Every metric syncs at start, then each on its own period; failures retry soon."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.annotator.schedule import MetricSchedule

CRANE = {"cpu_5m": 180.0, "cpu_1h": 900.0, "cpu_1d": 10800.0}


def run_ticks(schedule: MetricSchedule, until_s: float) -> dict[str, list[float]]:
    """Drive the schedule like the metric loop with instant ticks; return sync times."""
    synced: dict[str, list[float]] = {m: [] for m in schedule.periods_s}
    now = schedule.start_s
    while now <= until_s:
        for metric in schedule.due(now):
            synced[metric].append(now)
            schedule.record_success(metric, now)
        now = schedule.next_due_s()
    return synced


def test_all_metrics_are_due_at_start() -> None:
    schedule = MetricSchedule(CRANE, start_s=100.0)
    assert schedule.due(100.0) == ["cpu_5m", "cpu_1h", "cpu_1d"]


@pytest.mark.parametrize(
    ("at_s", "due"),
    [
        (180.0, ["cpu_5m"]),
        (360.0, ["cpu_5m"]),
        (900.0, ["cpu_5m", "cpu_1h"]),
        (10800.0, ["cpu_5m", "cpu_1h", "cpu_1d"]),
    ],
)
def test_crane_periods_fall_due_together_on_common_multiples(at_s: float, due: list[str]) -> None:
    synced = run_ticks(MetricSchedule(CRANE, start_s=0.0), until_s=at_s)
    assert [m for m, times in synced.items() if at_s in times] == due


@settings(max_examples=60, deadline=None)
@given(
    periods=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.integers(min_value=1, max_value=50).map(float),
        min_size=1,
    ),
    start=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_each_metric_syncs_exactly_on_its_own_period(
    periods: dict[str, float], start: float
) -> None:
    horizon = 200.0
    synced = run_ticks(MetricSchedule(periods, start_s=start), until_s=start + horizon)
    for metric, period in periods.items():
        times = synced[metric]
        assert times[0] == start
        expected = int(horizon // period) + 1
        assert len(times) == expected, (metric, period, times)
        for k, at in enumerate(times):
            assert at == pytest.approx(start + k * period)


def test_a_failed_sync_is_retried_with_backoff_not_after_a_whole_period() -> None:
    schedule = MetricSchedule({"cpu_1d": 10800.0}, start_s=0.0, first_retry_s=10.0)
    schedule.record_failure("cpu_1d", 0.5)
    assert schedule.next_due_s() == pytest.approx(10.5)
    schedule.record_failure("cpu_1d", 10.5)
    assert schedule.next_due_s() == pytest.approx(30.5)


def test_retry_backoff_never_exceeds_the_period() -> None:
    schedule = MetricSchedule({"m": 60.0}, start_s=0.0, first_retry_s=10.0)
    for _ in range(10):
        schedule.record_failure("m", 0.0)
    assert schedule.next_due_s() == 60.0


def test_a_successful_retry_returns_the_metric_to_its_grid() -> None:
    schedule = MetricSchedule({"m": 180.0}, start_s=0.0, first_retry_s=10.0)
    schedule.record_failure("m", 0.0)
    schedule.record_success("m", 10.0)
    assert schedule.next_due_s() == 180.0


def test_a_tick_that_runs_late_keeps_the_grid() -> None:
    schedule = MetricSchedule({"m": 180.0}, start_s=0.0)
    schedule.record_success("m", 0.0)
    schedule.record_success("m", 185.0)  # the tick due at 180 started 5 s late
    assert schedule.next_due_s() == 360.0


def test_a_reloaded_policy_makes_a_retimed_metric_due_at_once() -> None:
    schedule = MetricSchedule({"a": 180.0, "b": 900.0}, start_s=0.0)
    for metric in ("a", "b"):
        schedule.record_success(metric, 0.0)
    changed = schedule.replace_periods({"a": 60.0, "b": 900.0, "c": 30.0}, now_s=50.0)
    assert sorted(changed) == ["a", "c"]
    assert schedule.due(50.0) == ["a", "c"]
    assert schedule.next_due_of("b") == 900.0

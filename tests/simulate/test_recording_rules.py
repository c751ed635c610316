"""The metrics pipeline lags exactly as configured, and writes the annotator's format."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.load import HOT_VALUE_KEY, format_hot_value, format_usage
from app.policy import default_policy
from app.simulate.recording_rules import SimulatedMonitoring, rule_of

EPOCH_S = 1_704_067_200.0
STEP_S = 30.0


def new_pipeline(nodes: int = 1, scrape_interval_s: float = 30.0) -> SimulatedMonitoring:
    return SimulatedMonitoring(
        default_policy(),
        nodes,
        epoch_s=EPOCH_S,
        scrape_interval_s=scrape_interval_s,
        rule_interval_s=60.0,
        hot_value_interval_s=30.0,
    )


def run_pipeline(usage_at: list[float], until_s: float) -> SimulatedMonitoring:
    """One node whose CPU use during the step starting at ``t`` is ``usage_at(t)``."""
    pipeline = new_pipeline()
    steps = int(until_s / STEP_S)
    for step in range(steps + 1):
        t_s = step * STEP_S
        pipeline.advance(t_s)
        value = usage_at[step]
        pipeline.account(np.array([value]), np.array([value]), STEP_S)
    return pipeline


def step_change(at_s: float, before: float, after: float, steps: int) -> list[float]:
    return [before if i * STEP_S < at_s else after for i in range(steps)]


def test_avg_5m_annotation_is_the_mean_of_the_rule_samples_in_the_window() -> None:
    # Usage jumps from 0.2 to 0.8 at 9m. The sync at 12m reads the rule evaluated at
    # 12m: the mean of cpu_usage_active at 8m, 9m (rates before the jump) and 10m,
    # 11m, 12m (after it).
    usage = step_change(540.0, 0.2, 0.8, 100)
    pipeline = run_pipeline(usage, 720.0)
    expected = (2 * 0.2 + 3 * 0.8) / 5
    assert pipeline.annotations(0)["cpu_usage_avg_5m"] == format_usage(expected, EPOCH_S + 720.0)


def test_sync_at_the_change_still_shows_the_old_usage() -> None:
    pipeline = run_pipeline(step_change(540.0, 0.2, 0.8, 100), 540.0)
    assert pipeline.annotations(0)["cpu_usage_avg_5m"] == format_usage(0.2, EPOCH_S + 540.0)


def test_between_syncs_the_annotation_keeps_its_last_value_and_time() -> None:
    pipeline = run_pipeline(step_change(540.0, 0.2, 0.8, 100), 690.0)
    assert pipeline.annotations(0)["cpu_usage_avg_5m"] == format_usage(0.2, EPOCH_S + 540.0)


def test_avg_5m_reaches_the_new_usage_five_rule_samples_after_the_change() -> None:
    pipeline = run_pipeline(step_change(540.0, 0.2, 0.8, 100), 900.0)
    assert pipeline.annotations(0)["cpu_usage_avg_5m"] == format_usage(0.8, EPOCH_S + 900.0)


def test_max_avg_1h_keeps_a_peak_that_the_5m_average_has_forgotten() -> None:
    usage = [0.9 if 600.0 <= i * STEP_S < 1200.0 else 0.1 for i in range(200)]
    pipeline = run_pipeline(usage, 2700.0)
    annotations = pipeline.annotations(0)
    assert annotations["cpu_usage_avg_5m"] == format_usage(0.1, EPOCH_S + 2700.0)
    assert annotations["cpu_usage_max_avg_1h"] == format_usage(0.9, EPOCH_S + 2700.0)


def test_the_first_sync_without_two_scrapes_writes_nothing() -> None:
    pipeline = run_pipeline([0.5] * 10, 0.0)
    assert pipeline.annotations(0) == {}


def test_hot_value_is_written_from_bindings_and_once_more_as_zero() -> None:
    pipeline = run_pipeline([0.5] * 10, 0.0)
    for _ in range(2):
        pipeline.record_binding(0, 0.0)
    pipeline.advance(30.0)
    assert pipeline.annotations(0)[HOT_VALUE_KEY] == format_hot_value(1, EPOCH_S + 30.0)
    pipeline.advance(60.0)  # the 1m window has passed
    assert pipeline.annotations(0)[HOT_VALUE_KEY] == format_hot_value(0, EPOCH_S + 60.0)
    pipeline.advance(90.0)
    assert pipeline.annotations(0)[HOT_VALUE_KEY] == format_hot_value(0, EPOCH_S + 60.0)


@pytest.mark.parametrize(
    ("metric", "known"),
    [("cpu_usage_avg_5m", True), ("mem_usage_max_avg_1d", True), ("gpu_usage_avg_5m", False)],
)
def test_only_cranes_rules_are_simulated(metric: str, known: bool) -> None:
    assert (rule_of(metric) is not None) is known


@settings(max_examples=25, deadline=None)
@given(
    stretches=st.lists(
        st.tuples(st.sampled_from([0.25, 0.5, 0.75, 1.0]), st.integers(1, 30)),
        min_size=1,
        max_size=6,
    )
)
def test_every_5m_average_is_the_mean_of_the_last_five_rule_samples(
    stretches: list[tuple[float, int]],
) -> None:
    # Long stretches of one usage (a window the same as the last gives the last mean
    # again) and changes between them; values exact in binary, so a mean is exact.
    usage = [value for value, steps in stretches for _ in range(steps)]
    pipeline = new_pipeline()
    # Scraped at t: the usage of the step before t, from the second scrape on.
    samples: list[float] = []
    for step, value in enumerate(usage):
        t_s = step * STEP_S
        pipeline.advance(t_s)
        if step % 2 == 0:  # a rule evaluation at t
            samples.append(usage[step - 1] if step > 0 else math.nan)
            window = [s for s in samples[-5:] if not math.isnan(s)]
            got = float(pipeline.prometheus.rule_value("cpu_usage_avg_5m")[0])
            if window:
                assert got == sum(window) / len(window)
            else:
                assert math.isnan(got)
        pipeline.account(np.array([value]), np.array([value]), STEP_S)


def test_an_array_changed_in_place_between_steps_is_accounted_as_changed() -> None:
    # ``account`` keeps what a step adds for the same read-only array; a caller's
    # writable array changed in place is new numbers, as fresh copies are.
    pipelines = [new_pipeline(nodes=2, scrape_interval_s=60.0) for _ in range(2)]
    usage = np.array([0.25, 0.5])
    for step in range(12):
        for pipeline in pipelines:
            pipeline.advance(step * STEP_S)
        usage[:] = [0.25 + step / 20, 0.5]
        pipelines[0].account(usage, usage, STEP_S)
        pipelines[1].account(usage.copy(), usage.copy(), STEP_S)
    in_place, copied = (p.prometheus.rule_value("cpu_usage_avg_5m").tolist() for p in pipelines)
    assert in_place == copied
    assert copied[0] != 0.25


def test_only_a_sync_of_the_metrics_rewrites_their_annotations() -> None:
    """Between two values of ``sync_version`` no metric's annotation changes on any
    node, whatever the hot value does: the soft taints keep a node's Measurement across
    a new ``node_version`` on this alone (``SimulatedSoftTaints._measurement``)."""
    pipeline = SimulatedMonitoring(
        default_policy(),
        3,
        epoch_s=EPOCH_S,
        scrape_interval_s=10.0,
        rule_interval_s=20.0,
        hot_value_interval_s=10.0,
    )
    usage = np.array([0.2, 0.5, 0.9])
    metric_texts_at: dict[int, list[dict[str, str]]] = {}
    hot_only_rewrites = 0
    for step in range(120):
        t_s = step * 10.0
        if step % 3 == 0:
            pipeline.record_binding(step % 2, t_s)
        versions, syncs = pipeline.node_version.copy(), pipeline.sync_version
        pipeline.advance(t_s)
        pipeline.account(usage * (1 + step % 4) / 4, usage, 10.0)
        texts = [
            {k: v for k, v in pipeline.annotations(node).items() if k != HOT_VALUE_KEY}
            for node in range(3)
        ]
        kept = metric_texts_at.setdefault(pipeline.sync_version, texts)
        assert texts == kept, t_s
        moved = bool((pipeline.node_version != versions).any())
        hot_only_rewrites += int(moved and pipeline.sync_version == syncs)
    assert len(metric_texts_at) > 3  # the metrics synced, with new texts
    assert hot_only_rewrites > 3  # and the hot value alone moved versions between them

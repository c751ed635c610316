"""A pod's estimate raised to what its workload's running pods are observed to use
(``app.load.estimate``: ``workload_per_pod_usage``, ``with_workload_usage``,
``estimate_scheduled``, and ``PlacedPod.observed`` through ``node_unsampled``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.load import (
    UNDER_REQUESTED_FACTOR,
    Evidence,
    PlacedPod,
    estimate_scheduled,
    estimate_with_evidence,
    may_rise,
    nearest_rank_index,
    node_unsampled,
    with_workload_usage,
    workload_per_pod_usage,
)
from app.load.samples import format_usage
from app.objects import Resources
from app.policy import DEFAULT_POLICY_YAML, default_policy, policy_from_yaml
from app.policy_check.main import describe

NOW_S = 1_700_000_000.0
GiB = 2.0**30
MiB = 2.0**20
POLICY = default_policy()
SETTINGS = POLICY.spec.estimation
EIGHT_CPUS = Resources(8.0, 32 * GiB)
# crane-style-waves' cpusvc: requests 100m and 256Mi, no limit, uses ~0.7 core
CPUSVC_REQUESTS = Resources(0.1, 256 * MiB)


def test_one_pod_of_a_workload_is_the_90th_percentile_of_its_pods_by_nearest_rank() -> None:
    pods = [Resources(0.1 * i, i * GiB) for i in range(1, 11)]  # 0.1 .. 1.0 cores
    observed = workload_per_pod_usage(reversed(pods))
    assert observed is not None
    assert observed.cpu_cores == pytest.approx(0.9)
    assert observed.memory_bytes == 9 * GiB
    assert workload_per_pod_usage([Resources(0.7, GiB)]) == Resources(0.7, GiB)
    assert workload_per_pod_usage([Resources(0.2, GiB), Resources(0.7, 2 * GiB)]) == Resources(
        0.7, 2 * GiB
    )


@pytest.mark.parametrize(("count", "index"), [(1, 0), (2, 1), (9, 8), (10, 8), (11, 9), (20, 17)])
def test_the_nearest_rank_is_counted_in_integers(count: int, index: int) -> None:
    assert nearest_rank_index(count) == index


def test_no_pods_or_only_garbage_observe_nothing() -> None:
    assert workload_per_pod_usage([]) is None
    garbage = [Resources(math.nan, -1.0), Resources(math.inf, math.inf)]
    assert workload_per_pod_usage(garbage) is None
    # garbage in one pod leaves the others
    assert workload_per_pod_usage([Resources(math.nan, GiB), Resources(0.5, -5.0)]) == Resources(
        0.5, GiB
    )


def test_an_under_requested_workloads_pod_is_estimated_at_its_observed_usage() -> None:
    """The cpusvc of crane-style-waves: 100m requested (85m estimated), 0.7 core used."""
    before = estimate_scheduled(CPUSVC_REQUESTS, Resources(), SETTINGS)
    assert before.cpu_cores == pytest.approx(0.085)
    raised = estimate_scheduled(CPUSVC_REQUESTS, Resources(), SETTINGS, Resources(0.7, 400 * MiB))
    assert raised.cpu_cores == pytest.approx(0.7)
    # 400Mi is 2.2x its 179Mi estimate: within the factors' guess, kept
    assert raised.memory_bytes == pytest.approx(0.7 * 256 * MiB)


@pytest.mark.parametrize(
    ("observed", "expected_cpu"),
    [
        (0.2, 0.085),  # 2.4x the estimate: within the factors' guess, kept
        (0.255, 0.255),  # exactly 3x: raised
        (0.0, 0.085),
        (-1.0, 0.085),
        (math.nan, 0.085),
        (math.inf, 0.085),
    ],
)
def test_only_a_wide_gap_and_a_real_number_raise_the_estimate(
    observed: float, expected_cpu: float
) -> None:
    raised = estimate_scheduled(CPUSVC_REQUESTS, Resources(), SETTINGS, Resources(observed, 0.0))
    assert raised.cpu_cores == pytest.approx(expected_cpu)
    assert UNDER_REQUESTED_FACTOR == 3.0


def test_the_observed_usage_is_capped_by_the_pods_limit() -> None:
    """A limit caps the observed value; with factors below 1/3 it can still raise."""
    settings = policy_from_yaml(
        DEFAULT_POLICY_YAML + "  estimation:\n    factors: {cpu: 0.2, memory: 0.7}\n"
    ).spec.estimation
    limits = Resources(1.0, 0.0)
    raised = estimate_scheduled(Resources(0.1, 0.0), limits, settings, Resources(5.0, 0.0))
    assert raised.cpu_cores == pytest.approx(1.0)  # the limit, not the 5 cores observed


@settings(deadline=None)  # pure and fast, but the suite runs on shared machines
@given(
    cpu=st.floats(allow_nan=True, allow_infinity=True),
    memory=st.floats(allow_nan=True, allow_infinity=True),
    request=st.floats(0.0, 64.0),
    limit=st.floats(0.0, 64.0),
)
def test_the_observed_usage_never_lowers_an_estimate(
    cpu: float, memory: float, request: float, limit: float
) -> None:
    requests, limits = Resources(request, request * GiB), Resources(limit, limit * GiB)
    plain = estimate_scheduled(requests, limits, SETTINGS)
    raised = with_workload_usage(plain, Resources(cpu, memory), limits)
    assert raised.cpu_cores >= plain.cpu_cores
    assert raised.memory_bytes >= plain.memory_bytes
    for value, before, cap in (
        (raised.cpu_cores, plain.cpu_cores, limit),
        (raised.memory_bytes, plain.memory_bytes, limit * GiB),
    ):
        assert math.isfinite(value)
        if cap > 0:
            assert value <= max(before, cap)


def test_a_pod_placed_around_the_scheduler_is_not_raised() -> None:
    observed = Resources(0.7, 0.0)
    scored = estimate_with_evidence(
        CPUSVC_REQUESTS, Resources(), Evidence.SCORED, SETTINGS, EIGHT_CPUS, observed
    )
    placed = estimate_with_evidence(
        CPUSVC_REQUESTS, Resources(), Evidence.PLACED, SETTINGS, EIGHT_CPUS, observed
    )
    assert scored.cpu_cores == pytest.approx(0.7)
    assert placed.cpu_cores == pytest.approx(0.085)


def test_a_raised_estimate_is_at_most_the_nodes_allocatable() -> None:
    raised = estimate_with_evidence(
        CPUSVC_REQUESTS, Resources(), Evidence.BOUND, SETTINGS, EIGHT_CPUS, Resources(500.0, 0.0)
    )
    assert raised.cpu_cores == 8.0


def test_workload_usage_off_in_the_policy_keeps_the_estimate() -> None:
    settings = policy_from_yaml(
        DEFAULT_POLICY_YAML + "  estimation:\n    workloadUsage: false\n"
    ).spec.estimation
    assert not settings.workload_usage
    plain = estimate_scheduled(CPUSVC_REQUESTS, Resources(), settings, Resources(0.7, 0.0))
    assert plain.cpu_cores == pytest.approx(0.085)


def test_a_wave_of_just_bound_pods_counts_at_its_workloads_observed_usage() -> None:
    """Five cpusvc pods on an 8-CPU node at 40 %: 5 x 85m is 5 points, 5 x 0.7 core 44
    points, which takes the node over the 0.65 limit of cpu_usage_avg_5m."""
    annotations = {m: format_usage(0.4, NOW_S - 60) for m in POLICY.metrics}
    plain = [PlacedPod(CPUSVC_REQUESTS, Resources(), NOW_S - 30) for _ in range(5)]
    observed = [
        PlacedPod(CPUSVC_REQUESTS, Resources(), NOW_S - 30, observed=Resources(0.7, 0.0))
        for _ in range(5)
    ]
    before = node_unsampled(plain, annotations, EIGHT_CPUS, POLICY, NOW_S)
    after = node_unsampled(observed, annotations, EIGHT_CPUS, POLICY, NOW_S)
    assert before["cpu"] == pytest.approx(5 * 0.085 / 8)
    assert after["cpu"] == pytest.approx(5 * 0.7 / 8)
    assert 0.4 + before["cpu"] < 0.65 < 0.4 + after["cpu"]


def test_policy_check_says_whether_workload_usage_raises_the_estimate() -> None:
    assert "what its workload's pods are seen to use" in describe(default_policy())
    off = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {workloadUsage: false}\n")
    assert "workloadUsage off: from requests and limits alone" in describe(off)


@settings(deadline=None)
@given(
    cpu=st.floats(0.0, 1e4),
    memory=st.floats(0.0, 1e13),
    request=st.floats(0.0, 64.0),
    limit=st.sampled_from([0.0, 0.05, 0.5, 4.0]),
    memory_limit=st.sampled_from([0.0, 1e8, 4e9]),
)
def test_a_shape_that_may_not_rise_is_never_raised(
    cpu: float, memory: float, request: float, limit: float, memory_limit: float
) -> None:
    """What lets the extender skip the workload lookup for most pods: ``may_rise`` False
    means no observed usage can change the estimate."""
    requests, limits = Resources(request, request * GiB), Resources(limit, memory_limit)
    plain = estimate_scheduled(requests, limits, SETTINGS)
    if not may_rise(requests, limits, SETTINGS):
        assert with_workload_usage(plain, Resources(cpu, memory), limits) == plain


def test_with_the_default_factors_only_a_resource_without_a_limit_may_rise() -> None:
    both = Resources(1.0, GiB)
    assert not may_rise(Resources(0.1, 0.1 * GiB), both, SETTINGS)
    assert may_rise(Resources(0.1, 0.1 * GiB), Resources(1.0, 0.0), SETTINGS)
    assert may_rise(Resources(0.1, 0.1 * GiB), Resources(0.0, GiB), SETTINGS)
    off = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {workloadUsage: false}\n")
    assert not may_rise(Resources(0.1, 0.0), Resources(), off.spec.estimation)

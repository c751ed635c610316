"""A pod placed through the scheduler is estimated no higher than its workload is
measured to use (``app.load.estimate``, "Lowered to what is measured"; issue 43)."""

from __future__ import annotations

import math

import pytest

from app.load import (
    Evidence,
    PlacedPod,
    bounded_raises,
    estimate_scheduled,
    holds_raise,
    lowering,
)
from app.objects import Resources
from app.policy import DEFAULT_POLICY_YAML, default_policy, policy_from_yaml

SETTINGS = default_policy().spec.estimation
GiB = 2.0**30
REQUESTS, LIMITS = Resources(1.5, 4 * GiB), Resources(3.0, 6 * GiB)  # 2.55 cores, 4.2 GiB
MEASURED = Resources(0.6, 2 * GiB)


GUESSED_MEMORY = 6 * GiB * 0.70


def test_a_measured_workload_lowers_its_cpu_to_what_it_uses() -> None:
    """Memory keeps the guess: a pod's working set grows after its start."""
    lowered = lowering(REQUESTS, LIMITS, MEASURED, SETTINGS)
    assert lowered == Resources(0.6, GUESSED_MEMORY)
    estimate = estimate_scheduled(REQUESTS, LIMITS, SETTINGS, lowered)
    assert estimate == Resources(0.6, GUESSED_MEMORY)


def test_only_a_cpu_below_the_guess_lowers() -> None:
    """CPU measured above the guess (not 3 times it) keeps the guess, whatever memory."""
    assert lowering(REQUESTS, LIMITS, Resources(4.0, GiB), SETTINGS) is None
    assert lowering(REQUESTS, LIMITS, Resources(4.0, 5 * GiB), SETTINGS) is None


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf])
def test_no_real_positive_number_lowers_nothing(value: float) -> None:
    assert lowering(REQUESTS, LIMITS, Resources(value, value), SETTINGS) is None


def test_off_with_workload_usage() -> None:
    off = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {workloadUsage: false}\n")
    assert lowering(REQUESTS, LIMITS, MEASURED, off.spec.estimation) is None
    assert lowering(REQUESTS, LIMITS, None, SETTINGS) is None


def test_bounded_raises_lowers_pods_holding_no_raise_and_only_those_it_may() -> None:
    pods = [
        ("web", PlacedPod(REQUESTS, LIMITS, 0.0, Evidence.BOUND, MEASURED)),
        ("web", PlacedPod(REQUESTS, LIMITS, 1.0, Evidence.PLACED, MEASURED)),
        ("few", PlacedPod(REQUESTS, LIMITS, 2.0, Evidence.BOUND, MEASURED)),
    ]
    out = bounded_raises(pods, {"web": 5, "few": 2}, 3.0, SETTINGS)
    assert out[0].observed == Resources(0.6, GUESSED_MEMORY)
    assert not holds_raise(out[0], SETTINGS)
    assert out[1].observed is None  # placed around the scheduler: requests alone
    assert out[2].observed is None  # measured on fewer than MIN_MEASURED_PODS pods

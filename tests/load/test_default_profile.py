"""kube-scheduler's default profile by requests, as a table (REFERENCE §6 and §8)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from app.load.default_profile import (
    NON_ZERO_CPU_CORES,
    NON_ZERO_MEMORY_BYTES,
    fits_request,
    fits_requests,
    non_zero_requests,
    resource_score,
    resource_scores,
    taint_toleration_scores,
)

GI = 2.0**30


def one(values: list[float]) -> npt.NDArray[np.float64]:
    return np.array(values, dtype=np.float64)


def test_a_pod_that_requests_nothing_is_scored_as_100m_and_200mi() -> None:
    assert non_zero_requests(0.0, 0.0) == (NON_ZERO_CPU_CORES, NON_ZERO_MEMORY_BYTES)
    assert non_zero_requests(0.5, 0.0) == (0.5, NON_ZERO_MEMORY_BYTES)
    assert non_zero_requests(2.0, 3 * GI) == (2.0, 3 * GI)


def test_the_filter_admits_requests_up_to_allocatable_exactly() -> None:
    fits = fits_requests(
        one([4, 4, 4]), one([8 * GI] * 3), one([3, 3.5, 1]), one([1 * GI, 1 * GI, 7.5 * GI]),
        1.0, 1 * GI,
    )  # fmt: skip
    assert fits.tolist() == [True, False, False]


@pytest.mark.parametrize(
    ("scored_cpu", "scored_memory_gi", "score"),
    [
        # Empty 4-core, 16 GiB node, a pod of 1 core and 4 GiB: 75 % free of each
        # (LeastAllocated 75) and perfectly balanced (BalancedAllocation 100).
        (0.0, 0.0, 175),
        # Half the CPU requested: cpu 75 %, memory 25 % -> least (25 + 75) // 2 = 50,
        # balanced 100 - |0.75 - 0.25| / 2 * 100 = 75.
        (2.0, 0.0, 125),
        # Full: nothing free, balanced.
        (3.0, 12.0, 100),
    ],
)
def test_least_allocated_plus_balanced_allocation(
    scored_cpu: float, scored_memory_gi: float, score: int
) -> None:
    scores = resource_scores(
        one([4]), one([16 * GI]), one([scored_cpu]), one([scored_memory_gi * GI]), 1.0, 4 * GI
    )
    assert scores.tolist() == [score]


def test_the_emptier_node_wins_by_requests() -> None:
    scores = resource_scores(one([8, 8]), one([32 * GI] * 2), one([6, 2]), one([24 * GI, 8 * GI]),
                             0.5, 1 * GI)  # fmt: skip
    assert scores[1] > scores[0]


@pytest.mark.parametrize(
    ("pod_cpu", "pod_memory"),
    [(NON_ZERO_CPU_CORES, NON_ZERO_MEMORY_BYTES), (0.25, 1 * GI), (2.0, 64 * GI), (50.0, 0.5 * GI)],
)
def test_one_nodes_score_in_plain_floats_is_the_arrays_score(
    pod_cpu: float, pod_memory: float
) -> None:
    rng = np.random.default_rng(7)
    count = 5_000
    allocatable_cpu = rng.choice([0.0, 0.5, 4.0, 16.0, 96.0], count)
    allocatable_memory = rng.choice([0.0, 1 * GI, 16 * GI, 384 * GI], count)
    # Empty, half, full and over-committed nodes; a removal's rounding just below 0.
    scored_cpu = allocatable_cpu * rng.choice([0.0, 0.5, 1.0, 1.7], count) * rng.random(count)
    scored_cpu[::97] = -1e-17
    scored_memory = allocatable_memory * rng.random(count) * rng.choice([0.3, 1.0, 2.0], count)
    scored_memory[::89] = np.inf  # not finite: left to the array rule
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = resource_scores(
            allocatable_cpu, allocatable_memory, scored_cpu, scored_memory, pod_cpu, pod_memory
        ).tolist()
        got = [
            resource_score(*node, pod_cpu, pod_memory)
            for node in zip(
                allocatable_cpu.tolist(), allocatable_memory.tolist(),
                scored_cpu.tolist(), scored_memory.tolist(), strict=True,
            )
        ]  # fmt: skip
    assert got == expected
    assert len(set(expected)) > 20  # the inputs reach across the score range


@pytest.mark.parametrize(
    ("pod_cpu", "pod_memory"), [(0.0, 0.0), (0.25, 1 * GI), (4.0, 16 * GI), (16.0, 0.5 * GI)]
)
def test_one_nodes_fit_in_plain_floats_is_the_arrays_fit(pod_cpu: float, pod_memory: float) -> None:
    rng = np.random.default_rng(11)
    count = 5_000
    allocatable_cpu = rng.choice([0.0, 0.5, 4.0, 16.0, 96.0], count)
    allocatable_memory = rng.choice([0.0, 1 * GI, 16 * GI, 384 * GI], count)
    # Requests around the allocatable less the pod, where the slack decides; NaN fits none.
    near = rng.choice([-1e-6, 0, 5e-10, 1e-3], count)
    requested_cpu = np.maximum(allocatable_cpu - pod_cpu, 0) + near
    requested_memory = allocatable_memory * rng.random(count)
    requested_memory[::101] = np.nan
    expected = fits_requests(
        allocatable_cpu, allocatable_memory, requested_cpu, requested_memory, pod_cpu, pod_memory
    ).tolist()
    got = [
        fits_request(*node, pod_cpu, pod_memory)
        for node in zip(
            allocatable_cpu.tolist(), allocatable_memory.tolist(),
            requested_cpu.tolist(), requested_memory.tolist(), strict=True,
        )
    ]  # fmt: skip
    assert got == expected
    assert 0 < sum(expected) < count  # some fit and some do not


@pytest.mark.parametrize(
    ("untolerated", "feasible", "expected"),
    [
        ([0, 0, 0], [True] * 3, [100, 100, 100]),  # nobody tainted: all equal
        ([1, 0, 0], [True] * 3, [0, 100, 100]),  # the tainted node is the last choice
        ([2, 1, 0], [True] * 3, [0, 50, 100]),
        # Normalized over the feasible nodes only.
        ([2, 1, 0], [False, True, True], [0, 0, 100]),
        ([1, 0], [True, False], [0, 0]),
    ],
)
def test_taint_toleration_is_normalized_in_reverse_over_the_feasible_nodes(
    untolerated: list[int], feasible: list[bool], expected: list[int]
) -> None:
    scores = taint_toleration_scores(np.array(untolerated, dtype=np.int64), np.array(feasible))
    assert scores.tolist() == expected

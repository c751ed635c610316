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
    inter_pod_affinity_scores,
    node_affinity_scores,
    non_zero_requests,
    profile_scores,
    resource_score,
    resource_scores,
    spread_term,
    taint_toleration_scores,
    topology_spread_scores,
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


def ints(values: list[int]) -> npt.NDArray[np.int64]:
    return np.array(values, dtype=np.int64)


def bools(values: list[bool]) -> npt.NDArray[np.bool_]:
    return np.array(values, dtype=np.bool_)


def test_topology_spread_scores_fall_with_the_matching_pods_and_the_fewest_get_100() -> None:
    # One hostname constraint (maxSkew 3), 3 nodes: count * log(3 + 2) + 2, rounded:
    # 2, 4, 5; normalized 100 * (5 + 2 - score) // 5.
    every = bools([True, True, True])
    per_node, labelled, domains = spread_term(
        ints([0, 1, 2]), one([0, 1, 2]), every, every, hostname=True
    )
    assert domains == 3
    scores = topology_spread_scores([(per_node, labelled, 3, domains)], every)
    assert scores.tolist() == [100, 60, 40]
    # None matching anywhere: every node the same (the most is not 0: maxSkew - 1).
    per_node, labelled, domains = spread_term(
        ints([0, 1, 2]), one([0, 0, 0]), every, every, hostname=True
    )
    assert topology_spread_scores([(per_node, labelled, 3, domains)], every).tolist() == [100] * 3


def test_the_system_default_spread_adds_the_zone_and_a_node_without_one_skips_it() -> None:
    # Zones 0, 0, 1 and none; matching pods 1, 0, 2, 5. Zone term (maxSkew 5, 2 zones,
    # log 4): 1, 1, 2 and nothing; hostname term (maxSkew 3, 4 nodes, log 6).
    every = bools([True] * 4)
    matching = one([1, 0, 2, 5])
    zone = spread_term(ints([0, 0, 1, -1]), matching, every, every)
    assert zone[0].tolist() == [1, 1, 2, 0]
    assert zone[1].tolist() == [True, True, True, False]
    assert zone[2] == 2
    host = spread_term(ints([0, 1, 2, 3]), matching, every, every, hostname=True)
    terms = [(host[0], host[1], 3, host[2]), (zone[0], zone[1], 5, zone[2])]
    # Raw 9, 7, 12, 11; normalized 100 * (12 + 7 - score) // 12.
    assert topology_spread_scores(terms, every).tolist() == [83, 100, 58, 66]
    # An infeasible node scores 0, and neither its raw score nor its zone's count
    # beyond its pods: the domains are the feasible nodes'.
    feasible = bools([True, True, False, True])
    zone = spread_term(ints([0, 0, 1, -1]), matching, every, feasible)
    assert zone[2] == 1
    scores = topology_spread_scores([(zone[0], zone[1], 5, zone[2])], feasible)
    assert scores[2] == 0
    # Ignored nodes (a pod's own constraints, a key missing) score 0 and set no bound.
    ignored = bools([False, False, False, True])
    assert topology_spread_scores(terms, every, ignored)[3] == 0


def test_inter_pod_affinity_scores_lie_between_the_lowest_and_the_highest_node() -> None:
    scored = bools([True, True, True, False])
    assert inter_pod_affinity_scores(ints([0, 5, -5, 10]), scored).tolist() == [50, 100, 0, 0]
    assert inter_pod_affinity_scores(ints([3, 3, 3, 9]), scored).tolist() == [0, 0, 0, 0]


def test_preferred_node_affinity_scores_are_a_share_of_the_best_nodes() -> None:
    every = bools([True, True, True])
    assert node_affinity_scores(ints([0, 30, 60]), every).tolist() == [0, 50, 100]
    assert node_affinity_scores(ints([0, 0, 0]), every).tolist() == [0, 0, 0]


def test_the_profile_adds_each_plugin_at_its_weight() -> None:
    total = profile_scores(
        ints([100, 150]),
        toleration=ints([100, 0]),
        spread=ints([50, 100]),
        inter_pod=ints([0, 100]),
        node_affinity=ints([100, 0]),
    )
    # 1 x resources + 3 x TaintToleration + 2 x each of the other three.
    assert total.tolist() == [100 + 300 + 100 + 0 + 200, 150 + 0 + 200 + 200 + 0]
    assert profile_scores(ints([7, 9])).tolist() == [7, 9]

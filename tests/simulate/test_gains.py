"""Evictions that bought nothing (app/simulate/gains.py): settleTime after a round, its
source is not cooler by what the evicted pods used, less noise, once the pods that
stayed are taken out: what came onto the source since ate the gain."""

from __future__ import annotations

import numpy as np

from app.simulate.gains import NOISE_SHARE, EvictionGains

GI = 2.0**30


def gains() -> EvictionGains:
    return EvictionGains(300.0, np.array([10.0, 10.0]), np.array([64 * GI, 64 * GI]))


def demand(cpu: list[float]) -> tuple[np.ndarray, np.ndarray]:
    return np.array(cpu), np.full(len(cpu), 1 * GI)


def test_a_replacement_back_on_its_source_bought_nothing() -> None:
    tracker = gains()
    node_of = np.array([0, 0, 1])  # slots 0 and 1 on the hot node 0
    tracker.evicted(0, 0, 600.0, node_of, demand([2.0, 3.0, 1.0]))
    node_of = np.array([0, 0, 1])  # its replacement (the same slot, a new pod) is back
    tracker.judge(870.0, node_of, *demand([2.0, 3.0, 1.0]))
    assert (tracker.judged, tracker.bought_nothing) == (0, 0)  # not due before settleTime
    tracker.judge(900.0, node_of, *demand([2.0, 3.0, 1.0]))
    assert (tracker.judged, tracker.bought_nothing) == (1, 1)


def test_a_replacement_placed_elsewhere_bought_its_usage() -> None:
    tracker = gains()
    tracker.evicted(0, 0, 600.0, np.array([0, 0, 1]), demand([2.0, 3.0, 1.0]))
    tracker.judge(900.0, np.array([1, 0, 1]), *demand([2.0, 3.0, 1.0]))
    assert (tracker.judged, tracker.bought_nothing) == (1, 0)


def test_a_new_pod_that_takes_the_freed_room_makes_the_eviction_buy_nothing() -> None:
    tracker = gains()
    tracker.evicted(0, 0, 600.0, np.array([0, 0, -1]), demand([2.0, 3.0, 0.0]))
    # Slot 2 (a pod created since, or the replacement) landed on the source, using as
    # much as the evicted pod did; the pod that stayed grew, which is not held against it.
    tracker.judge(900.0, np.array([1, 0, 0]), *demand([2.0, 5.0, 2.0]))
    assert (tracker.judged, tracker.bought_nothing) == (1, 1)


def test_a_round_is_judged_as_one_on_the_resource_its_pods_were_most_of() -> None:
    tracker = gains()
    node_of = np.array([0, 0, 0, -1])
    last = demand([2.0, 2.0, 3.0, 0.0])
    tracker.evicted(0, 0, 600.0, node_of, last)
    tracker.evicted(1, 0, 600.0, node_of, last)
    # 4 cores left; 1.9 came back: less than half of them.
    came = 4.0 * NOISE_SHARE - 0.1
    tracker.judge(900.0, np.array([1, 1, 0, 0]), *demand([2.0, 2.0, 3.0, came]))
    assert (tracker.judged, tracker.bought_nothing) == (2, 0)
    tracker.evicted(2, 0, 1200.0, np.array([1, 1, 0, 0]), demand([2.0, 2.0, 3.0, came]))
    tracker.judge(1500.0, np.array([1, 0, 0, 0]), *demand([2.0, 2.0, 3.0, came]))
    assert (tracker.judged, tracker.bought_nothing) == (3, 1)  # slot 1 came: 2 of its 3 cores


def test_a_round_past_the_end_of_the_run_is_not_judged() -> None:
    tracker = gains()
    tracker.evicted(0, 0, 600.0, np.array([0]), demand([2.0]))
    assert (tracker.judged, tracker.bought_nothing) == (0, 0)

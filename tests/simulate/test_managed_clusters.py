"""Issue 40: beside a stock kube-scheduler (no extender), the descheduler cools hot spots
that grow after placement as well as beside the extender, and never adds harm.

On the scenarios where hot spots grow after placement (the built-ins
small-pods-hot-spot and drifting-hot-spot; the fixtures small-pods-32cpu, many small
pods on 32-CPU nodes; memory-hot-spot, 64-CPU / 256-GiB nodes; two-peaks-200, a day
of two peaks on 200 nodes, over its first peak), the checks of
``scripts/managed_clusters.py`` (``managed_checks``, one definition):

* ``default+taints+desched`` spends at most 1.25x the node-minutes above the limits of
  ``loadaware+desched``, and at most half of ``default+taints``' wherever
  ``loadaware+desched`` halves ``loadaware``'s;
* no eviction buys nothing (``app/simulate/gains.py``), under any +desched policy;
* ``default+desched`` and ``default+taints+desched`` add no harm (throttled
  CPU-minutes + OOM events) and no pending pod-minutes over ``default`` and
  ``default+taints``.

A few seeds here (each run is made once per session, ``tests/simulate/runs.py``); the
script runs them over seeds 1-20 (docs/tuning.md has the numbers)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.simulate.summary import Summary, summarise
from tests.simulate.test_no_harm import simulate
from tests.support.scripts import load_script

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "simulate"


script = load_script("managed_clusters")
TWO_PEAKS_FIRST_PEAK_S = 6 * 3600.0  # its first peak at 4h; the whole day costs ~40 CPU-s

CASES = [
    ("small-pods-hot-spot", 1, None),
    ("small-pods-hot-spot", 2, None),
    ("drifting-hot-spot", 1, None),
    (str(FIXTURES / "small-pods-32cpu.yaml"), 1, None),
    (str(FIXTURES / "memory-hot-spot.yaml"), 1, None),
    # Three sources short of one round's per-workload limits until the plan shared them.
    (str(FIXTURES / "memory-hot-spot.yaml"), 9, None),
    (str(FIXTURES / "two-peaks-200.yaml"), 1, TWO_PEAKS_FIRST_PEAK_S),
]


def summaries(name: str, seed: int, duration_s: float | None) -> dict[str, Summary]:
    return {
        policy: summarise(simulate(name, policy, seed, duration_s)) for policy in script.POLICIES
    }


@pytest.mark.parametrize(("name", "seed", "duration_s"), CASES)
def test_beside_a_stock_scheduler_the_descheduler_cools_as_beside_the_extender_and_adds_no_harm(
    name: str, seed: int, duration_s: float | None
) -> None:
    by_policy = summaries(name, seed, duration_s)
    assert script.managed_checks(by_policy) == [], (name, seed)
    # Where loadaware's descheduler cools at all, so does it beside soft taints.
    with_taints = by_policy["default+taints+desched"]
    if by_policy["loadaware+desched"].evictions:
        assert with_taints.evictions > 0, (name, seed)
        assert script.above(with_taints) < script.above(by_policy["default+taints"]), (name, seed)


def test_the_checks_fail_where_the_issue_found_the_descheduler_beside_soft_taints() -> None:
    """What main did on small-pods-hot-spot (0 evictions beside soft taints, 314
    node-minutes against 35) fails the checks; and an eviction that bought nothing, or
    harm added, does."""
    by_policy = summaries("small-pods-hot-spot", 1, None)
    stuck = dict(by_policy, **{"default+taints+desched": by_policy["default+taints"]})
    assert "default+taints+desched above 1.25x loadaware+desched" in script.managed_checks(stuck)
    wasted = dict(by_policy)
    wasted["default+desched"] = dataclasses.replace(
        by_policy["default+desched"], evictions_bought_nothing=3, throttled_cpu_minutes=20.0
    )
    failed = script.managed_checks(wasted)
    assert "default+desched adds harm" in failed
    assert "default+desched: 3 evictions bought nothing" in failed


# Seeds where default+taints+desched added harm over default+taints. Seed 3, before the
# planner counted pending pods: 2,268 throttled CPU-minutes against 2,162 and a pod evicted
# twice (an api replacement and a pending etl pod picked the same node); then 2,062, then
# 2,166 with the moves made while the etl wave arrives left out (an etl pod moved at 315
# minutes, with 8 of 12 nodes hot, to the one of its tied nodes it took to ~90 %); 2,162 now
# (the plan takes no tie with a hot landing while half the nodes are hot). Seed 19: 2,415
# against 1,367 (one api move at 95 minutes, while the wave still arrived, sent a third etl
# pod to node-8); 1,367 now (the plan stands down while the next etl pod takes no node
# cool: ``wave_ahead``). docs/tuning.md, "Pending pods beside the stock scheduler".
@pytest.mark.parametrize("seed", [3, 19])
def test_beside_soft_taints_the_descheduler_adds_no_harm_beside_a_batch_wave(seed: int) -> None:
    name = str(FIXTURES / "big-batch-beside-services.yaml")
    without, with_it = (
        summarise(simulate(name, policy, seed))
        for policy in ("default+taints", "default+taints+desched")
    )
    assert script.harm(with_it) <= script.harm(without)
    assert with_it.pending_pod_minutes <= without.pending_pod_minutes
    assert with_it.evictions_bought_nothing == 0
    assert with_it.pods_evicted_repeatedly == 0


def test_the_script_on_two_processes_gives_the_same_rows_in_the_same_order() -> None:
    pairs = [("small-pods-hot-spot", 2), ("small-pods-hot-spot", 1)]
    serial = list(script.measured(pairs))
    pooled = list(script.measured(pairs, jobs=2))
    assert [(name, seed) for name, seed, _ in pooled] == pairs
    assert pooled == serial

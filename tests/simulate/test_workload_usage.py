"""The simulated annotator publishes each workload's observed per-pod usage by the
production rule, and the simulated extender raises its estimate of a just-bound pod to
it by the production rule (``app.load``), as loadaware ships."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from app.load import estimate_scheduled, nearest_rank_index, workload_per_pod_usage
from app.objects import Resources
from app.policy import DEFAULT_POLICY_YAML
from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.estimation import BurstEstimate
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.summary import summarise
from app.simulate.workload_usage import SimulatedWorkloadUsage, _percentile_per_workload

WAVES = str(Path(__file__).parents[1] / "fixtures" / "simulate" / "crane-style-waves.yaml")


def test_the_published_usage_is_the_production_percentile_per_workload() -> None:
    """Random pods of three workloads (one with none running): the vectorized publication
    equals ``app.load.workload_per_pod_usage`` over each workload's running pods."""
    rng = np.random.default_rng(7)
    workload_of = np.sort(rng.integers(0, 3, 40))
    workload_of[workload_of == 2] = 1  # workload 2 has no pods at all
    published = SimulatedWorkloadUsage(
        workload_of, 3, scrape_interval_s=30.0, publish_period_s=180.0
    )
    bound = rng.random(40) < 0.8
    cpu = rng.uniform(0.1, 2.0, 40)
    memory = rng.uniform(1e8, 4e9, 40)
    for step in range(7):  # 0s .. 180s: scrapes every 30s, a publication at 180s
        published.advance(step * 30.0, bound)
        published.account(cpu, memory, bound, 30.0)
    assert published.version == 1
    for workload in range(2):
        pods = [
            Resources(float(cpu[i]), float(memory[i]))
            for i in np.flatnonzero(bound & (workload_of == workload))
        ]
        expected = workload_per_pod_usage(pods)
        observed = published.observed(workload)
        assert expected is not None
        assert observed is not None
        assert observed.cpu_cores == pytest.approx(expected.cpu_cores)
        assert observed.memory_bytes == pytest.approx(expected.memory_bytes)
    assert published.observed(2) is None


@pytest.mark.parametrize("seed", range(3))
def test_each_workloads_percentile_is_its_values_sorted_at_the_nearest_rank(seed: int) -> None:
    """Against the values sorted by workload, then value (stably): ties, signed zeros,
    a workload of one pod and workloads with none."""
    rng = np.random.default_rng(seed)
    count = 9
    drawn = rng.choice([0, 1, 2, 4, 5, 8], 499, p=[0.3, 0.3, 0.2, 0.1, 0.09, 0.01])
    workloads = np.sort(np.append(drawn[drawn != 7], [7]))  # 7: one pod alone
    size = len(workloads)
    values = rng.choice([0.0, -0.0, 0.5, 1.25, 3.0], size) * rng.choice([1.0, 1.0, 0.3], size)
    values[workloads == 1] = rng.random(int((workloads == 1).sum()))
    values[workloads == 4] = rng.choice([0.0, -0.0], int((workloads == 4).sum()))  # all zero
    published = _percentile_per_workload(values, workloads, count)
    order = np.lexsort((values, workloads))
    for workload in range(count):
        run = values[order][workloads[order] == workload]
        if len(run) == 0:
            assert np.isnan(published[workload])
            continue
        expected = run[nearest_rank_index(len(run))]
        assert published[workload] == expected
        assert np.signbit(published[workload]) == np.signbit(expected)


def simulate(seed: int, policy: str = "loadaware", workload_usage: bool = True) -> Run:
    scenario = load_scenario(WAVES).model_copy(update={"seed": seed})
    if not workload_usage:
        document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
        document["spec"]["estimation"] = {"workloadUsage": False}
        scenario = scenario.model_copy(update={"policy": document})
    return SimulatedCluster(scenario, plan_for(policy)).simulate()


def test_the_next_pod_of_an_under_requested_workload_is_estimated_at_its_usage() -> None:
    """cpusvc requests 100m and uses ~0.7 core: once its pods run, the extender's
    estimate of the next one is what they use (at least 3x the 85m), not 85m; memsvc,
    whose CPU is 2.4x its estimate, keeps its estimate."""
    scenario = load_scenario(WAVES).model_copy(update={"seed": 1, "duration_s": 3600.0})
    cluster = SimulatedCluster(scenario, plan_for("loadaware"))
    cluster.simulate()
    names = [w.name for w in scenario.workloads]
    cpusvc, memsvc = names.index("cpusvc"), names.index("memsvc")
    published = cluster.state.workload_usage
    assert published is not None
    observed = published.observed(cpusvc)
    assert observed is not None
    assert 0.6 < observed.cpu_cores < 1.7
    requests, limits = scenario.workloads[cpusvc].pod_requests_and_limits
    expected = estimate_scheduled(requests, limits, cluster.state.policy.spec.estimation, observed)
    assert cluster.state.shapes[cpusvc].estimate_cpu_cores == pytest.approx(expected.cpu_cores)
    assert cluster.state.shapes[cpusvc].estimate_cpu_cores == pytest.approx(observed.cpu_cores)
    assert cluster.state.shapes[memsvc].estimate_cpu_cores == pytest.approx(0.085)


def test_crane_and_a_policy_without_workload_usage_publish_nothing() -> None:
    scenario = load_scenario(WAVES).model_copy(update={"seed": 1, "duration_s": 1800.0})
    assert SimulatedCluster(scenario, plan_for("crane")).state.workload_usage is None
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["estimation"] = {"workloadUsage": False}
    off = scenario.model_copy(update={"policy": document})
    assert SimulatedCluster(off, plan_for("loadaware")).state.workload_usage is None


def harm(run: Run) -> float:
    summary = summarise(run)
    return summary.throttled_cpu_minutes + summary.oom_events


def test_on_spiky_waves_the_spread_keeps_a_wave_apart_with_or_without_the_raise() -> None:
    """crane-style-waves, seeds 1-5: a wave of cpusvc pods estimated at 85m piled 4-5
    onto the coolest node (seed 1-5 harm 0, 2.4, 2.2, 1.8 and 4.3 throttled
    CPU-minutes) while kube-scheduler was modelled without its topology spread under
    loadaware; estimated at what cpusvc's pods use, the wave spread (the sum fell by
    more than three quarters). With the system-default spread modelled under every
    policy (issue 40), the spread itself keeps a ReplicaSet's wave apart, raise or not:
    at most 0.11 throttled CPU-minutes over the five seeds without it. With it, no seed
    gets worse but seed 2, by one step of one node at 100 % (0.37): pinned, so that a
    fix shows."""
    before, after = [], []
    for seed in range(1, 6):
        before.append(harm(simulate(seed, workload_usage=False)))
        after.append(harm(simulate(seed)))
        if seed == 2:
            assert before[-1] == 0.0 < after[-1] <= 0.4, (seed, after[-1])
            continue
        assert after[-1] <= before[-1] + 1e-9, (seed, before[-1], after[-1])
    assert sum(before) < 0.2, before  # 12.7 with the spread left out


def test_an_array_changed_in_place_between_steps_is_accounted_as_changed() -> None:
    """``account`` keeps what a step adds for the same read-only arrays; a caller's
    writable array changed in place is new numbers, as fresh copies are."""
    workload_of = np.zeros(6, dtype=np.int64)
    bound = np.ones(6, dtype=np.bool_)
    in_place, copied = (
        SimulatedWorkloadUsage(workload_of, 1, scrape_interval_s=30.0, publish_period_s=180.0)
        for _ in range(2)
    )
    cpu, memory = np.full(6, 0.5), np.full(6, 1e9)
    for step in range(7):
        in_place.advance(step * 30.0, bound)
        copied.advance(step * 30.0, bound)
        cpu[:] = 0.5 + step / 10
        memory[:] = 1e9 * (1 + step)
        in_place.account(cpu, memory, bound, 30.0)
        copied.account(cpu.copy(), memory.copy(), bound.copy(), 30.0)
    assert in_place.version == copied.version == 1
    assert in_place.observed(0) == copied.observed(0)
    assert copied.observed(0) is not None
    assert copied.observed(0) != Resources(0.5, 1e9)


def test_a_publication_after_quiet_steps_still_follows_the_next_change() -> None:
    """Quiet scrapes (the same read-only arrays) publish the same numbers again; the
    first change of usage or memory after them is published."""
    slots = 4
    published = SimulatedWorkloadUsage(
        np.zeros(slots, dtype=np.int64), 1, scrape_interval_s=30.0, publish_period_s=180.0
    )
    bound = np.ones(slots, dtype=np.bool_)

    def frozen(value: float) -> np.ndarray:
        array = np.full(slots, value)
        array.flags.writeable = False
        return array

    bound.flags.writeable = False
    low, high, memory, more_memory = frozen(0.5), frozen(1.5), frozen(1e9), frozen(2e9)
    # Publications every 6 steps; the window is the last 10 scrapes.
    phases = [(low, memory, 13), (high, memory, 24), (high, more_memory, 12)]
    seen: dict[int, Resources | None] = {}
    step = 0
    for cpu, memory_now, steps in phases:
        for _ in range(steps):
            published.advance(step * 30.0, bound)
            seen[step] = published.observed(0)
            published.account(cpu, memory_now, bound, 30.0)
            step += 1
    assert seen[6] == seen[12] == Resources(0.5, 1e9)
    changed = seen[18]  # the CPU changed, the memory did not
    assert changed is not None
    assert changed.cpu_cores > 0.5
    assert changed.memory_bytes == 1e9
    assert seen[36] == Resources(1.5, 1e9)
    assert seen[42] == Resources(1.5, 2e9)  # the memory changed, the CPU did not


def test_a_workload_measured_on_fewer_than_three_pods_observes_nothing() -> None:
    """As the annotator publishes (app.load.estimate, "Bounds"): two running pods'
    usage raises nothing; the count of pods measured is published with it."""
    workload_of = np.array([0, 0, 1, 1, 1], dtype=np.int64)
    published = SimulatedWorkloadUsage(
        workload_of, 2, scrape_interval_s=30.0, publish_period_s=180.0
    )
    bound = np.ones(5, dtype=np.bool_)
    cpu, memory = np.full(5, 0.7), np.full(5, 1e9)
    for step in range(7):
        published.advance(step * 30.0, bound)
        published.account(cpu, memory, bound, 30.0)
    assert published.pods.tolist() == [2, 3]
    assert published.observed(0) is None
    assert published.observed(1) == Resources(pytest.approx(0.7), 1e9)  # type: ignore[arg-type]


def test_no_more_pods_of_a_wave_are_raised_at_once_than_its_workload_had_measured() -> None:
    """crane-style-waves seed 1: cpusvc's first wave is 8 pods, and the publication
    while it lands has measured fewer; the pods raised at once are never more than the
    pods measured (the extender's bound, app.load.bounded_raises)."""
    scenario = load_scenario(WAVES).model_copy(update={"seed": 1, "duration_s": 2400.0})
    cluster = SimulatedCluster(scenario, plan_for("loadaware"))
    estimate = cluster.estimate
    assert isinstance(estimate, BurstEstimate)
    names = [w.name for w in scenario.workloads]
    cpusvc = names.index("cpusvc")
    seen_cap = []
    original = estimate._raises.decide

    def decide(slot: int, bound_at_s: float) -> None:
        original(slot, bound_at_s)
        published = cluster.state.workload_usage
        assert published is not None
        if cluster.state.usage.workload_of.item(slot) == cpusvc:
            held = [e for e in estimate._raises._ends.get(cpusvc, ()) if e > bound_at_s]
            seen_cap.append((len(held), published.pods.item(cpusvc)))

    estimate._raises.decide = decide  # type: ignore[method-assign]
    cluster.simulate()
    assert seen_cap, "no cpusvc pod was bound"
    assert all(held <= measured for held, measured in seen_cap if measured >= 3)
    assert any(held == measured for held, measured in seen_cap if measured >= 3), seen_cap

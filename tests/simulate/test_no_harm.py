"""The simulator judges the descheduler: on every built-in scenario and 5 seeds, a
``+desched`` row adds no throttled CPU-minutes or OOM events over the same scheduler
without it (``default`` and ``default+taints`` included: the descheduler then plans in
its ``requests`` and ``soft-taints`` modes), beside loadaware it evicts no pod twice
within the cooldown and with soft taints no pod twice at all; where it can help (the
drifting hot spot, a hot spot of many small pods) it clearly does.

Kept lean: a ``+desched`` run that evicts nothing is the run without it, step for step
(``test_a_descheduler_that_evicts_nothing_leaves_the_run_as_it_was``), so the run
without it is only made where the descheduler evicted. Each seed is a test of its own,
so that the suite's workers share them out. thousand-nodes is run beside loadaware,
its whole day on seed 1 and its first hour (the placement of its 12,000 pods) on
the other seeds: a day costs ~16 CPU-seconds, and there the schedulers place alike and no node
ever gets hot; beside ``default`` and ``default+taints``, its first hour on seed 1."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml

from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.descheduling import PlannerRebalancer
from app.simulate.policies import plan_for
from app.simulate.scenario import builtin_names, load_scenario
from app.simulate.summary import summarise
from tests.simulate.runs import simulated

SEEDS = (1, 2, 3, 4, 5)
UNSEEN_SEEDS = range(6, 21)
LARGE = "thousand-nodes"
# Beyond seed 1, thousand-nodes runs its first hour: the placement of its 12,000 pods
# and the descheduler's first runs over it. Its whole day (every service's peak) costs
# ~16 CPU-seconds a seed and policy, and runs on seed 1.
LARGE_UNSEEN_HORIZON_S = 3600.0
CASES = [
    (name, base)
    for name in builtin_names()
    for base in (("loadaware",) if name == LARGE else ("default", "crane", "loadaware"))
]
# Beside a kube-scheduler without the extender: placing by requests (the descheduler in
# its ``requests`` mode), or steered by soft taints (``soft-taints``).
REQUEST_BASED = ("default", "default+taints")
SEEDED_CASES = [
    *((name, base, seed) for seed in SEEDS for name, base in CASES),
    *(
        (name, "default+taints", seed)
        for seed in SEEDS
        for name in builtin_names()
        if name != LARGE
    ),
    # thousand-nodes beside a request-based scheduler: its first hour on seed 1 (no node
    # gets hot there and nothing is evicted, on seeds 1-5 either; each costs ~3-5
    # CPU-seconds).
    *((LARGE, base, SEEDS[0]) for base in REQUEST_BASED),
]


def simulate(name: str, policy: str, seed: int, duration_s: float | None = None) -> Run:
    """One run, made once per session (tests/simulate/runs.py) for every test that asks."""
    scenario = load_scenario(name)
    update: dict[str, float | int] = {"seed": seed}
    if duration_s is not None:
        update["duration_s"] = duration_s
    return simulated(scenario.model_copy(update=update), policy).run


def run(name: str, policy: str, seed: int) -> Run:
    """One run over the scenario's whole duration."""
    return simulate(name, policy, seed)


def harm(run_: Run) -> float:
    summary = summarise(run_)
    return summary.throttled_cpu_minutes + summary.oom_events


def harm_without_and_with(
    name: str, base: str, seed: int, duration_s: float | None = None
) -> tuple[float, float, Run]:
    """Harm beside ``base`` without and with the descheduler, and the run with it."""
    if duration_s is None:
        with_it = run(name, f"{base}+desched", seed)
    else:
        with_it = simulate(name, f"{base}+desched", seed, duration_s)
    if not with_it.evictions:
        return harm(with_it), harm(with_it), with_it
    without = run(name, base, seed) if duration_s is None else simulate(
        name, base, seed, duration_s)
    return harm(without), harm(with_it), with_it


def test_a_descheduler_that_evicts_nothing_leaves_the_run_as_it_was() -> None:
    """What lets the tests below skip the run without it where nothing was evicted:
    the planner only reads the cluster, and demand is drawn per slot and step."""
    without, with_it = run("evenly-busy", "loadaware", 1), run("evenly-busy",
                                                                 "loadaware+desched", 1)
    assert with_it.evictions == []
    assert with_it.placements == without.placements
    assert np.array_equal(with_it.cpu_utilisation, without.cpu_utilisation)
    assert np.array_equal(with_it.memory_utilisation, without.memory_utilisation)
    assert harm(with_it) == harm(without)


@pytest.mark.parametrize(("name", "base", "seed"), SEEDED_CASES)
def test_the_descheduler_never_adds_harm(name: str, base: str, seed: int) -> None:
    whole_day = base == "loadaware" and seed == SEEDS[0]
    horizon = LARGE_UNSEEN_HORIZON_S if name == LARGE and not whole_day else None
    without, with_harm, with_it = harm_without_and_with(name, base, seed, horizon)
    assert with_harm <= without + 1e-9, (name, base, seed)
    if base == "default+taints":
        assert summarise(with_it).pods_evicted_repeatedly == 0, (name, seed)
    if base == "loadaware":
        cooldown_s = load_scenario(name).descheduler_config().workload_cooldown
        times: dict[int, list[float]] = {}
        for eviction in with_it.evictions:
            times.setdefault(eviction.slot, []).append(eviction.t_s)
        for slot, at in times.items():
            gaps = [later - earlier for earlier, later in itertools.pairwise(at)]
            assert all(gap >= cooldown_s for gap in gaps), (name, seed, slot, at)


@pytest.mark.parametrize("seed", UNSEEN_SEEDS)
@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("base", ["crane", "loadaware"])
def test_beside_a_load_aware_scheduler_it_adds_no_harm_on_seeds_it_was_not_built_on(
    base: str, name: str, seed: int
) -> None:
    """Seeds 6-20 were never looked at while the planner was built, on every built-in
    scenario (thousand-nodes over its first hour). A test per seed, as above:
    thousand-nodes' 15 seeds in one test kept one worker busy for a minute."""
    horizon = LARGE_UNSEEN_HORIZON_S if name == LARGE else None
    without, with_harm, _ = harm_without_and_with(name, base, seed, horizon)
    assert with_harm <= without + 1e-9, (name, base, seed)


@pytest.mark.parametrize("seed", UNSEEN_SEEDS)
@pytest.mark.parametrize("base", REQUEST_BASED)
@pytest.mark.parametrize("name", [name for name in builtin_names() if name != LARGE])
def test_beside_a_request_based_scheduler_it_adds_no_harm_on_seeds_it_was_not_built_on(
    name: str, base: str, seed: int
) -> None:
    """Beside `default` the descheduler in its old, extender-only way added harm on 11
    of these 75 runs (issue 30: the scheduler refilled each node an eviction freed);
    in the `requests` and `soft-taints` modes it adds none, and with soft taints it
    evicts no pod twice. One test per seed, so that the suite's workers share them."""
    without, with_harm, with_it = harm_without_and_with(name, base, seed)
    assert with_harm <= without + 1e-9, (name, base, seed)
    if base == "default+taints":
        assert summarise(with_it).pods_evicted_repeatedly == 0, (name, seed)


FIXTURES = Path(__file__).parents[1] / "fixtures" / "simulate"


@pytest.mark.parametrize("seed", range(1, 11))
@pytest.mark.parametrize("base", ["loadaware", "default+taints"])
def test_beside_loadaware_or_soft_taints_it_adds_no_harm_on_mixed_waves(
    base: str, seed: int
) -> None:
    """A crane-style experiment kept as a file, not a built-in: beside crane the
    descheduler still adds harm on some of its seeds. Beside loadaware it adds none,
    seed by seed; beside soft taints neither. (A rule once kept every pod whose source
    the scheduler would refill once the taint goes: without it, harm on 5 of 10 seeds,
    seed 3 from 0 to 96 throttled CPU-minutes, before the annotator judged each node
    with the next pod of a wave. It kept nearly every pod of every source, and issue 40
    removed it: this test holds that the harm did not come back.)"""
    path = str(FIXTURES / "mixed-waves.yaml")
    without, with_harm, _ = harm_without_and_with(path, base, seed)
    assert with_harm <= without + 1e-9, seed


@pytest.mark.parametrize("seed", range(1, 21))
def test_beside_loadaware_it_adds_no_harm_on_spiky_waves(seed: int) -> None:
    """crane-style-waves, seeds 1-20, seed by seed: its CPU service requests 100m, uses
    ~0.7 core and spikes by a core. Before the per-set gain rule and `other_resource`,
    the descheduler moved pods that are mostly memory off CPU-hot nodes and added
    throttling on seeds 6 and 8. After that it still added harm on seeds 9, 17 and 19
    (judged then over the seeds, 50.5 to 37.0 throttled CPU-minutes in all): the
    extender estimated a just-placed cpusvc pod from its 100m request (85m), so each
    wave piled 4-5 of them onto the coolest node, and an eviction that changed which
    node was coolest changed where the next wave piled (issue 27, point 2). Estimated
    at what cpusvc's running pods use (``app.load.estimate``: the workload's observed
    per-pod usage), a wave spreads, and the descheduler adds harm on no seed.

    With kube-scheduler's system-default topology spread modelled under loadaware too
    (issue 40) it added harm on seeds 15 and 19 at the extenderWeight 2 shipped then:
    the spread outweighed the extender, one eviction's destination took a wave's spike
    an hour later. At the shipped 8 (issue 45) it adds harm on none again."""
    path = str(FIXTURES / "crane-style-waves.yaml")
    without, with_harm, _ = harm_without_and_with(path, "loadaware", seed)
    assert with_harm <= without + 1e-9, (seed, without, with_harm)


@pytest.mark.parametrize("base", ["default", "crane", "loadaware"])
def test_where_it_cannot_help_it_evicts_nothing(base: str) -> None:
    """evenly-busy: every node as hot as the next, so there is nowhere better to go."""
    for seed in SEEDS:
        assert run("evenly-busy", f"{base}+desched", seed).evictions == [], (base, seed)


@pytest.mark.parametrize("base", ["crane", "loadaware"])
def test_where_it_can_help_it_clearly_does(base: str) -> None:
    """drifting-hot-spot: pods grow after placement; only moving pods away cools the
    nodes they share. Beside a load-aware scheduler the descheduler at least halves the
    node-minutes above the CPU limit, on every seed, and moves no pod twice (beside
    crane, seed 3 moved one pod twice while the plan took its victims' readings at face
    value, app/rebalance/plan.py ``reading_doubt``)."""
    for seed in SEEDS:
        without = summarise(run("drifting-hot-spot", base, seed))
        with_it = summarise(run("drifting-hot-spot", f"{base}+desched", seed))
        assert with_it.cpu_node_minutes_above <= without.cpu_node_minutes_above / 2, (
            base, seed, with_it.cpu_node_minutes_above, without.cpu_node_minutes_above)
        assert with_it.pods_evicted_repeatedly == 0, (base, seed)


SHIPPED_CONFIG = Path(__file__).parents[2] / "deploy" / "base" / "descheduler-config.yaml"


@pytest.mark.parametrize("base", ["crane", "loadaware"])
def test_a_hot_spot_of_many_small_pods_is_cooled(base: str) -> None:
    """small-pods-hot-spot: no service pod is 1 % of its 64-core node, so only a set of
    evictions judged together cools the ingest job's nodes. Beside a load-aware
    scheduler the descheduler at least halves the node-minutes above the CPU limit on
    every seed, adds no harm and moves no pod twice."""
    for seed in SEEDS:
        without_run = run("small-pods-hot-spot", base, seed)
        with_run = run("small-pods-hot-spot", f"{base}+desched", seed)
        without, with_it = summarise(without_run), summarise(with_run)
        assert with_it.cpu_node_minutes_above <= without.cpu_node_minutes_above / 2, (
            base, seed, with_it.cpu_node_minutes_above, without.cpu_node_minutes_above)
        assert harm(with_run) <= harm(without_run) + 1e-9, (base, seed)
        assert with_it.pods_evicted_repeatedly == 0, (base, seed)


def test_with_the_shipped_config_the_small_pods_hot_spot_cools_within_30_minutes() -> None:
    """The descheduler as shipped (deploy/base/descheduler-config.yaml: its per-run and
    per-workload limits, cooldowns, debounce and interval), with only the scenario's
    thresholds: from 30 minutes after the ingest job stops growing, no run sees a node
    above targetThresholds."""
    scenario = load_scenario("small-pods-hot-spot")
    shipped = yaml.safe_load(SHIPPED_CONFIG.read_text())
    assert scenario.descheduler is not None
    shipped.update({k: scenario.descheduler[k] for k in ("thresholds", "targetThresholds")})
    (ingest,) = [w for w in scenario.workloads if w.name == "ingest"]
    assert ingest.usage.profile == "growing"
    settled_s = ingest.usage.until_s + 30 * 60
    for seed in SEEDS:
        shaped = scenario.model_copy(update={"seed": seed, "descheduler": shipped})
        cluster = SimulatedCluster(shaped, plan_for("loadaware+desched"))
        result = cluster.simulate()
        rebalancer = cluster.rebalancer
        assert isinstance(rebalancer, PlannerRebalancer)
        assert result.evictions, seed
        late = [record for record in rebalancer.plans if record.t_s >= settled_s]
        hot = [
            (record.t_s, c.node)
            for record in late
            for c in record.plan.node_classes.values()
            if c.hot
        ]
        assert late, seed
        assert hot == [], (seed, hot[:3])

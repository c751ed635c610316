"""default+taints: the simulated annotator keeps soft taints by the production rule, and
the scheduler scores them as kube-scheduler's TaintToleration does."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from app.load.default_profile import TAINT_TOLERATION_WEIGHT, taint_toleration_scores
from app.load.taints import (
    Heat,
    SoftTaints,
    decide_soft_taints,
    judge_node,
    next_pod,
    wave_of,
)
from app.objects import Resources
from app.simulate.cluster import Placement, SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.scheduling import NodeRequests, PodShape, Scheduler
from tests.simulate.scenarios import load

GiB = 2.0**30


def taint_toleration(tainted: npt.NDArray[np.bool_], feasible: npt.NDArray[np.bool_]) -> Any:
    """What the simulated scheduler adds for loadaware's one taint (0 or 1 per node)."""
    return taint_toleration_scores(tainted.astype(np.int64), feasible)


def test_taint_toleration_is_normalized_in_reverse_over_the_feasible_nodes() -> None:
    tainted = np.array([True, False, True, False])
    feasible = np.array([True, True, False, True])
    assert taint_toleration(tainted, feasible).tolist() == [0, 100, 0, 100]
    # No feasible node is tainted: the maximum count is 0 and every feasible node gets 100.
    assert taint_toleration(tainted, np.array([False, True, False, True])).tolist() == [
        0, 100, 0, 100,
    ]  # fmt: skip
    # Every feasible node tainted: all at 0, so the taint changes no choice among them.
    assert taint_toleration(tainted, np.array([True, False, True, False])).tolist() == [
        0, 0, 0, 0,
    ]  # fmt: skip
    assert TAINT_TOLERATION_WEIGHT == 3  # the default profile's


def scheduler(tainted: list[bool], cpu: float = 8.0) -> Scheduler:
    nodes = len(tainted)
    requests = NodeRequests(np.full(nodes, cpu), np.full(nodes, 32 * GiB))
    return Scheduler(
        requests, None, 2, np.random.default_rng(1), soft_tainted=np.array(tainted)
    )


def place(step: Scheduler, pods: int, pod: PodShape) -> list[int]:
    placed = [0] * len(step.requests.allocatable_cpu)
    for _ in range(pods):
        node = step.choose(pod)
        assert node is not None
        step.requests.add(node, pod)
        placed[node] += 1
    return placed


def test_a_tainted_node_is_the_last_choice_as_on_the_real_kube_scheduler() -> None:
    """The issue's run on kube-scheduler v1.36 with its default profile: 2 of 5 empty
    nodes tainted, 30 pods of 500m went 10, 10 and 10 to the untainted three."""
    placed = place(scheduler([True, False, True, False, False]), 30, PodShape(0.5, 0.5 * GiB))
    assert placed == [0, 10, 0, 10, 10]


def test_a_tainted_node_is_never_forbidden() -> None:
    """The untainted nodes full by requests: the rest go to the tainted ones."""
    placed = place(scheduler([True, False, False], cpu=4.0), 24, PodShape(0.5, 0.5 * GiB))
    assert placed == [8, 8, 8]


def test_the_warm_taint_makes_a_node_the_second_choice_and_a_hot_one_still_the_last() -> None:
    """Node 0 hot (both taints, as while a node is warm), node 1 warm, node 2 neither:
    TaintToleration scores 0, 50 and 100, so the pods fill node 2 first, then node 1,
    and node 0 only when nothing else fits."""
    step = scheduler([True, False, False], cpu=4.0)
    step.soft_warm = np.array([True, True, False])
    placed = place(step, 8, PodShape(0.5, 0.5 * GiB))
    assert placed == [0, 0, 8]
    placed = place(step, 8, PodShape(0.5, 0.5 * GiB))
    assert placed == [0, 8, 0]
    placed = place(step, 8, PodShape(0.5, 0.5 * GiB))
    assert placed == [8, 0, 0]


def busy_and_scaled_up(**overrides: Any) -> dict[str, Any]:
    """10 nodes of 8 CPU (3 may be tainted); two carry a background job at 6 CPU from the
    start (75 %, above the 65 % limit), that requests as little as the service scaled
    up at 20m."""
    document: dict[str, Any] = {
        "name": "busy",
        "duration": "60m",
        "step": "30s",
        "nodes": [{"name": "n", "count": 10, "cpu": 8, "memory": "32Gi"}],
        "workloads": [
            {
                "name": "background",
                "replicas": 2,
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "usage": {"profile": "constant", "cpu": "6", "memory": "1Gi"},
                "placement": ["n-0", "n-1"],
            },
            {
                "name": "service",
                "replicas": 24,
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "usage": {"profile": "constant", "cpu": "1500m", "memory": "512Mi"},
                "arrival": {"at": "20m", "over": "2m"},
            },
        ],
    }
    document.update(overrides)
    return document


def test_the_annotator_taints_what_the_rule_says_from_the_annotations_the_extender_reads() -> (
    None
):
    cluster = SimulatedCluster(load(busy_and_scaled_up()), plan_for("default+taints"))
    assert cluster.soft_taints is not None
    for step in range(int(cluster.state.scenario.steps)):
        cluster.step(step)
        t_s = step * cluster.state.scenario.step_s
        rounds = cluster.soft_taints.rounds
        if not rounds or rounds[-1].t_s != t_s:
            continue
        # Judged again here, from the annotations as they stand and the extender's
        # estimate of the pods bound since: the same verdicts.
        now_s = cluster.state.pipeline.epoch_s + t_s
        margin = cluster.soft_taints.settings.release_margin
        assert cluster.estimate is not None
        for node, name in enumerate(cluster.state.node_names):
            annotations = cluster.state.pipeline.annotations(node)
            unsampled = cluster.estimate.unsampled(node, t_s)
            heat = judge_node(annotations, cluster.state.policy, now_s, margin, unsampled)
            decision = rounds[-1].decision.decisions.get(name)
            if decision is None:  # left unread: it must not have been hot
                assert heat.heat is not Heat.HOT, (t_s, name)
                assert not cluster.soft_taints.tainted[node], (t_s, name)
            elif heat.heat is Heat.HOT:
                assert decision.tainted or "over the share" in decision.reason, (
                    t_s, name, decision.reason)
            if heat.heat is Heat.UNKNOWN:
                assert not cluster.soft_taints.tainted[node], (t_s, name)
        assert cluster.soft_taints.tainted.tolist() == [
            name in rounds[-1].decision.tainted for name in cluster.state.node_names
        ]
    # The busy nodes were tainted once their 5-minute averages were written, and kept.
    first = next(r for r in cluster.soft_taints.rounds if r.decision.tainted)
    assert first.decision.tainted == {"n-0", "n-1"}
    assert first.t_s <= 10 * 60
    # The service (100m requested, 1.5 cores used) is estimated at the usage the
    # annotator publishes for it: the nodes its wave filled to 3 pods (0.56), which the
    # next like them would take over the limit (0.75), were tainted at its end and keep
    # it while above the lower line (0.55); judged on requests they looked empty.
    last = cluster.soft_taints.rounds[-1].decision
    assert cluster.soft_taints.tainted[:2].tolist() == [True, True]
    others = last.tainted - {"n-0", "n-1"}
    assert others
    assert all(last.decisions[name].reason.startswith("held above") for name in others)


@pytest.mark.parametrize("name", ["cpu-heavy", "small-pods-hot-spot"])
def test_every_heat_a_sync_keeps_is_the_heat_judged_afresh(name: str) -> None:
    """A sync reuses a node's heat while its annotations, its Measurement's life and the
    next pod hold, and judges it again otherwise; and its decision where only the clock
    could change it. Right after every sync, each heat read is what ``judge_node``
    makes of the annotations as they stand, the estimate and the next pod of the wave,
    asked afresh, and the decision what ``decide_soft_taints`` makes of them and the
    last round's memory (cpu-heavy: waves, so estimates and next pods; the small pods'
    hot spot: a node tainted and held for long)."""
    scenario = load_scenario(name).model_copy(update={"seed": 2})
    cluster = SimulatedCluster(scenario, plan_for("default+taints+desched"))
    taints, estimate = cluster.soft_taints, cluster.estimate
    assert taints is not None
    assert estimate is not None
    margin, policy = taints.settings.release_margin, cluster.state.policy
    index = {name: node for node, name in enumerate(cluster.state.node_names)}
    sync = taints.sync
    judged: list[str] = []

    def sync_and_judge_afresh(t_s: float) -> SoftTaints:
        memory = taints.rounds[-1].decision.warm_at_s if taints.rounds else {}
        decision = sync(t_s)
        now_s = cluster.state.pipeline.epoch_s + t_s
        nodes = len(cluster.state.node_names)
        assert decision == decide_soft_taints(taints.heats, memory, now_s, taints.settings, nodes)
        wave = wave_of(estimate.recent_pods(t_s), policy, now_s)
        for node_name, heat in taints.heats.items():
            node = index[node_name]
            allocatable = Resources(
                float(cluster.state.allocatable_cpu[node]),
                float(cluster.state.allocatable_memory[node]),
            )
            fresh = judge_node(
                cluster.state.pipeline.annotations(node),
                policy,
                now_s,
                margin,
                estimate.unsampled(node, t_s, partly_sampled=True),
                next_pod(wave, allocatable, policy),
            )
            assert heat == fresh, (t_s, node_name)
            judged.append(node_name)
        return decision

    taints.sync = sync_and_judge_afresh  # type: ignore[method-assign]
    cluster.simulate()
    assert len(taints.rounds) == scenario.steps  # a sync every step (the hot value's)
    assert len(judged) > len(taints.rounds)  # more than one node read per sync


def test_no_pod_lands_on_a_tainted_node_while_an_untainted_one_fits() -> None:
    cluster = SimulatedCluster(load(busy_and_scaled_up()), plan_for("default+taints"))
    landed_tainted: list[Placement] = []

    def check(sim: SimulatedCluster, placement: Placement) -> None:
        assert sim.soft_taints is not None
        if sim.soft_taints.tainted[placement.node]:
            shape = sim.state.shapes[int(sim.state.usage.workload_of[placement.slot])]
            if (sim.state.requests.fits(shape) & ~sim.soft_taints.tainted).any():
                landed_tainted.append(placement)

    cluster.on_placement = check
    run_ = cluster.simulate()
    assert landed_tainted == []
    # Without the taints the busy nodes get their share of the service and throttle.
    service_on_busy = sum(1 for p in run_.placements if p.t_s >= 0 and p.node in (0, 1))
    assert service_on_busy == 0
    plain = SimulatedCluster(load(busy_and_scaled_up()), plan_for("default")).simulate()
    assert sum(1 for p in plain.placements if p.t_s >= 0 and p.node in (0, 1)) > 0
    assert run_.throttled_core_s < plain.throttled_core_s


def test_a_wave_gets_its_node_tainted_while_it_is_still_arriving() -> None:
    """cpu-heavy's last wave (10 pods of 1.5 CPU over 5 minutes): the rule adds the
    extender's estimate of the pods bound since the samples, so a node the wave fills
    is tainted while its readings alone are still below the limit, and the rest of the
    wave goes elsewhere while the taint holds."""
    scenario = load_scenario("cpu-heavy").model_copy(update={"seed": 1})
    cluster = SimulatedCluster(scenario, plan_for("default+taints"))
    taints = cluster.soft_taints
    assert taints is not None
    assert cluster.estimate is not None  # the extender's, made for the taints too
    margin = taints.settings.release_margin
    early: list[tuple[float, int]] = []  # (when, node): tainted on its estimate
    tainted_before = taints.tainted.copy()
    for step in range(int(scenario.steps)):
        cluster.step(step)
        t_s = step * scenario.step_s
        now_s = cluster.state.pipeline.epoch_s + t_s
        for node in np.flatnonzero(taints.tainted & ~tainted_before).tolist():
            annotations = cluster.state.pipeline.annotations(node)
            alone = judge_node(annotations, cluster.state.policy, now_s, margin)
            if alone.heat is not Heat.HOT:
                early.append((t_s, node))
        tainted_before = taints.tainted.copy()
    assert early, "no node was tainted on its estimate"
    t_s, node = early[0]
    later = [p for p in cluster.state.run.placements if t_s <= p.t_s <= t_s + 120]
    assert later, "the wave was over before the taint"
    assert all(p.node != node for p in later)


@pytest.mark.parametrize("policy", ["default", "crane", "loadaware", "default+desched"])
def test_only_the_taints_policies_keep_taints(policy: str) -> None:
    cluster = SimulatedCluster(load(busy_and_scaled_up()), plan_for(policy))
    assert cluster.soft_taints is None
    assert cluster.scheduler.soft_tainted is None
    assert plan_for(policy).steering == ("requests" if policy.startswith("default") else "extender")
    assert plan_for("default+taints+desched").steering == "soft-taints"

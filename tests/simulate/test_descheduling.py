"""The +desched policies: every eviction comes from the real planner and keeps PDBs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from app.load import HOT_VALUE_KEY, format_hot_value, format_usage
from app.rebalance.outcome import SkipCode
from app.simulate.cluster import EPOCH_S, Run, SimulatedCluster
from app.simulate.descheduling import PlannerRebalancer
from app.simulate.policies import plan_for
from app.simulate.scenario import ScenarioError, load_scenario
from app.simulate.summary import summarise
from tests.simulate.scenarios import load, small


def hot_spot(**descheduler: Any) -> dict[str, Any]:
    """4 nodes at 25 % CPU; at 20m one pod on a node grows to 9 of its 16 CPU."""
    return {
        "name": "hot-spot",
        "duration": "90m",
        "step": "30s",
        "nodes": [{"name": "n", "count": 4, "cpu": 16, "memory": "64Gi"}],
        "workloads": [
            {
                "name": "web",
                "replicas": 16,
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "1", "memory": "1Gi"},
                "pdb": {"maxUnavailable": 2},
            },
            {
                "name": "drift",
                "replicas": 1,
                "requests": {"cpu": "500m", "memory": "1Gi"},
                "usage": {
                    "profile": "growing",
                    "start": {"cpu": "500m", "memory": "1Gi"},
                    "end": {"cpu": "9", "memory": "1Gi"},
                    "from": "20m",
                    "until": "25m",
                },
                "pdb": {"minAvailable": 1},
            },
        ],
        "descheduler": {"interval": "1m", "consecutiveHotRounds": 2, **descheduler},
    }


def run(document: dict[str, Any], policy: str) -> tuple[SimulatedCluster, Run]:
    cluster = SimulatedCluster(load(document), plan_for(policy))
    return cluster, cluster.simulate()


def planned(cluster: SimulatedCluster) -> set[tuple[float, str]]:
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    return {
        (record.t_s, eviction.pod.uid)
        for record in cluster.rebalancer.plans
        for eviction in record.plan.evictions
    }


def evicted_uids(cluster: SimulatedCluster, run_: Run) -> set[tuple[float, str]]:
    # A slot's n-th eviction evicts the pod of generation n (its uid "<slot>-<n>").
    seen: dict[int, int] = {}
    result = set()
    for eviction in run_.evictions:
        generation = seen.get(eviction.slot, 0)
        seen[eviction.slot] = generation + 1
        result.add((eviction.t_s, f"{eviction.slot}-{generation}"))
    return result


@pytest.mark.parametrize("policy", ["crane+desched", "loadaware+desched"])
def test_every_eviction_was_planned_by_the_real_planner_and_kept_the_pdbs(policy: str) -> None:
    cluster, run_ = run(hot_spot(), policy)
    assert run_.evictions, "nothing was evicted: the property was not exercised"
    assert evicted_uids(cluster, run_) <= planned(cluster)
    assert summarise(run_).pdb_violations == 0


def test_beside_a_request_based_scheduler_it_evicts_nothing_that_would_come_back() -> None:
    """The hot spot's four nodes hold the same requests: once a web pod is gone from
    the hot node, that node ties for kube-scheduler's best score, so its replacement
    may land right back (``default+desched`` plans in the ``requests`` mode)."""
    cluster, run_ = run(hot_spot(), "default+desched")
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    assert cluster.rebalancer.config.scheduler == "requests"
    assert run_.evictions == []
    plans = [record.plan for record in cluster.rebalancer.plans]
    back = [s for p in plans for s in p.skipped if s.code is SkipCode.BACK_ON_SOURCE]
    assert back, "the hot node never became a source: the rule was not exercised"
    assert all(s.node in s.reason for s in back)
    assert all(p.scheduler == "requests" for p in plans)


def test_with_soft_taints_every_source_carried_the_taint_when_it_was_planned() -> None:
    scenario = load_scenario("drifting-hot-spot")
    cluster = SimulatedCluster(scenario, plan_for("default+taints+desched"))
    run_ = cluster.simulate()
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    assert cluster.rebalancer.config.scheduler == "soft-taints"
    assert run_.evictions
    assert cluster.soft_taints is not None
    tainted_at = {
        (taint.t_s, name) for taint in cluster.soft_taints.rounds for name in taint.decision.tainted
    }
    for record in cluster.rebalancer.plans:
        for eviction in record.plan.evictions:
            latest = max(r.t_s for r in cluster.soft_taints.rounds if r.t_s <= record.t_s)
            assert (latest, eviction.source) in tainted_at, (record.t_s, eviction.source)


def test_the_descheduler_cools_the_hot_node_under_its_threshold_without_thrashing() -> None:
    cluster, run_ = run(hot_spot(), "crane+desched")
    _, without = run(hot_spot(), "crane")
    hot = int(np.argmax(without.cpu_utilisation[-1]))
    last_20m = slice(-40, None)
    assert without.cpu_utilisation[last_20m, hot].min() > 0.65
    assert run_.cpu_utilisation[last_20m].max() <= 0.65  # targetThresholds.cpu
    assert 1 <= len(run_.evictions) <= 6  # web pods use 1 CPU: ~3 must go
    cooldown_s = cluster.state.scenario.descheduler_config().workload_cooldown
    by_slot: dict[int, list[float]] = {}
    for eviction in run_.evictions:
        by_slot.setdefault(eviction.slot, []).append(eviction.t_s)
    for times in by_slot.values():
        assert all(b - a >= cooldown_s for a, b in itertools.pairwise(times))


def test_the_planner_is_debounced_and_kept_from_evicting_through_a_tight_pdb() -> None:
    document = hot_spot()
    document["workloads"][0]["pdb"] = {"minAvailable": 16}  # no web pod may go
    cluster, run_ = run(document, "crane+desched")
    assert run_.evictions == []
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    reasons = {s.reason for r in cluster.rebalancer.plans for s in r.plan.skipped}
    assert any("PodDisruptionBudget web" in reason for reason in reasons)


def test_the_scenarios_descheduler_section_is_validated_by_the_descheduler() -> None:
    with pytest.raises(ScenarioError, match=r"(?s)descheduler: invalid .*thresholds\.cpu is 170"):
        load(small(descheduler={"thresholds": {"cpu": 170}}))
    with pytest.raises(ScenarioError, match=r"descheduler.interval \(45s\).*multiple"):
        load(small(descheduler={"interval": "45s"}))


def test_beside_the_stock_scheduler_alone_the_drifting_hot_spot_is_left_alone() -> None:
    # kube-scheduler's system-default topology spread puts a workload's replacement
    # where that workload has the fewest pods: its source, once the pod is evicted. The
    # planner predicts it, and stands down (before it modelled the spread, it evicted 3
    # pods a seed that bought nothing).
    cluster = SimulatedCluster(load_scenario("drifting-hot-spot"), plan_for("default+desched"))
    run_ = cluster.simulate()
    assert run_.evictions == []
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    reasons = {s.reason for r in cluster.rebalancer.plans for s in r.plan.skipped}
    assert any("back on" in reason for reason in reasons)


@pytest.mark.parametrize("policy", ["default+taints+desched", "crane+desched"])
def test_the_drifting_hot_spot_builtin_evicts_through_the_planner_only(policy: str) -> None:
    scenario = load_scenario("drifting-hot-spot")
    cluster = SimulatedCluster(scenario, plan_for(policy))
    run_ = cluster.simulate()
    assert run_.evictions
    assert evicted_uids(cluster, run_) <= planned(cluster)
    assert summarise(run_).pdb_violations == 0


@pytest.mark.parametrize("policy", ["crane+desched", "loadaware+desched"])
def test_the_drifting_hot_spot_builtin_ends_under_the_target_and_moves_each_pod_once(
    policy: str,
) -> None:
    cluster = SimulatedCluster(load_scenario("drifting-hot-spot"), plan_for(policy))
    run_ = cluster.simulate()
    target = cluster.state.scenario.descheduler_config().target_thresholds["cpu"] / 100
    last_hour = slice(-120, None)
    assert run_.cpu_utilisation[last_hour].max() <= target + 0.005
    slots = [eviction.slot for eviction in run_.evictions]
    assert slots
    assert len(slots) == len(set(slots))


def test_the_view_kept_between_rounds_matches_the_cluster_at_every_round() -> None:
    cluster = SimulatedCluster(load(hot_spot()), plan_for("loadaware+desched"))
    rebalancer = cluster.rebalancer
    assert isinstance(rebalancer, PlannerRebalancer)
    checked = 0
    for step in range(cluster.state.scenario.steps):
        cluster.step(step)
        t_s = step * cluster.state.scenario.step_s
        if step % 7:
            continue
        view, slot_of = rebalancer._view(t_s, cluster.state.pipeline.epoch_s + t_s)
        bound = np.flatnonzero(cluster.state.node_of >= 0).tolist()
        assert {(p.uid, p.node_name) for p in view.pods.values()} == {
            (f"{s}-{rebalancer._generation[s]}", cluster.state.node_names[cluster.state.node_of[s]])
            for s in bound
        }
        assert sorted(slot_of.values()) == bound
        for i, name in enumerate(cluster.state.node_names):
            assert view.nodes[name].annotations == fresh_annotations(cluster, i)
        checked += 1
    assert checked > 10
    assert cluster.state.run.evictions


def fresh_annotations(cluster: SimulatedCluster, node: int) -> dict[str, str]:
    pipeline = cluster.state.pipeline
    written_at_s = pipeline.written_at_s
    result = {
        metric: format_usage(float(values[node]), EPOCH_S + float(written_at_s[metric][node]))
        for metric, values in pipeline.values.items()
        if not np.isnan(values[node])
    }
    if not np.isnan(pipeline.hot_written_at_s[node]):
        result[HOT_VALUE_KEY] = format_hot_value(
            int(pipeline.hot_values[node]), EPOCH_S + float(pipeline.hot_written_at_s[node])
        )
    return result


def _opted_out(cluster: SimulatedCluster) -> int:
    assert isinstance(cluster.rebalancer, PlannerRebalancer)
    return sum(
        1
        for record in cluster.rebalancer.plans
        for skipped in record.plan.skipped
        if skipped.code is SkipCode.OPTED_OUT
    )


@pytest.mark.parametrize(
    ("where", "annotations"),
    [
        ("workload", {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        ("workload", {"karpenter.sh/do-not-disrupt": "true"}),
        ("nodes", {"karpenter.sh/do-not-disrupt": "true"}),
    ],
)
def test_a_scenario_s_opt_outs_keep_its_pods_in_the_replay(
    where: str, annotations: dict[str, str]
) -> None:
    """The same hot spot that the descheduler cools by evicting web pods
    (``test_every_eviction_was_planned_by_the_real_planner_and_kept_the_pdbs``): with
    the web pods, or every node, opted out, the replay evicts none of them."""
    document = hot_spot()
    if where == "nodes":
        document["nodes"][0]["annotations"] = annotations
    else:
        document["workloads"][0]["annotations"] = annotations
    cluster, run_ = run(document, "loadaware+desched")
    assert run_.evictions == []
    assert _opted_out(cluster) > 0



def test_a_scenario_s_prefer_no_eviction_sends_its_pods_last_in_the_replay() -> None:
    """The hot spot with two alike services within their requests (the drifting pod's
    growth within its own, so that no pod is a cause the hints are ignored for):
    without the hint the planner takes an ``api`` pod first (the key order breaks the
    tie); with ``prefer-no-eviction`` on ``api`` the ``web`` pods reach the target and
    no ``api`` pod moves."""

    def evicted(prefer: bool) -> list[str]:
        document = hot_spot(maxUnavailablePerWorkload="100%", maxMigratingPerWorkload=10,
                            workloadCooldown="0s")  # fmt: skip
        web, drift = document["workloads"]
        web = {**web, "replicas": 12, "requests": {"cpu": "1", "memory": "1Gi"},
               "pdb": {"maxUnavailable": 4}}  # fmt: skip
        api = {**web, "name": "api", "replicas": 4}
        if prefer:
            api["annotations"] = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}
        drift = {**drift, "requests": {"cpu": "9", "memory": "1Gi"}}
        document["workloads"] = [api, web, drift]
        cluster, run_ = run(document, "loadaware+desched")
        assert isinstance(cluster.rebalancer, PlannerRebalancer)
        plans = cluster.rebalancer.plans
        names = [e.pod.name.split("-")[0] for r in plans for e in r.plan.evictions]
        assert len(names) == len(run_.evictions)
        return names

    assert evicted(prefer=False)[0] == "api"
    shy = evicted(prefer=True)
    assert shy
    assert set(shy) == {"web"}

def test_a_single_replica_burner_gets_no_neighbour_evicted_in_the_replay() -> None:
    """Issue 42, point 3, replayed: a single-replica burner (1m requested, 5 cores used)
    heats a node shared with web pods that use what they request. Before the fix the
    descheduler beside loadaware evicted four web pods from it; now none, and every
    plan that finds the node hot reports it."""
    document = {
        "name": "tenant-burner",
        "duration": "1h",
        "nodes": [{"name": "n", "count": 4, "cpu": 8, "memory": "32Gi"}],
        "workloads": [
            {"name": "burner", "replicas": 1, "placement": ["n-0"],
             "requests": {"cpu": "1m", "memory": "64Mi"},
             "usage": {"profile": "constant", "cpu": "5", "memory": "64Mi"}},
            {"name": "web", "replicas": 16,
             "requests": {"cpu": "400m", "memory": "512Mi"},
             "usage": {"profile": "constant", "cpu": "400m", "memory": "512Mi"}},
        ],
        "descheduler": {"interval": "2m", "consecutiveHotRounds": 1},
    }  # fmt: skip
    for policy in ("loadaware+desched", "default+desched"):
        cluster, run_ = run(document, policy)
        assert run_.evictions == [], policy
        assert isinstance(cluster.rebalancer, PlannerRebalancer)
        hot = [r.plan for r in cluster.rebalancer.plans if "n-0" in r.plan.held_hot]
        assert hot, policy
        assert all(
            [key.split("/")[1].split("-")[0] for key, _, _ in p.held_hot["n-0"].pods] == ["burner"]
            for p in hot
        )

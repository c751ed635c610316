"""The simulated node autoscaler (``app/simulate/autoscaling.py``): scale-down of nodes
empty or under the threshold with every pod movable, after the unneeded time and not
soon after a scale-up; scale-up from a node template after a provisioning delay; the
opt-outs; node-hours in the summary."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from app.simulate.autoscaling import SimulatedAutoscaler, settings_of
from app.simulate.cluster import Run, SimulatedCluster
from app.simulate.policies import plan_for, unavailable_reason
from app.simulate.scenario import AutoscalerSpec, load_scenario
from app.simulate.summary import markdown_table, summarise
from tests.simulate.scenarios import load


def scenario(
    autoscaler: dict[str, Any] | None = None,
    workloads: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    duration: str = "40m",
) -> dict[str, Any]:
    return {
        "name": "autoscaled",
        "duration": duration,
        "step": "30s",
        "autoscaler": autoscaler or {},
        "nodes": nodes or [{"name": "node", "count": 4, "cpu": 8, "memory": "32Gi"}],
        "workloads": workloads
        if workloads is not None
        else [
            {
                "name": "web",
                "replicas": 4,
                "requests": {"cpu": "1", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "500m", "memory": "1Gi"},
            }
        ],
    }


def with_a_wave(document: dict[str, Any]) -> dict[str, Any]:
    """A wave of 20 pods of 1 CPU at 20m."""
    document["workloads"].append(
        {
            "name": "wave",
            "replicas": 20,
            "requests": {"cpu": "1", "memory": "1Gi"},
            "usage": {"profile": "constant", "cpu": "500m", "memory": "1Gi"},
            "arrival": {"at": "20m"},
        }
    )
    return document


def simulate(document: dict[str, Any], policy: str = "default+autoscaler") -> SimulatedCluster:
    cluster = SimulatedCluster(load(document), plan_for(policy))
    cluster.simulate()
    return cluster


def autoscaler_of(cluster: SimulatedCluster) -> SimulatedAutoscaler:
    assert isinstance(cluster.autoscaler, SimulatedAutoscaler)
    return cluster.autoscaler


def first_step_with(run: Run, nodes: int) -> float:
    step = next(i for i, up in enumerate(run.nodes_up) if up == nodes)
    return step * run.scenario.step_s


def test_the_presets_are_the_autoscalers_defaults_and_settings_override_them() -> None:
    ca = settings_of(None)
    assert (ca.utilization_threshold, ca.unneeded_s, ca.delay_after_add_s) == (0.5, 600, 600)
    karpenter = settings_of(AutoscalerSpec.model_validate({"preset": "karpenter"}))
    assert (karpenter.utilization_threshold, karpenter.unneeded_s) == (1.0, 0.0)
    mine = settings_of(AutoscalerSpec.model_validate({"scaleDownUnneeded": "2m"}))
    assert (mine.unneeded_s, mine.utilization_threshold) == (120.0, 0.5)


def test_nodes_under_the_threshold_are_drained_after_the_unneeded_time_and_not_before() -> None:
    # 4 pods of 1 CPU on 4 nodes of 8: every node is at 12.5 % of requests, all movable.
    cluster = simulate(scenario())
    run = cluster.state.run
    assert run.nodes_up[0] == 4
    # Nothing goes in the first 10 minutes; then one node with pods at a time.
    assert all(up == 4 for up in run.nodes_up[:20])
    assert first_step_with(run, 3) == 600.0
    assert run.nodes_up[-1] == 1  # minNodes 1: the pods all fit on one node
    assert all(e.by == "autoscaler" and not e.pdb_violation for e in run.evictions)
    summary = summarise(run)
    # At least one eviction per node removed (a moved pod may land on a node that goes
    # later, as kube-scheduler spreads by requests), none counted as the descheduler's.
    assert summary.evictions == 0
    assert summary.scale_down_evictions == len(run.evictions) >= 3
    assert summary.pending_at_end == 0


def test_empty_nodes_go_together_and_min_nodes_is_kept() -> None:
    cluster = simulate(scenario({"minNodes": 2}, workloads=[]))
    run = cluster.state.run
    assert run.nodes_up[19] == 4
    assert run.nodes_up[20] == 2
    assert run.nodes_up[-1] == 2
    assert run.evictions == []


def test_a_node_above_the_threshold_stays() -> None:
    workloads = [
        {
            "name": "web",
            "replicas": 12,  # 3 pods of 1.5 CPU a node: 56 % of requests
            "requests": {"cpu": "1500m", "memory": "1Gi"},
            "usage": {"profile": "constant", "cpu": "100m", "memory": "1Gi"},
        }
    ]
    cluster = simulate(scenario(workloads=workloads))
    assert set(cluster.state.run.nodes_up) == {4}
    # Karpenter's WhenEmptyOrUnderutilized removes a node whose pods fit elsewhere.
    karpenter = simulate(scenario({"preset": "karpenter"}, workloads=workloads))
    assert karpenter.state.run.nodes_up[-1] < 4


@pytest.mark.parametrize(
    "annotations",
    [
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        {"karpenter.sh/do-not-disrupt": "true"},
    ],
)
def test_a_pod_that_opted_out_keeps_its_node(annotations: dict[str, str]) -> None:
    document = scenario()
    document["workloads"][0]["annotations"] = annotations
    run = simulate(document).state.run
    assert run.nodes_up[-1] == 4
    assert run.evictions == []


@pytest.mark.parametrize(
    "annotations",
    [
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "False"},
        {"karpenter.sh/do-not-disrupt": "TRUE"},
    ],
)
def test_only_the_autoscalers_exact_opt_out_values_keep_a_node(
    annotations: dict[str, str],
) -> None:
    """cluster-autoscaler reads exactly "false", Karpenter exactly "true", as the
    planner does: the simulated autoscaler removes the node as without them."""
    plain = simulate(scenario()).state.run
    document = scenario()
    document["workloads"][0]["annotations"] = annotations
    run = simulate(document).state.run
    assert run.nodes_up[-1] == plain.nodes_up[-1] < 4


def test_a_node_with_scale_down_disabled_is_never_removed() -> None:
    nodes = [
        {
            "name": "kept",
            "count": 2,
            "cpu": 8,
            "memory": "32Gi",
            "annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        },
        {"name": "node", "count": 2, "cpu": 8, "memory": "32Gi"},
    ]
    cluster = simulate(scenario(workloads=[], nodes=nodes))
    assert autoscaler_of(cluster).running.tolist() == [True, True, False, False]


def test_a_budget_that_allows_no_disruption_keeps_the_node() -> None:
    document = scenario()
    document["workloads"][0]["pdb"] = {"maxUnavailable": 0}
    run = simulate(document).state.run
    assert run.nodes_up[-1] == 4
    assert run.evictions == []


def test_pending_pods_wake_a_node_from_its_template_after_the_provisioning_delay() -> None:
    # The cluster drains to one node by 13m (its 4 pods of 1 CPU); at 20m a wave of 20
    # pods of 1 CPU comes, 16 more than the node holds.
    document = with_a_wave(scenario(duration="60m"))
    cluster = simulate(document)
    run, autoscaler = cluster.state.run, autoscaler_of(cluster)
    assert run.nodes_up[39] == 1  # 19m30s
    assert run.nodes_up[40] == 3  # two new nodes, paid for from the decision
    bound_at = sorted(p.t_s for p in run.placements if p.t_s >= 1200.0)
    assert bound_at[:4] == [1200.0] * 4  # what fits on the running node
    assert bound_at[4] == 1200.0 + 180.0  # the rest once the new nodes are ready
    assert autoscaler.scale_ups == 2
    assert summarise(run).pending_at_end == 0
    # No scale-down within 10 minutes of the scale-up.
    assert all(up >= 3 for up in run.nodes_up[40:60])


def test_a_node_karpenter_brings_for_pending_pods_is_not_removed_before_they_land() -> None:
    """Karpenter's preset removes an empty node at once (consolidateAfter 0s); the node
    it brought for the wave was removed in the step it came up, before the wave's pods
    had a scheduling pass, and a new one brought again, all day."""
    document = with_a_wave(scenario({"preset": "karpenter"}, duration="60m"))
    cluster = simulate(document)
    run, autoscaler = cluster.state.run, autoscaler_of(cluster)
    assert summarise(run).pending_at_end == 0
    assert autoscaler.scale_ups == 2  # 20 + 4 pods of 1 CPU on 8-CPU nodes: three nodes
    assert max(p.t_s for p in run.placements) <= 1200.0 + 120.0 + 30.0  # the 2m launch


def test_a_pod_held_back_by_the_load_filter_alone_wakes_no_node() -> None:
    # Usage above the filter limit on the one running node, requests small: the
    # extender holds new pods back, and an autoscaler that counts requests sees room.
    document = scenario(
        {"minNodes": 1},
        workloads=[
            {
                "name": "hot",
                "replicas": 1,
                "requests": {"cpu": "100m", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "7", "memory": "1Gi"},
            },
            {
                "name": "late",
                "replicas": 2,
                "requests": {"cpu": "100m", "memory": "1Gi"},
                "usage": {"profile": "constant", "cpu": "100m", "memory": "1Gi"},
                "arrival": {"at": "20m"},
            },
        ],
        nodes=[{"name": "node", "count": 1, "cpu": 8, "memory": "32Gi"}],
    )
    cluster = simulate(document, "loadaware+autoscaler")
    assert autoscaler_of(cluster).scale_ups == 0
    assert summarise(cluster.state.run).pending_at_end == 2


def test_node_hours_count_the_nodes_running_or_provisioning() -> None:
    without = SimulatedCluster(load(scenario()), plan_for("default")).simulate()
    with_it = simulate(scenario()).state.run
    before, after = summarise(without), summarise(with_it)
    assert before.node_hours == pytest.approx(4 * 40 / 60)
    assert after.node_hours == pytest.approx(sum(with_it.nodes_up) * 30 / 3600)
    assert after.node_hours < before.node_hours
    # 4 pods wanted all the time: node-hours per pod-hour is node-hours over 4 x 40m.
    assert before.node_hours_per_workload_hour == pytest.approx(1.0)
    table = markdown_table([before, after])
    assert "node-hours" in table.splitlines()[0]
    assert f"{after.node_hours:.1f}" in table
    assert json.loads(json.dumps(dataclasses.asdict(after)))["node_hours"] == after.node_hours


def test_the_autoscaler_policies_are_known_but_not_run_by_default() -> None:
    from app.simulate.policies import DEFAULT_POLICIES

    for name in ("default+autoscaler", "loadaware+autoscaler"):
        assert unavailable_reason(name) is None
        assert name not in DEFAULT_POLICIES


def test_the_diurnal_scenario_saves_node_hours_at_night() -> None:
    trough = load_scenario("diurnal-trough")
    fixed = summarise(SimulatedCluster(trough, plan_for("default")).simulate())
    cluster = SimulatedCluster(trough, plan_for("default+autoscaler"))
    scaled = summarise(cluster.simulate())
    assert scaled.node_hours < 0.8 * fixed.node_hours
    assert scaled.pdb_violations == 0
    assert scaled.pending_at_end == 0
    # The nodes come back for the day's peak, and go again at night.
    up = cluster.state.run.nodes_up
    steps_per_h = 60
    assert max(up[10 * steps_per_h : 16 * steps_per_h]) > max(up[2 * steps_per_h : 5 * steps_per_h])


def test_consolidation_drains_a_node_the_autoscaler_then_removes() -> None:
    # 8 pods of 1 CPU using 100m: 2 per node of 8 CPU, 25 % of requests and ~3 % used.
    # The cluster autoscaler with threshold 0.2 keeps every node (25 % > 20 %);
    # consolidation by real usage drains them, and the autoscaler removes the empties.
    workloads = [
        {
            "name": "web",
            "replicas": 8,
            "requests": {"cpu": "1", "memory": "1Gi"},
            "usage": {"profile": "constant", "cpu": "100m", "memory": "512Mi"},
        }
    ]
    document = scenario({"scaleDownUtilizationThreshold": 0.2}, workloads=workloads,
                        duration="90m")  # fmt: skip
    document["descheduler"] = {"interval": "2m", "workloadCooldown": "2m"}
    alone = simulate(document, "loadaware+autoscaler")
    assert set(alone.state.run.nodes_up) == {4}
    consolidated = simulate(document, "loadaware+consolidate+autoscaler")
    run = consolidated.state.run
    assert run.nodes_up[-1] < 4
    assert summarise(run).node_hours < summarise(alone.state.run).node_hours
    assert summarise(run).pdb_violations == 0
    assert summarise(run).pending_at_end == 0
    # consolidation's evictions emptied the nodes; the autoscaler's had none to make
    assert summarise(run).evictions > 0
    assert summarise(run).scale_down_evictions == 0


def test_consolidation_evicts_nothing_where_no_node_can_be_freed() -> None:
    # Every node at 85 % of requests: nothing fits elsewhere.
    workloads = [
        {
            "name": "web",
            "replicas": 4,
            "requests": {"cpu": "6800m", "memory": "1Gi"},
            "usage": {"profile": "constant", "cpu": "500m", "memory": "512Mi"},
        }
    ]
    document = scenario(workloads=workloads)
    document["descheduler"] = {"interval": "2m"}
    run = simulate(document, "loadaware+consolidate+autoscaler").state.run
    assert run.evictions == []
    assert set(run.nodes_up) == {4}


def test_a_drained_node_takes_no_pod_until_its_drain_is_abandoned() -> None:
    nodes = [
        {
            "name": "kept",
            "count": 1,
            "cpu": 8,
            "memory": "32Gi",
            "annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        },
        {"name": "node", "count": 3, "cpu": 8, "memory": "32Gi"},
    ]
    workloads = [
        {
            "name": "web",
            "replicas": 6,
            "requests": {"cpu": "1", "memory": "1Gi"},
            "usage": {"profile": "constant", "cpu": "500m", "memory": "1Gi"},
            "arrival": {"at": "0s", "over": "50m"},
        }
    ]
    document = scenario({"scaleDownUtilizationThreshold": 0.0}, workloads=workloads,
                        nodes=nodes, duration="50m")  # fmt: skip
    cluster = SimulatedCluster(load(document), plan_for("default+autoscaler"))
    autoscaler = autoscaler_of(cluster)
    autoscaler.cordon(0, 0.0)  # as consolidation's drain taint
    cluster.simulate()
    abandoned_s = autoscaler.abandon_after_s
    assert abandoned_s == 1800.0
    on_kept = [p.t_s for p in cluster.state.run.placements if p.node == 0]
    assert on_kept  # it takes pods again once the drain is given up ...
    assert min(on_kept) >= abandoned_s  # ... and none before
    assert bool(autoscaler.running[0])

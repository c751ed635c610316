"""The rise in demand consolidation keeps room for (app/rebalance/rise.py)."""

from __future__ import annotations

import pytest

from app.objects import Resources, Taint
from app.rebalance import DemandHistory, demand_of, plan_consolidation
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod
from tests.rebalance.test_consolidation import idle_and_used


def cores(value: float) -> Resources:
    return Resources(value, 0.0)


def test_a_step_between_two_runs_counts_whatever_their_distance() -> None:
    history = DemandHistory(lookback_s=86_400, within_s=300)
    history.record(0, cores(10))
    history.record(600, cores(40))  # runs 10 minutes apart, longer than within_s
    assert history.rise() == cores(30)


def test_a_slow_ramp_asks_only_for_its_rise_within_the_window() -> None:
    history = DemandHistory(lookback_s=86_400, within_s=300)
    for minute in range(0, 62, 2):  # 1 core a run of 2 minutes: 30 cores in an hour
        history.record(minute * 60, cores(minute / 2))
    # within 5 minutes the samples 2 and 4 minutes back count: 2 cores
    assert history.rise() == cores(2)


def test_a_fall_asks_for_nothing_and_each_resource_has_its_own_rise() -> None:
    history = DemandHistory(lookback_s=86_400, within_s=300)
    history.record(0, Resources(40, 8 * GI))
    history.record(120, Resources(10, 2 * GI))
    assert history.rise() == Resources(0, 0)
    history.record(240, Resources(12, 10 * GI))
    assert history.rise() == Resources(2, 8 * GI)


def test_a_rise_older_than_the_lookback_is_forgotten() -> None:
    history = DemandHistory(lookback_s=3600, within_s=300)
    history.record(0, cores(10))
    history.record(120, cores(40))
    history.record(3700, cores(40))  # the sample at 0 s is over an hour old: gone
    assert history.rise() == cores(0)
    assert len(history) == 2


def test_a_sample_from_a_clock_that_stepped_back_is_ignored() -> None:
    history = DemandHistory(lookback_s=86_400, within_s=300)
    history.record(1000, cores(10))
    history.record(900, cores(50))
    assert len(history) == 1
    assert history.rise() == cores(0)


def test_demand_counts_the_pods_that_need_a_node_bound_or_waiting() -> None:
    pods = [
        pod("bound", "n1", cpu=1.0),
        pod("waiting", "", cpu=2.0, phase="Pending", ready=False),
        pod("done", "n1", cpu=4.0, phase="Succeeded"),
        pod("leaving", "n1", cpu=8.0, terminating=True),
        pod("daemon", "n1", cpu=16.0, owner="ds", owner_kind="DaemonSet"),
    ]
    assert demand_of(pods) == Resources(3.0, 2 * GI)


def test_a_drain_that_would_leave_less_room_than_the_rise_is_not_made() -> None:
    nodes, pods = idle_and_used()
    settings = config(consolidation={"enabled": True, "minSpare": {"cpu": 10, "memory": 10}})
    # Left after the drain: 20 cores, 12 requested: 8 cores unrequested.
    view = cluster(nodes, pods)
    assert plan_consolidation(view, settings, POLICY, NOW, rise=cores(8)).drains
    kept = plan_consolidation(view, settings, POLICY, NOW, rise=cores(9))
    assert kept.evictions == []
    assert "rise in demand" in kept.kept[0].reason
    assert "9.0 cores" in kept.kept[0].reason
    # a drain under way is given up when a rise has been seen since
    draining = [node("idle", 0.05, 0.1, unschedulable=True), *nodes[1:]]
    given_up = plan_consolidation(cluster(draining, pods), settings, POLICY, NOW,
                                  draining={"idle"}, rise=cores(9))  # fmt: skip
    assert [k.node for k in given_up.abandoned] == ["idle"]
    assert given_up.evictions == []


def test_the_rise_settings_have_defaults_and_refuse_bad_values() -> None:
    settings = config(consolidation={"enabled": True}).consolidation
    assert (settings.rise_lookback, settings.rise_within) == (86_400.0, 300.0)
    parsed = config(consolidation={"riseLookback": "0s", "riseWithin": "3m"}).consolidation
    assert (parsed.rise_lookback, parsed.rise_within) == (0.0, 180.0)


def test_samples_kept_elsewhere_merge_in_time_order_within_the_lookback() -> None:
    history = DemandHistory(lookback_s=3600, within_s=300)
    history.record(7200, cores(10))
    history.merge([(0, cores(1)), (7080, cores(4)), (7200, cores(99))])
    # one sample per time (this process's wins), the one over an hour old dropped
    assert history.samples == [(7080, cores(4)), (7200, cores(10))]
    assert history.rise() == cores(6)


@pytest.mark.parametrize(
    "key",
    ["DeletionCandidateOfClusterAutoscaler", "ToBeDeletedByClusterAutoscaler",
     "karpenter.sh/disrupted"],
)  # fmt: skip
def test_room_on_a_node_the_autoscaler_is_removing_is_not_counted_on(key: str) -> None:
    nodes, pods = idle_and_used()
    settings = config(consolidation={"enabled": True, "minSpare": {"cpu": 10, "memory": 10}})
    # used-b is going: idle's pods would have only used-a (5 of 10 cores free), and
    # draining idle leaves 3 cores for a 4-core rise: a drain under way is given up.
    # Without the taint: drained.
    assert plan_consolidation(cluster(nodes, pods), settings, POLICY, NOW,
                              rise=cores(4)).drains  # fmt: skip
    # the cluster autoscaler writes the Unix time it set the taint (Karpenter none)
    value = None if key.startswith("karpenter") else str(int(NOW - 60))
    tainted = node("used-b", 0.35, 0.2, taints=[Taint(key, value, "NoSchedule")])
    draining = [node("idle", 0.05, 0.1, unschedulable=True), nodes[1], tainted]
    result = plan_consolidation(cluster(draining, pods), settings, POLICY, NOW,
                                draining={"idle"}, rise=cores(4))  # fmt: skip
    assert result.evictions == []
    assert "rise in demand" in {k.node: k.reason for k in result.abandoned}["idle"]
    assert key in result.not_candidates["used-b"]
    # and no new drain starts while the autoscaler removes a node of its own
    paused = plan_consolidation(cluster([*nodes[:2], tainted], pods), settings, POLICY, NOW,
                                rise=cores(4))  # fmt: skip
    assert paused.drains == []
    assert "the node autoscaler is removing 1 node(s) of its own (used-b)" in paused.notes[-1]

"""Beside soft taints, a move whose gain is not sure in a cluster that is filling up is
not made (issue 40, big-batch-beside-services): the plan stands down while a wave of
pods still arrives that no node kube-scheduler may choose takes cool (``wave_ahead``),
and with half of the nodes hot it takes no tie with a landing the pod would make hot."""

from __future__ import annotations

from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE
from app.objects import EvictionRecord
from app.objects.nodes import NodeInfo, Taint
from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.rebalance import EvictionPlan, SkipCode, plan
from app.rebalance.arrivals import arriving
from tests.rebalance.builders import GI, NOW, POLICY, cluster, node, pod
from tests.rebalance.builders import config as base_config

SOFT_TAINT = Taint(SOFT_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)


def etl(name: str, created_ago_s: float, node_name: str = "batch") -> PodInfo:
    """A batch pod of a Job that asks for half a core (and uses what the test says)."""
    return pod(name, node_name, owner="etl", owner_kind="Job", created_s=NOW - created_ago_s)


def soft_taints_plan(
    nodes: list[NodeInfo],
    pods: list[PodInfo],
    usage: dict[str, Resources],
    recent: tuple[EvictionRecord, ...] = (),
) -> EvictionPlan:
    config = base_config(scheduler="soft-taints", evictLastReplica=True)
    return plan(cluster(nodes, pods, usage, recent=recent), config, POLICY, NOW, {})


def test_a_workload_whose_next_pod_is_due_is_arriving() -> None:
    # Created 20 and 10 minutes ago: the next is due now.
    pods = [etl("etl-1", 1200.0), etl("etl-2", 600.0)]
    assert [p.name for p in arriving(pods, (), NOW, 900.0)] == ["etl-2"]


def test_pods_created_together_or_long_ago_are_no_wave() -> None:
    together = [etl("etl-1", 600.0), etl("etl-2", 600.0)]
    assert arriving(together, (), NOW, 900.0) == []
    # The gap has passed since the newest: the wave has arrived.
    done = [etl("etl-1", 1500.0), etl("etl-2", 1200.0)]
    assert arriving(done, (), NOW, 900.0) == []
    # Longer ago than ``within_s`` whatever the gap.
    slow = [etl("etl-1", 7200.0), etl("etl-2", 3600.0)]
    assert arriving(slow, (), NOW, 900.0) == []


def test_the_replacement_of_an_eviction_is_no_arrival() -> None:
    pods = [etl("etl-1", 1200.0), etl("etl-2", 600.0)]
    evicted = EvictionRecord("default/etl-0", "uid-0", "hot", "a", Resources(1.0, GI),
                             NOW - 610.0, "default/Job/etl")
    assert arriving(pods, (evicted,), NOW, 900.0) == []


def wave(etl_cores: float, created_ago_s: tuple[float, float]) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """A tainted hot node (90 % of 10 cores) with a 1-core pod to shed, a cool node "a"
    (20 %) that kube-scheduler would choose for it and for the next ``etl`` pod, and a
    batch node holding two ``etl`` pods, each using ``etl_cores``, created
    ``created_ago_s`` ago."""
    victim = pod("victim", "hot", cpu=0.5)
    agent = pod("agent-hot", "hot", owner="agent", owner_kind="DaemonSet", cpu=4.0)
    batch = [etl("etl-1", created_ago_s[0]), etl("etl-2", created_ago_s[1])]
    nodes = [node("hot", 0.9, taints=(SOFT_TAINT,)), node("a", 0.2), node("batch", 0.6)]
    usage = {victim.key: Resources(1.0, GI), **{p.key: Resources(etl_cores, GI) for p in batch}}
    return nodes, [victim, agent, *batch], usage


def test_with_soft_taints_a_wave_no_node_takes_cool_stands_the_plan_down() -> None:
    # The next etl pod (5 cores) would take "a", kube-scheduler's one choice, to 70 %.
    result = soft_taints_plan(*wave(5.0, (1200.0, 600.0)))
    assert result.evictions == []
    codes = {s.pod_key: s.code for s in result.skipped}
    assert codes["default/victim"] is SkipCode.WAVE_AHEAD
    (why,) = {s.reason for s in result.skipped if s.code is SkipCode.WAVE_AHEAD}
    assert "the pods of default/Job/etl are still arriving" in why
    assert "(a) above targetThresholds" in why
    assert any(note.startswith("standing down beside kube-scheduler") for note in result.notes)


def test_with_soft_taints_a_wave_a_node_takes_cool_or_one_arrived_moves_the_pod() -> None:
    # 1-core etl pods: "a" takes the next one at 30 %.
    small = soft_taints_plan(*wave(1.0, (1200.0, 600.0)))
    assert [(e.pod.name, e.destination) for e in small.evictions] == [("victim", "a")]
    # The wave arrived: its last pod 20 minutes ago, 10 after the one before.
    arrived = soft_taints_plan(*wave(5.0, (1800.0, 1200.0)))
    assert [(e.pod.name, e.destination) for e in arrived.evictions] == [("victim", "a")]


def tied_among_hot(others_hot: int) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """A tainted hot node (90 %) with a pod of 1 core (limited to it); three nodes
    kube-scheduler ties for its replacement: "a" cool at 20 %, "b" and "c" at 62 %,
    which it would take above 65 % (on average less than the core it sheds); and
    ``others_hot`` more tainted hot nodes with nothing to move."""
    victim = pod("victim", "hot", cpu=0.5, limits=Resources(1.0, GI))
    agent = pod("agent-hot", "hot", owner="agent", owner_kind="DaemonSet", cpu=4.0,
                limits=Resources(4.0, GI))
    nodes = [node("hot", 0.9, taints=(SOFT_TAINT,)), node("a", 0.2), node("b", 0.62),
             node("c", 0.62)]
    nodes += [node(f"warm-{i}", 0.8, taints=(SOFT_TAINT,)) for i in range(others_hot)]
    return nodes, [victim, agent], {victim.key: Resources(1.0, GI)}


def test_with_half_the_nodes_hot_a_tie_with_a_hot_landing_keeps_the_pod() -> None:
    # 1 hot of 4: the gain in expectation holds, the pod moves (to "a", reserved).
    mostly_cool = soft_taints_plan(*tied_among_hot(0))
    assert [(e.pod.name, e.destination) for e in mostly_cool.evictions] == [("victim", "a")]
    # 3 hot of 6: kube-scheduler's draw decides whether the move gains or heats "b".
    hot = soft_taints_plan(*tied_among_hot(2))
    assert hot.evictions == []
    (skipped,) = [s for s in hot.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.HOT_LANDING
    assert skipped.reason.startswith("no sure gain: kube-scheduler would place the "
                                     "replacement on one of a, b, c")
    assert "3 of the 6 nodes with a reading are above targetThresholds" in skipped.reason

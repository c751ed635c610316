"""The no-harm rules of the planner: a destination takes the pod's real usage and keeps
it the way kube-scheduler would, an eviction buys a lasting gain, and a workload is not
sent back to a node it left. (Per-run workload limits: ``test_protections``.)"""

from __future__ import annotations

from typing import Any

from app.objects.evictions import EvictionRecord
from app.objects.pods import PodAffinityTerm, PodInfo, SpreadConstraint
from app.objects.resources import Resources
from app.objects.selectors import LabelSelector
from app.rebalance import EvictionPlan, SkipCode, plan
from app.rebalance.placement import Placements
from tests.rebalance.builders import GI, NOW, POLICY, cluster, node, pod
from tests.rebalance.builders import config as base_config

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def config(**fields: Any) -> Any:
    """Single pods may move: these tests are about where they go."""
    return base_config(evictLastReplica=True, **fields)


def web(name: str, node_name: str, **fields: Any) -> PodInfo:
    labels = {"app": "web", **fields.pop("labels", {})}
    return pod(name, node_name, owner="web", labels=labels, **fields)


def reasons(result: EvictionPlan, code: SkipCode | None = None) -> list[str]:
    return [s.reason for s in result.skipped if code is None or s.code is code]


# -- real usage, not requests ---------------------------------------------------------


def test_real_usage_that_does_not_fit_stays_where_it_is() -> None:
    # requests 0.5 core (they fit anywhere); the pod really uses 3 cores: 20 % + 30 % > 40 %
    nodes = [node("hot", 0.9), node("cool", 0.2)]
    victim = pod("victim", "hot")
    result = plan(cluster(nodes, [victim], {victim.key: Resources(3.0, 1 * GI)}), config(),
                  POLICY, NOW, {})
    assert result.evictions == []
    assert reasons(result, SkipCode.NO_DESTINATION) == [
        "no destination: cool: cpu would be at 50% with the pod's real usage, above 40%"]
    fits = plan(cluster([node("hot", 0.9), node("cool", 0.05)], [victim],
                        {victim.key: Resources(3.0, 1 * GI)}), config(), POLICY, NOW, {})
    assert [e.destination for e in fits.evictions] == ["cool"]


def test_memory_must_fit_even_when_only_cpu_is_balanced() -> None:
    cpu_only = config(thresholds={"cpu": 40}, targetThresholds={"cpu": 65})
    victim = pod("victim", "hot", cpu=3.0)
    big_memory = {victim.key: Resources(3.0, 25 * GI)}  # 25 of 64 GiB: 39 %
    full = plan(cluster([node("hot", 0.9), node("cool", 0.1, mem=0.8)], [victim], big_memory),
                cpu_only, POLICY, NOW, {})
    assert full.evictions == []
    assert "memory would be at 119% with the pod's real usage, above 100%" in reasons(full)[0]
    # under allocatable, but over the policy's memory limit: the extender would refuse it
    filtered = plan(cluster([node("hot", 0.9), node("cool", 0.1, mem=0.4)], [victim],
                            big_memory), cpu_only, POLICY, NOW, {})
    assert "Load[mem_usage_avg_5m] is too high" in reasons(filtered)[0]
    room = plan(cluster([node("hot", 0.9), node("cool", 0.1, mem=0.2)], [victim], big_memory),
                cpu_only, POLICY, NOW, {})
    assert [e.destination for e in room.evictions] == ["cool"]


def test_a_pod_without_a_series_counts_the_extenders_estimate_not_its_requests() -> None:
    # requests 0.5, limit 4 cores: the extender estimates 4 x 0.85 = 3.4 cores (34 %)
    victim = pod("victim", "hot", cpu=0.5, limits=Resources(4.0, 1 * GI))
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    no_series = plan(cluster(nodes, [victim], {}), config(), POLICY, NOW, {})
    assert no_series.evictions == []
    assert "cpu would be at 44% with the pod's real usage" in reasons(no_series)[0]
    cooler = plan(cluster([node("hot", 0.9), node("cool", 0.05)], [victim], {}), config(),
                  POLICY, NOW, {})
    assert [(e.usage_from, e.usage.cpu_cores) for e in cooler.evictions] == [("estimate", 3.4)]


def test_pods_bound_on_a_destination_after_its_sample_count_as_the_extender_estimates() -> None:
    # the sample (30 s old) says 10 %; three pods bound 10 s ago with 1-core limits are
    # estimated at 3 x 0.85 = 2.55 cores: 10 % + 25.5 % + the victim's 8 % > 40 %
    victim = pod("victim", "hot", cpu=0.8)
    just_bound = [pod(f"new-{i}", "cool", owner="new", cpu=0.1,
                      limits=Resources(1.0, 1 * GI), bound_at_s=NOW - 10) for i in range(3)]
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    quiet = plan(cluster(nodes, [victim]), config(), POLICY, NOW, {})
    assert [e.destination for e in quiet.evictions] == ["cool"]
    busy = plan(cluster(nodes, [victim, *just_bound]), config(), POLICY, NOW, {})
    assert busy.evictions == []
    assert "cpu would be at 44% with the pod's real usage" in reasons(busy)[0]
    # bound long before the sample: the sample shows them, nothing is added
    old = [pod(p.name, "cool", owner="new", cpu=0.1, limits=Resources(1.0, 1 * GI),
               bound_at_s=NOW - 3600) for p in just_bound]
    assert plan(cluster(nodes, [victim, *old]), config(), POLICY, NOW, {}).evictions


def test_the_load_filter_sees_the_estimate_the_extender_adds_for_the_replacement() -> None:
    # real usage 0.5 core fits under thresholds, but the extender will add 8 x 0.85 = 6.8
    # cores for the replacement it has just placed: 5 % + 68 % > the policy's 65 %
    victim = pod("victim", "hot", cpu=0.5, limits=Resources(8.0, 1 * GI))
    result = plan(cluster([node("hot", 0.9), node("cool", 0.05)], [victim],
                          {victim.key: Resources(0.5, 1 * GI)}), config(), POLICY, NOW, {})
    assert result.evictions == []
    assert "fails the load filter" in reasons(result)[0]


# -- a lasting gain -------------------------------------------------------------------


def test_a_gain_too_small_evicts_nothing_and_the_plan_says_why() -> None:
    # 70 % hot, target 65 %: three pods of 0.05 core lower it by 1.5 points in all,
    # which leaves it hot and is under minimumGain (2): none of them is worth a restart
    small = [pod(f"s{i}", "hot", cpu=0.05, requests=Resources(0.05, GI / 4)) for i in range(3)]
    result = plan(cluster([node("hot", 0.7), node("cool", 0.1)], small), config(), POLICY,
                  NOW, {})
    assert result.evictions == []
    assert {s.code for s in result.skipped} == {SkipCode.GAIN_TOO_SMALL}
    assert "the 3 eviction(s)" in reasons(result)[0]
    assert "cpu_usage_avg_5m -1.5%" in reasons(result)[0]
    assert any(n.startswith("hot: gain too small") for n in result.notes), result.notes
    assert len(plan(cluster([node("hot", 0.7), node("cool", 0.1)], small),
                    config(minimumGain=1), POLICY, NOW, {}).evictions) == 3


def test_the_gain_is_judged_over_the_set_a_source_gives_not_pod_by_pod() -> None:
    # 71.5 % of 10 cores, target 65 %: no 0.1-core pod gains 2 points alone, but seven
    # together bring the node under the target; an eighth would be one pod too many
    small = [pod(f"s{i}", "hot", cpu=0.1) for i in range(12)]
    result = plan(cluster([node("hot", 0.715), node("cool", 0.1)], small), config(), POLICY,
                  NOW, {})
    assert len(result.evictions) == 7
    assert result.evictions[-1].metric_values["cpu_usage_avg_5m after"] <= 0.65
    assert result.evictions[-1].metric_values["cpu_usage_avg_5m before"] > 0.65


def test_a_set_the_limits_cut_short_still_counts_when_it_gains_minimum_gain() -> None:
    # 80 % hot: three 0.1-core pods per run cannot end the hot spot, but gain 3 points
    small = [pod(f"s{i}", "hot", cpu=0.1) for i in range(12)]
    result = plan(cluster([node("hot", 0.8), node("cool", 0.1)], small),
                  config(maxNoOfPodsToEvictPerNode=3), POLICY, NOW, {})
    assert len(result.evictions) == 3


def test_a_source_whose_set_is_too_small_gives_back_its_room_and_its_share_of_limits() -> None:
    # hot-a (hotter) may give one 0.1-core pod of its one workload per run: 1 point, too
    # small, so none. Its planned eviction must not use up maxNoOfPodsToEvictTotal (1)
    # nor the cool node's room: hot-b's 1-core pod goes instead.
    small = [pod(f"a{i}", "hot-a", cpu=0.1, owner="rs-a") for i in range(10)]
    big = pod("b", "hot-b", cpu=1.0, owner="rs-b")
    nodes = [node("hot-a", 0.9), node("hot-b", 0.7), node("cool", 0.29)]
    result = plan(cluster(nodes, [*small, big]),
                  config(maxNoOfPodsToEvictTotal=1, maxMigratingPerWorkload=1), POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["b"]
    assert [e.destination for e in result.evictions] == ["cool"]
    assert SkipCode.GAIN_TOO_SMALL in {s.code for s in result.skipped if s.node == "hot-a"}


def test_a_small_eviction_that_ends_the_hot_spot_is_a_gain() -> None:
    small = [pod(f"s{i}", "hot", cpu=0.1) for i in range(3)]
    result = plan(cluster([node("hot", 0.655), node("cool", 0.1)], small), config(), POLICY,
                  NOW, {})
    assert len(result.evictions) == 1
    assert result.evictions[0].metric_values["cpu_usage_avg_5m after"] <= 0.65


def test_a_pod_that_is_mostly_another_resource_is_not_moved_for_a_hot_spot() -> None:
    # CPU-hot 10-core / 64 GiB node: a 0.2-core pod with 8 GiB (12.5 % of the memory,
    # six times its 2 % of the CPU) would cool it by a sliver and move mostly memory
    heavy = pod("heavy", "hot", cpu=0.2, requests=Resources(0.2, 8 * GI))
    lean = pod("lean", "hot", cpu=0.3, requests=Resources(0.3, 1 * GI))
    result = plan(cluster([node("hot", 0.7), node("cool", 0.1)], [heavy, lean]), config(),
                  POLICY, NOW, {})
    assert [e.pod.name for e in result.evictions] == ["lean"]
    assert reasons(result, SkipCode.OTHER_RESOURCE) == [
        "mostly memory: moves 12.5% of the node's memory, more than 2 times its 2.0% of "
        "the cpu the node is hot on"
    ]
    # on a node hot on memory too, it is what must move
    both = plan(cluster([node("hot", 0.7, mem=0.8), node("cool", 0.1)], [heavy]), config(),
                POLICY, NOW, {})
    assert [e.pod.name for e in both.evictions] == ["heavy"]


def test_no_node_ends_above_target_thresholds() -> None:
    pods = [pod(f"p{i}", "hot", cpu=1.0) for i in range(8)]
    nodes = [node("hot", 0.95), node("a", 0.3), node("b", 0.35), node("c", 0.38)]
    result = plan(cluster(nodes, pods), config(), POLICY, NOW, {})
    assert result.evictions
    moved: dict[str, float] = {}
    for eviction in result.evictions:
        moved[eviction.destination] = moved.get(eviction.destination, 0.0) + 0.1
    assert all({"a": 0.3, "b": 0.35, "c": 0.38}[n] + f <= 0.4 + 1e-9 for n, f in moved.items())


# -- anti-thrash across runs ----------------------------------------------------------


def record(node_name: str, ago_s: float, destination: str | None = None) -> EvictionRecord:
    return EvictionRecord("default/web-old", "uid-old", node_name, destination,
                          Resources(0.5, GI), NOW - ago_s, "default/ReplicaSet/web")


def test_a_replacement_would_return_to_a_node_its_workload_left() -> None:
    # web left cool-a 30 minutes ago: past workloadCooldown (15m), within returnCooldown (1h)
    pods = [web(f"web-{i}", "hot", cpu=1.0) for i in range(3)]
    both = plan(cluster([node("hot", 0.9), node("cool-a", 0.05), node("cool-b", 0.1)], pods,
                        recent=[record("cool-a", 1800)]), config(), POLICY, NOW, {})
    assert {e.destination for e in both.evictions} == {"cool-b"}
    only = plan(cluster([node("hot", 0.9), node("cool-a", 0.05)], pods,
                        recent=[record("cool-a", 1800)]), config(), POLICY, NOW, {})
    assert only.evictions == []
    assert "default/ReplicaSet/web was evicted from it 30m ago (returnCooldown 1h)" in (
        reasons(only)[0])
    later = plan(cluster([node("hot", 0.9), node("cool-a", 0.05)], pods,
                         recent=[record("cool-a", 3700)]), config(), POLICY, NOW, {})
    assert later.evictions


def test_a_replacement_is_not_evicted_again_from_where_it_was_sent() -> None:
    # web was sent to "hot" 5 minutes ago, which has since gone hot
    pods = [web(f"web-{i}", "hot", cpu=1.0) for i in range(3)]
    result = plan(cluster([node("hot", 0.9), node("cool", 0.05)], pods,
                          recent=[record("elsewhere", 300, destination="hot")]), config(),
                  POLICY, NOW, {})
    assert result.evictions == []
    assert {s.code for s in result.skipped} == {SkipCode.COOLDOWN}


def evicted_beside_an_older_pod(replacement_created_ago_s: float,
                                recent: list[EvictionRecord]) -> list[str]:
    """What a plan evicts from "hot" (cool-b is free): web-new, created this long ago
    and using 2 cores, and web-old, there for two hours and using 1."""
    pods = [web("web-new", "hot", cpu=2.0, created_s=NOW - replacement_created_ago_s),
            web("web-old", "hot", cpu=1.0, created_s=NOW - 7200)]
    result = plan(cluster([node("hot", 0.9), node("cool-b", 0.05)], pods, recent=recent),
                  config(), POLICY, NOW, {})
    return [e.pod.name for e in result.evictions] + reasons(result, SkipCode.COOLDOWN)


def test_past_the_workload_cooldown_a_replacement_still_stays_where_it_was_sent() -> None:
    # 30 minutes ago web-new was sent to "hot", which has since gone hot: past
    # workloadCooldown (15m), within returnCooldown (1h). web-old was there before it.
    sent = [record("elsewhere", 1800, destination="hot")]
    assert evicted_beside_an_older_pod(1790, sent) == [
        "web-old",
        "replacement: a pod of default/ReplicaSet/web was evicted 30m ago and this one was "
        "sent to hot since (returnCooldown 1h)"]
    # a replacement created a little before the eviction by the descheduler's clock
    # (creationTimestamp is truncated to the second; the API server's clock may run
    # behind) is still one; a pod there a minute before it is not
    assert evicted_beside_an_older_pod(1803, sent)[0] == "web-old"
    assert "web-new" in evicted_beside_an_older_pod(1860, sent)
    # sent elsewhere, or an hour later, it may move again
    assert "web-new" in evicted_beside_an_older_pod(
        1790, [record("elsewhere", 1800, destination="cool-c")])
    assert "web-new" in evicted_beside_an_older_pod(
        3690, [record("elsewhere", 3700, destination="hot")])


def test_a_replacement_that_came_back_to_its_source_is_not_evicted_again() -> None:
    # A scheduler without the extender put web's replacement back on "hot", the node the
    # plan took it from 30 minutes ago: evicting it again would restart it for nothing.
    back = [record("hot", 1800, destination="cool-b")]
    assert evicted_beside_an_older_pod(1795, back) == [
        "web-old",
        "replacement: a pod of default/ReplicaSet/web was evicted 30m ago and this one came "
        "back to hot since (returnCooldown 1h)"]


# -- the way kube-scheduler would place the replacement -------------------------------


def anti(topology_key: str = HOSTNAME, **labels: str) -> PodAffinityTerm:
    return PodAffinityTerm(LabelSelector(labels or {"app": "web"}), topology_key, ("default",))


def test_anti_affinity_no_cool_node_satisfies_keeps_the_pod() -> None:
    nodes = [node("hot", 0.9, labels={HOSTNAME: "hot"}),
             node("cool-a", 0.05, labels={HOSTNAME: "cool-a"}),
             node("cool-b", 0.1, labels={HOSTNAME: "cool-b"})]
    victim = web("web-0", "hot", cpu=2.0, pod_anti_affinity=(anti(),))
    others = [web("web-1", "cool-a"), web("web-2", "cool-b")]
    result = plan(cluster(nodes, [victim, *others]), config(), POLICY, NOW, {})
    assert result.evictions == []
    assert "pod anti-affinity: default/web-1 is in its kubernetes.io/hostname domain" in (
        reasons(result, SkipCode.NO_DESTINATION)[0])
    free = plan(cluster(nodes, [victim, others[0]]), config(), POLICY, NOW, {})
    assert [e.destination for e in free.evictions] == ["cool-b"]


def test_another_pods_anti_affinity_against_the_victim_is_honoured() -> None:
    nodes = [node("hot", 0.9, labels={ZONE: "a"}), node("cool", 0.05, labels={ZONE: "b"})]
    victim = web("web-0", "hot", cpu=2.0)
    guard = pod("guard", "cool", owner="guard", pod_anti_affinity=(anti(ZONE),))
    result = plan(cluster(nodes, [victim, guard]), config(), POLICY, NOW, {})
    assert result.evictions == []
    assert "default/guard's pod anti-affinity keeps it out of that domain" in reasons(result)[0]


def test_pods_moved_earlier_in_the_plan_count_for_anti_affinity() -> None:
    nodes = [node("hot", 0.95, labels={HOSTNAME: "hot"}),
             node("cool", 0.05, labels={HOSTNAME: "cool"})]
    pods = [web(f"web-{i}", "hot", cpu=1.0, pod_anti_affinity=(anti(app="spread"),),
                labels={"app": "spread"}) for i in range(3)]
    result = plan(cluster(nodes, pods), config(), POLICY, NOW, {})
    assert len(result.evictions) == 1  # the second would join the first on "cool"


def test_pod_affinity_needs_a_partner_in_the_destinations_domain() -> None:
    nodes = [node("hot", 0.9, labels={HOSTNAME: "hot"}),
             node("cool-a", 0.05, labels={HOSTNAME: "cool-a"}),
             node("cool-b", 0.1, labels={HOSTNAME: "cool-b"})]
    needs_db = (PodAffinityTerm(LabelSelector({"app": "db"}), HOSTNAME, ("default",)),)
    victim = web("web-0", "hot", cpu=2.0, pod_affinity=needs_db)
    db = pod("db-0", "cool-b", owner="db", labels={"app": "db"})
    result = plan(cluster(nodes, [victim, db]), config(), POLICY, NOW, {})
    assert [e.destination for e in result.evictions] == ["cool-b"]


def spread(max_skew: int = 1) -> tuple[SpreadConstraint, ...]:
    return (SpreadConstraint(max_skew, ZONE, LabelSelector({"app": "web"})),)


def zoned() -> list[Any]:
    return [node("hot", 0.9, labels={ZONE: "a"}), node("cool", 0.05, labels={ZONE: "b"}),
            node("busy", 0.5, labels={ZONE: "c"})]


def test_topology_spread_no_cool_node_satisfies_keeps_the_pod() -> None:
    # after the victim goes: a=1, b=2, c=1; onto b: 2 + 1 - 1 = 2 > maxSkew 1
    pods = [web(name, where, cpu=2.0 if name == "web-0" else 0.5, spread=spread())
            for name, where in (("web-0", "hot"), ("web-1", "hot"), ("web-2", "cool"),
                                ("web-3", "cool"), ("web-4", "busy"))]
    result = plan(cluster(zoned(), pods), config(), POLICY, NOW, {})
    assert result.evictions == []
    assert "topology spread on topology.kubernetes.io/zone: skew would be 2, above maxSkew 1" in (
        reasons(result, SkipCode.NO_DESTINATION)[0])
    loose = [web(p.name, p.node_name or "", cpu=p.requests.cpu_cores, spread=spread(2))
             for p in pods]
    assert [e.destination for e in plan(cluster(zoned(), loose), config(), POLICY, NOW,
                                        {}).evictions] == ["cool"]


def test_topology_spread_counts_the_plans_own_moves() -> None:
    # a=3, b=1, c=2: the first move (a=2, b=2) keeps the skew at 1; a second would not
    pods = [web(f"web-{i}", "hot", cpu=1.0, spread=spread()) for i in range(3)]
    pods += [web("web-b", "cool"), web("web-c0", "busy"), web("web-c1", "busy")]
    result = plan(cluster(zoned(), pods), config(), POLICY, NOW, {})
    assert len(result.evictions) == 1
    assert "skew would be 2" in reasons(result, SkipCode.NO_DESTINATION)[0]


class CountingSelector(LabelSelector):
    """A selector that counts how often it is asked: the cost of a rule, without timing."""

    calls = 0

    def matches(self, labels: Any) -> bool:
        CountingSelector.calls += 1
        return super().matches(labels)


def test_a_term_over_every_namespace_costs_one_pass_not_one_per_node() -> None:
    # Anyone who may create pods can write a term with namespaceSelector: {} (every
    # namespace), on their own pod or against others. Checking it on every candidate
    # node must not scan every pod once per node.
    nodes = {f"n{i}": node(f"n{i}", 0.1, labels={HOSTNAME: f"n{i}"}) for i in range(60)}
    pods = [pod(f"p{i}", f"n{i % 60}", namespace=f"ns{i % 7}", labels={"app": "x"})
            for i in range(300)]
    everywhere = PodAffinityTerm(CountingSelector({"app": "none"}), HOSTNAME, None)
    victim = web("victim", "n0", pod_anti_affinity=(everywhere,))
    holder = web("holder", "n1", labels={"app": "db"}, pod_anti_affinity=(
        PodAffinityTerm(CountingSelector({"app": "none"}), HOSTNAME, None),))
    placements = Placements(nodes, [*pods, victim, holder])
    CountingSelector.calls = 0
    assert all(placements.refusal(victim, n) is None for n in nodes.values())
    assert CountingSelector.calls <= len(pods) + 2  # one pass for its term, one for holder's
    placements.move(pods[0], "n5")  # a move starts the passes again, once
    CountingSelector.calls = 0
    assert all(placements.refusal(victim, n) is None for n in nodes.values())
    assert 0 < CountingSelector.calls <= len(pods) + 2

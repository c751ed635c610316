"""The scheduler the descheduler works beside (``scheduler``): beside the extender the
plan chooses the destination; beside a request-based kube-scheduler it predicts where
the replacement lands and never evicts where that is the source or not a destination;
with soft taints only a tainted hot node is a source."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE
from app.objects.nodes import NodeInfo, Taint
from app.objects.pods import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Toleration,
)
from app.objects.resources import Resources
from app.objects.selectors import LabelSelector
from app.rebalance import EvictionPlan, NodeKind, SkipCode, plan, recheck, render_plan
from app.rebalance.config import ConfigError, config_from_mapping
from app.rebalance.kube_scheduler import RequestScheduler
from app.rebalance.placement import Placements
from tests.rebalance.builders import GI, NOW, POLICY, cluster, node, pod
from tests.rebalance.builders import config as base_config

HOSTNAME = "kubernetes.io/hostname"
SOFT_TAINT = Taint(SOFT_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)


def config(scheduler: str, **fields: Any) -> Any:
    return base_config(scheduler=scheduler, evictLastReplica=True, **fields)


def daemon(name: str, node_name: str, cpu: float) -> PodInfo:
    """Requests that stay where they are (a DaemonSet pod is never evicted), limited to
    them: a landing with it on is bounded (``scheduler: requests``'s proof)."""
    return pod(name, node_name, owner="agent", owner_kind="DaemonSet", cpu=cpu,
               limits=Resources(cpu, 1 * GI))


def limited(name: str, node_name: str, cores: float, **fields: Any) -> PodInfo:
    """A pod of 0.5 core requested whose limits bound it at ``cores`` (and 1 GiB): where it
    lands by requests, how hot it can make the node is known."""
    return pod(name, node_name, cpu=0.5, limits=Resources(cores, 1 * GI), **fields)


def plan_of(scheduler: str, nodes: list[NodeInfo], pods: list[PodInfo],
            usage: dict[str, Resources]) -> EvictionPlan:
    return plan(cluster(nodes, pods, usage), config(scheduler), POLICY, NOW, {})


def under_requested(hot_taints: tuple[Taint, ...] = ()) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """The hot node's pod requests 0.5 core and uses 3; the cool node's pods request 6
    cores and use little: by requests, the hot node is the emptiest."""
    victim = pod("victim", "hot", cpu=0.5)
    filler = daemon("filler", "cool", cpu=6.0)
    nodes = [node("hot", 0.9, taints=hot_taints), node("cool", 0.1)]
    usage = {victim.key: Resources(3.0, 1 * GI), filler.key: Resources(0.1, 1 * GI)}
    return nodes, [victim, filler], usage


def test_the_default_is_the_extender_and_an_unknown_scheduler_is_refused() -> None:
    assert config_from_mapping({}).scheduler == "extender"
    assert config_from_mapping({"scheduler": "soft-taints"}).scheduler == "soft-taints"
    with pytest.raises(ConfigError, match="scheduler"):
        config_from_mapping({"scheduler": "kube-scheduler"})


def test_beside_the_extender_the_under_requested_pod_moves() -> None:
    result = plan_of("extender", *under_requested())
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "cool")]
    assert result.scheduler == "extender"


def test_beside_a_request_based_scheduler_a_pod_that_would_come_back_stays() -> None:
    result = plan_of("requests", *under_requested())
    assert result.evictions == []
    (skipped,) = [s for s in result.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.BACK_ON_SOURCE
    assert skipped.reason.startswith("kube-scheduler would place the replacement back on hot")
    assert "Scheduler: requests: kube-scheduler placing by requests alone" in render_plan(result)
    # Said once, as the round's note (the run's log line carries the plan's notes).
    (note,) = [n for n in result.notes if n.startswith("standing down")]
    assert note == (
        "standing down beside kube-scheduler (scheduler: requests): no pod of the 1 "
        "source(s) has a replacement that kube-scheduler would place off its source and "
        "leave under the limits (back_on_source 1): evicting nothing this round"
    )


def test_beside_a_request_based_scheduler_the_destination_is_the_one_it_would_choose() -> None:
    # By real usage "a" is the roomiest (5 %), and the extender mode sends the pod there;
    # by requests kube-scheduler prefers the empty "b" (15 %), which also takes the pod.
    victim = limited("victim", "hot", 2.0)
    pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-a", "a", 6.0)]
    nodes = [node("hot", 0.9), node("a", 0.05), node("b", 0.15)]
    usage = {victim.key: Resources(2.0, 1 * GI)}
    assert [e.destination for e in plan_of("extender", nodes, pods, usage).evictions] == ["a"]
    assert [e.destination for e in plan_of("requests", nodes, pods, usage).evictions] == ["b"]


def test_beside_a_request_based_scheduler_a_landing_cool_only_for_now_is_no_proof() -> None:
    """Issue 40's two-group day: a node at its trough takes the pod, then its own pods
    reach their peak. Without limits nothing bounds how hot the landing gets, and beside
    this scheduler the move could not be undone: the pod stays (``unproven_landing``),
    where beside soft taints or the extender it moves. With limits that keep the landing
    under targetThresholds it moves; with a pod there whose limit could take it past,
    it stays."""
    def landing(victim: PodInfo, on_b: PodInfo | None = None) -> EvictionPlan:
        pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-a", "a", 6.0)]
        usage = {victim.key: Resources(2.0, 1 * GI)}
        if on_b is not None:
            pods.append(on_b)
            usage[on_b.key] = Resources(0.5, 1 * GI)
        nodes = [node("hot", 0.9), node("a", 0.05), node("b", 0.15)]
        return plan_of("requests", nodes, pods, usage)

    unlimited = landing(pod("victim", "hot", cpu=0.5))
    assert unlimited.evictions == []
    (skipped,) = [s for s in unlimited.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.UNPROVEN_LANDING
    assert skipped.reason.startswith("not provably cool: kube-scheduler would place the "
                                     "replacement on b")
    assert "the pod has no cpu limit" in skipped.reason
    assert any(n.startswith("standing down") and "unproven_landing 1" in n
               for n in unlimited.notes)
    assert [e.destination for e in landing(limited("victim", "hot", 2.0)).evictions] == ["b"]
    # A pod on "b" using 0.5 core of a 4-core limit: 15 % + 20 % + 35 % more at worst.
    grows = landing(limited("victim", "hot", 2.0), limited("peaks-later", "b", 4.0,
                                                           owner="other"))
    assert grows.evictions == []
    (skipped,) = [s for s in grows.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.UNPROVEN_LANDING
    assert "cpu could reach 70% with every pod there at its limit, above 65%" in skipped.reason
    within = landing(limited("victim", "hot", 2.0), limited("peaks-later", "b", 3.0,
                                                            owner="other"))
    assert [e.destination for e in within.evictions] == ["b"]  # 60 % at worst
    unbounded = landing(limited("victim", "hot", 2.0), pod("peaks-later", "b", owner="other"))
    (skipped,) = [s for s in unbounded.skipped if s.pod_key == "default/victim"]
    assert "default/peaks-later on it has no cpu limit" in skipped.reason
    # Beside soft taints the annotator taints a landing that grows hot, and the next
    # round moves the pod on: no proof asked for.
    tainted = [node("hot", 0.9, taints=(SOFT_TAINT,)), node("a", 0.05), node("b", 0.15)]
    victim = pod("victim", "hot", cpu=0.5)
    pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-a", "a", 6.0)]
    moved = plan_of("soft-taints", tainted, pods, {victim.key: Resources(2.0, 1 * GI)})
    assert [e.destination for e in moved.evictions] == ["b"]


def busy_favourite(pod_cores: float) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """kube-scheduler would put the replacement on "busy" (no requests), at 50 %: above
    thresholds (40 %), so the plan itself would never send a pod there."""
    victim = limited("victim", "hot", pod_cores)
    pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-cool", "cool", 6.0)]
    nodes = [node("hot", 0.9), node("busy", 0.5), node("cool", 0.1)]
    return nodes, pods, {victim.key: Resources(pod_cores, 1 * GI)}


def test_beside_a_request_based_scheduler_no_pod_goes_where_it_would_make_a_node_hot() -> None:
    # The pod's 2 cores would take "busy" to 70 %, above targetThresholds (65 %).
    result = plan_of("requests", *busy_favourite(2.0))
    assert result.evictions == []
    (skipped,) = [s for s in result.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.NO_DESTINATION
    assert "kube-scheduler would place the replacement on busy" in skipped.reason
    assert "cpu would be at 70% with the pod's real usage, above 65%" in skipped.reason
    assert [e.destination for e in plan_of("extender", *busy_favourite(2.0)).evictions] == [
        "cool"]


def test_beside_a_request_based_scheduler_a_neutral_node_left_under_the_target_takes_it() -> None:
    # The pod's 1 core leaves "busy" at 60 %, under targetThresholds: the eviction gains
    # (hot 90 % -> 80 %) and harms nothing.
    result = plan_of("requests", *busy_favourite(1.0))
    assert result.node_classes["busy"].kind is NodeKind.NEUTRAL
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "busy")]
    # Beside the extender the plan chooses, and never a neutral node.
    assert [e.destination for e in plan_of("extender", *busy_favourite(1.0)).evictions] == [
        "cool"]


def test_beside_a_request_based_scheduler_an_unready_node_is_no_landing() -> None:
    # kube-scheduler filters out the unready "busy": it puts the replacement on "cool",
    # which has fewer requests than "hot" keeps.
    victim = limited("victim", "hot", 1.0)
    pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-cool", "cool", 3.0)]
    nodes = [node("hot", 0.9), replace(node("busy", 0.5), ready=False), node("cool", 0.1)]
    usage = {victim.key: Resources(1.0, 1 * GI)}
    assert [e.destination for e in plan_of("requests", nodes, pods, usage).evictions] == ["cool"]


def test_with_soft_taints_an_untainted_hot_node_is_no_source() -> None:
    result = plan_of("soft-taints", *under_requested())
    assert result.evictions == []
    hot = result.node_classes["hot"]
    assert hot.kind is NodeKind.UNTAINTED
    assert "not tainted yet (no node carries loadaware.io/hot" in hot.reason
    assert any("no hot node carries the soft taint" in note for note in result.notes)
    assert "1 untainted" in render_plan(result)


def spread_requests(hot_taints: tuple[Taint, ...] = ()) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """The hot node keeps 4 cores of requests without its pod, "a" holds 6 and "b"
    none: by requests kube-scheduler prefers "b", taints or not."""
    victim = pod("victim", "hot", cpu=0.5)
    pods = [victim, daemon("agent-hot", "hot", 4.0), daemon("agent-a", "a", 6.0)]
    nodes = [node("hot", 0.9, taints=hot_taints), node("a", 0.05), node("b", 0.15)]
    return nodes, pods, {victim.key: Resources(2.0, 1 * GI)}


def test_with_soft_taints_a_tainted_hot_node_sheds_a_pod_the_scheduler_places_away() -> None:
    result = plan_of("soft-taints", *spread_requests(hot_taints=(SOFT_TAINT,)))
    assert result.node_classes["hot"].kind is NodeKind.SOURCE
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "b")]


def test_with_soft_taints_a_pod_that_is_the_request_favourite_moves_while_the_taint_holds() -> None:
    # Without the pod, "hot" has the fewest requests: by requests alone kube-scheduler
    # would put the replacement back (``requests`` keeps it). The taint outweighs that
    # (3 x 100 points), and the annotator holds it while the node stays above its lower
    # line, which a source cooled to just under targetThresholds does: the pod moves.
    # (Kept once for "the taint may go", it kept nearly every pod of every source.)
    result = plan_of("soft-taints", *under_requested(hot_taints=(SOFT_TAINT,)))
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "cool")]
    assert plan_of("requests", *under_requested()).evictions == []


def tied(hot_cpu: float, pod_cores: float) -> tuple[
        list[NodeInfo], list[PodInfo], dict[str, Resources]]:
    """A tainted hot node and three nodes alike by requests (kube-scheduler ties them
    and picks one at random): "a" cool at 20 %, "b" and "c" at 62 %."""
    victim = limited("victim", "hot", pod_cores)
    pods = [victim, daemon("agent-hot", "hot", 4.0)]
    nodes = [node("hot", hot_cpu, taints=(SOFT_TAINT,)), node("a", 0.2), node("b", 0.62),
             node("c", 0.62)]
    return nodes, pods, {victim.key: Resources(pod_cores, 1 * GI)}


def test_with_soft_taints_a_tie_that_gains_on_average_moves_the_pod() -> None:
    # 1 core off "hot" (90 %: 2.5 cores above 65 %); on "b" or "c" it adds 0.7 core
    # above 65 %: 1.4 / 3 on average, less than the 1 core shed. Reserved on "a".
    result = plan_of("soft-taints", *tied(0.9, 1.0))
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "a")]


def test_with_soft_taints_a_tie_whose_hot_landings_outweigh_the_gain_keeps_the_pod() -> None:
    # "hot" is 0.1 core above 65 %: moving 2 cores sheds 0.1, and "b" or "c" would end
    # 1.7 cores above it (3.4 / 3 on average).
    result = plan_of("soft-taints", *tied(0.66, 2.0))
    assert result.evictions == []
    (skipped,) = [s for s in result.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.HOT_LANDING
    assert skipped.reason.startswith("no gain: kube-scheduler would place the replacement on "
                                     "one of a, b, c")
    assert "2 of which it would take above targetThresholds" in skipped.reason


def test_beside_a_request_based_scheduler_every_tied_node_must_stay_under_the_target() -> None:
    nodes, pods, usage = tied(0.9, 1.0)
    untainted = [replace(n, taints=()) for n in nodes]
    result = plan_of("requests", untainted, pods, usage)
    assert result.evictions == []
    (skipped,) = [s for s in result.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.NO_DESTINATION
    assert "would place the replacement on b" in skipped.reason


def test_with_soft_taints_another_nodes_taint_points_at_the_share() -> None:
    nodes, pods, usage = under_requested()
    nodes.append(node("other", 0.5, taints=(SOFT_TAINT,)))
    result = plan_of("soft-taints", nodes, pods, usage)
    assert result.node_classes["hot"].kind is NodeKind.UNTAINTED
    assert "1 of 3 nodes carry loadaware.io/hot" in result.node_classes["hot"].reason
    assert "taint share" in result.node_classes["hot"].reason


def test_a_tolerated_soft_taint_does_not_keep_the_replacement_away() -> None:
    nodes, pods, usage = under_requested(hot_taints=(SOFT_TAINT,))
    tolerant = pod("victim", "hot", cpu=0.5,
                   tolerations=(Toleration(SOFT_TAINT_KEY, "Exists", None, None),))
    result = plan_of("soft-taints", nodes, [tolerant, pods[1]], usage)
    assert result.evictions == []
    assert [s.code for s in result.skipped] == [SkipCode.BACK_ON_SOURCE]


def test_a_soft_taint_on_a_cool_node_evicts_nothing_from_it() -> None:
    # A taint someone else set (the node's own kubelet): without real heat on its
    # annotations the node is no source, whatever its taints say.
    victim = pod("victim", "tainted", cpu=0.5)
    nodes = [node("tainted", 0.5, taints=(SOFT_TAINT,)), node("cool", 0.1)]
    result = plan_of("soft-taints", nodes, [victim], {victim.key: Resources(3.0, 1 * GI)})
    assert result.node_classes["tainted"].kind is NodeKind.NEUTRAL
    assert result.evictions == []
    assert result.skipped == []


# -- the live re-check just before each eviction ---------------------------------------


def test_the_live_recheck_stops_an_eviction_once_the_taint_is_gone() -> None:
    nodes, pods, usage = spread_requests(hot_taints=(SOFT_TAINT,))
    (eviction,) = plan_of("soft-taints", nodes, pods, usage).evictions
    still = cluster(nodes, pods, usage)
    assert recheck(eviction, still, config("soft-taints"), POLICY, NOW + 5, {}) is None
    untainted, _, _ = spread_requests()
    gone = cluster(untainted, pods, usage)
    assert recheck(eviction, gone, config("soft-taints"), POLICY, NOW + 5, {}) == (
        "hot no longer carries loadaware.io/hot")


def test_the_live_recheck_stops_an_eviction_the_scheduler_would_now_send_back() -> None:
    # Planned while "agent-hot" held 4 cores on the source; it left since, and now the
    # source is the emptiest node by requests.
    victim = limited("victim", "hot", 2.0)
    agent_hot, agent_a = daemon("agent-hot", "hot", 4.0), daemon("agent-a", "a", 6.0)
    nodes = [node("hot", 0.9), node("a", 0.05), node("b", 0.15)]
    usage = {victim.key: Resources(2.0, 1 * GI)}
    (eviction,) = plan_of("requests", nodes, [victim, agent_hot, agent_a], usage).evictions
    assert eviction.destination == "b"
    busy_b = daemon("agent-b", "b", 3.0)
    now = cluster(nodes, [victim, agent_a, busy_b], usage)
    why = recheck(eviction, now, config("requests"), POLICY, NOW + 5, {})
    assert why is not None
    assert why.startswith("kube-scheduler would now place the replacement back on hot")
    # Beside the extender the same change stops nothing: the extender filters hot out.
    assert recheck(eviction, now, config("extender"), POLICY, NOW + 5, {}) is None


def test_the_prediction_honours_the_pods_anti_affinity() -> None:
    # By requests "b" is the scheduler's first choice, but a web pod runs there and the
    # victim's required anti-affinity keeps it off; the next best is "a".
    away_from_web = (PodAffinityTerm(LabelSelector({"app": "web"}), HOSTNAME, ("default",)),)
    victim = limited("victim", "hot", 2.0, labels={"app": "web"},
                     pod_anti_affinity=away_from_web)
    web_b = pod("web-b", "b", owner="web", labels={"app": "web"})
    pods = [victim, web_b, daemon("agent-hot", "hot", 7.0), daemon("agent-a", "a", 1.0)]
    nodes = [node("hot", 0.9, labels={HOSTNAME: "hot"}), node("a", 0.05, labels={HOSTNAME: "a"}),
             node("b", 0.1, labels={HOSTNAME: "b"})]
    usage = {victim.key: Resources(2.0, 1 * GI), web_b.key: Resources(0.1, 1 * GI)}
    result = plan_of("requests", nodes, pods, usage)
    assert [(e.pod.name, e.destination) for e in result.evictions] == [("victim", "a")]


def test_the_predicted_landing_follows_each_move_the_plan_makes() -> None:
    """The request-based prediction keeps the filter and scores per source and requests
    until the plan moves a pod: asked again it answers alike, and after a move it
    answers from the requests as they then stand (what a new prediction answers)."""
    on_a = [pod(f"a{i}", "a", cpu=1.0) for i in range(4)]
    on_b = [pod("b0", "b", cpu=1.0)]
    nodes = [node("a", 0.5), node("b", 0.5), node("c", 0.5)]
    by_name = {n.name: n for n in nodes}

    def fresh(pods: list[PodInfo]) -> tuple[list[str], int]:
        return RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(on_a[1], "a")

    scheduler = RequestScheduler(nodes, [*on_a, *on_b], Placements(by_name, [*on_a, *on_b]))
    before = scheduler.best_nodes(on_a[1], "a")
    assert scheduler.best_nodes(on_a[2], "a") == before == fresh([*on_a, *on_b])
    assert before[0] == ["c"]
    scheduler.move(on_a[0], "a", "c")
    after = scheduler.best_nodes(on_a[1], "a")
    assert after == fresh([replace(on_a[0], node_name="c"), *on_a[1:], *on_b])
    assert after[0] == ["b", "c"]
    scheduler.unmove(on_a[0], "a", "c")
    assert scheduler.best_nodes(on_a[1], "a") == before


def test_a_prediction_asked_again_answers_alike_where_requests_do_not_come_off_exactly() -> None:
    """0.2 + 0.3 + 0.35 cores on "a": taking 0.2 off and back on leaves 0.8499999999999999,
    not 0.85. The prediction notices (its kept filter and scores are dropped) and, asked
    again for pods alike, answers as it did and as a fresh prediction does."""
    on_a = [pod(f"a{i}", "a", cpu=cpu) for i, cpu in enumerate((0.2, 0.3, 0.35))]
    assert (0.2 + 0.3 + 0.35) - 0.2 + 0.2 != 0.2 + 0.3 + 0.35
    nodes = [node("a", 0.5), node("b", 0.5), node("c", 0.4)]
    by_name = {n.name: n for n in nodes}
    scheduler = RequestScheduler(nodes, on_a, Placements(by_name, on_a))
    for victim in (on_a[0], on_a[0], on_a[1], on_a[0], on_a[2], on_a[2]):
        fresh = RequestScheduler(nodes, on_a, Placements(by_name, on_a))
        assert scheduler.best_nodes(victim, "a") == fresh.best_nodes(victim, "a"), victim.name


def test_a_choice_kept_for_pods_alike_is_still_judged_by_each_pods_inter_pod_rules() -> None:
    """Two pods alike in requests, node rules and tolerations share the choice kept
    before the inter-pod rules; one of them has required anti-affinity against the web
    pod on "b", the first choice by requests: it goes to "a", the other to "b", in
    either order and asked again."""
    away_from_web = (PodAffinityTerm(LabelSelector({"app": "web"}), HOSTNAME, ("default",)),)
    shy = pod("shy", "hot", cpu=0.5, labels={"app": "web"}, pod_anti_affinity=away_from_web)
    plain = pod("plain", "hot", cpu=0.5)
    web_b = pod("web-b", "b", owner="web", labels={"app": "web"})
    pods = [shy, plain, web_b, daemon("agent-hot", "hot", 7.0), daemon("agent-a", "a", 6.0)]
    nodes = [node("hot", 0.9, labels={HOSTNAME: "hot"}), node("a", 0.05, labels={HOSTNAME: "a"}),
             node("b", 0.1, labels={HOSTNAME: "b"})]
    by_name = {n.name: n for n in nodes}
    for order in ((shy, plain, shy, plain), (plain, shy, plain, shy)):
        scheduler = RequestScheduler(nodes, pods, Placements(by_name, pods))
        answers = [scheduler.best_nodes(victim, "hot")[0] for victim in order]
        assert answers == [["a"] if victim is shy else ["b"] for victim in order]


def test_the_prediction_spreads_a_replicasets_pods_as_the_default_profile_does() -> None:
    # By requests "a" and "b" tie (1 core each); the system-default topology spread
    # sends the replacement where its ReplicaSet has fewer pods: "b" (none) over "a"
    # (two). A DaemonSet's pod gets no system default: both stay tied.
    nodes = [node("hot", 0.9), node("a", 0.05), node("b", 0.05)]
    web_a = [pod(f"web-a{i}", "a", owner="web") for i in range(2)]
    bare_b = pod("bare-b", "b", owner=None, cpu=1.0)
    victim = pod("victim", "hot", owner="web")
    agent = daemon("agent", "hot", 4.0)
    pods = [victim, *web_a, bare_b, agent]
    by_name = {n.name: n for n in nodes}
    best, _ = RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(victim, "hot")
    assert best == ["b"]
    kept = daemon("kept", "hot", 0.5)
    pods = [kept, *web_a, bare_b, agent]
    best, _ = RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(kept, "hot")
    assert best == ["a", "b"]


def test_the_spread_brings_the_replacement_back_where_its_replicaset_has_fewest() -> None:
    # The source holds the ReplicaSet's only pod; "a" and "b" three each. By requests
    # "a" and "b" are a little emptier (the agent's 2 cores on the source: 179 against
    # 174), but the spread weighs more (2 x 100 against 2 x 28): back on the source, so
    # nothing moves.
    nodes = [node("hot", 0.9), node("a", 0.05), node("b", 0.05)]
    replicas = [pod(f"web-{n}{i}", n, owner="web") for n in ("a", "b") for i in range(3)]
    victim = pod("victim", "hot", owner="web")
    pods = [victim, *replicas, daemon("agent", "hot", 2.0)]
    by_name = {n.name: n for n in nodes}
    best, _ = RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(victim, "hot")
    assert best == ["hot"]
    usage = {victim.key: Resources(2.0, 1 * GI)}
    result = plan_of("requests", nodes, pods, usage)
    assert result.evictions == []
    assert any(s.code == SkipCode.BACK_ON_SOURCE for s in result.skipped)


def test_the_prediction_weighs_the_pods_preferred_node_affinity() -> None:
    # "a" and "b" tie by requests (a DaemonSet's pod: no spread); the pod prefers zone
    # "z2", which only "b" is in: NodeAffinity's 2 x 100 picks it. A pod with spread
    # constraints of its own gets no system default spread either.
    nodes = [node("hot", 0.9), node("a", 0.05, labels={"zone": "z1"}),
             node("b", 0.05, labels={"zone": "z2"})]
    prefers = ((10, NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("z2",)),))),)
    kept = pod("kept", "hot", owner="agent", owner_kind="DaemonSet",
               preferred_node_affinity=prefers)
    pods = [kept, daemon("agent", "hot", 4.0)]
    by_name = {n.name: n for n in nodes}
    best, _ = RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(kept, "hot")
    assert best == ["b"]
    web_a = [pod(f"web-a{i}", "a", owner="web") for i in range(2)]
    own = pod("own", "hot", owner="web", own_spread=True)
    pods = [own, *web_a, pod("bare-b", "b", owner=None, cpu=1.0), daemon("agent", "hot", 4.0)]
    best, _ = RequestScheduler(nodes, pods, Placements(by_name, pods)).best_nodes(own, "hot")
    assert best == ["a", "b"]


def pending(name: str, cpu: float, owner: str) -> PodInfo:
    """A pod created and not bound yet: kube-scheduler places it in the same moments as
    the plan's replacements."""
    return replace(pod(name, "-", cpu=cpu, owner=owner), node_name=None, phase="Pending",
                   ready=False)


def beside_a_pending_batch_pod(*waiting: PodInfo) -> EvictionPlan:
    """Issue 40's big-batch-beside-services in small: a tainted hot node (90 %) with a
    service pod using 1.5 cores; by requests both its replacement and a pending batch
    pod (2 cores requested, its running peer on "c" uses 6) pick the empty "a" (15 %)."""
    victim = pod("api", "hot", cpu=0.5, owner="api")
    peer = pod("etl-1", "c", cpu=2.0, owner="etl")
    pods = [victim, peer, daemon("agent-b", "b", 6.0), daemon("agent-c", "c", 6.0), *waiting]
    nodes = [node("hot", 0.9, taints=(SOFT_TAINT,)), node("a", 0.15), node("b", 0.05),
             node("c", 0.6)]
    usage = {victim.key: Resources(1.5, 1 * GI), peer.key: Resources(6.0, 1 * GI)}
    return plan_of("soft-taints", nodes, pods, usage)


def test_a_pending_pod_that_picks_the_landing_node_counts_there() -> None:
    # Alone, the replacement takes "a" to 30 %: it moves there.
    alone = beside_a_pending_batch_pod()
    assert [(e.pod.name, e.destination) for e in alone.evictions] == [("api", "a")]
    # With the batch pod pending, "a" ends at 90 % (its peer's 6 cores): the pod would
    # add its whole 1.5 cores above targetThresholds, all that its eviction sheds.
    together = beside_a_pending_batch_pod(pending("etl-2", 2.0, "etl"))
    assert together.evictions == []
    (skipped,) = [s for s in together.skipped if s.pod_key == "default/api"]
    assert skipped.reason.endswith("which would be made hot with the pending default/etl-2, "
                                   "which kube-scheduler would place there too")
    # A pending pod that picks another node ("b" is what it tolerates) changes nothing.
    elsewhere = replace(pending("etl-2", 2.0, "etl"),
                        node_selector={HOSTNAME: "b"})
    nodes_b = beside_a_pending_batch_pod(elsewhere)
    assert [(e.pod.name, e.destination) for e in nodes_b.evictions] == [("api", "a")]


def test_a_pending_pod_is_predicted_on_no_node() -> None:
    pods = [daemon("agent-a", "a", 6.0), pending("etl-2", 2.0, "etl")]
    nodes = [node("a", 0.1), node("b", 0.1)]
    scheduler = RequestScheduler(nodes, pods, Placements({n.name: n for n in nodes}, pods))
    assert scheduler.best_nodes(pods[1], None)[0] == ["b"]


def test_beside_a_request_based_scheduler_a_pending_pod_on_the_landing_counts_whole() -> None:
    # By requests the replacement and the pending pod pick "a" (15 %); alone the move is
    # provably cool (its limit: 2 cores), with the pending pod's 6 cores it is not.
    def landing(*waiting: PodInfo) -> EvictionPlan:
        victim = limited("api", "hot", 2.0, owner="api")
        peer = pod("etl-1", "c", cpu=2.0, owner="etl")
        pods = [victim, peer, daemon("agent-hot", "hot", 4.0), daemon("agent-b", "b", 6.0),
                daemon("agent-c", "c", 6.0), *waiting]
        nodes = [node("hot", 0.9), node("a", 0.15), node("b", 0.05), node("c", 0.6)]
        usage = {victim.key: Resources(1.5, 1 * GI), peer.key: Resources(6.0, 1 * GI)}
        return plan_of("requests", nodes, pods, usage)

    assert [(e.pod.name, e.destination) for e in landing().evictions] == [("api", "a")]
    held = landing(pending("etl-2", 2.0, "etl"))
    assert held.evictions == []
    (skipped,) = [s for s in held.skipped if s.pod_key == "default/api"]
    assert "pending default/etl-2" in skipped.reason

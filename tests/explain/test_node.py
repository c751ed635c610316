"""``explain node``, pure: one node's part of the descheduler's plan, read from the plan
the planner makes for the whole cluster."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from app.explain.commands import remembered_rise
from app.explain.node import explain_node
from app.explain.render import node_json, render_node
from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE
from app.objects import Resources, Taint
from app.rebalance import DRAIN_TAINT_KEY, plan
from app.rebalance.outcome import NodeKind, SkipCode
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, load_annotations, node, pod
from tests.support.pools import policy_with_pools

NODES = [node("hot", 0.9), node("cool", 0.1), node("warm", 0.55)]
PODS = [
    pod("web-1", "hot", cpu=1.0),
    pod("web-2", "hot", cpu=1.0),
    pod("bare", "hot", owner=None),
    pod("api", "warm"),
]


def test_a_hot_nodes_moves_and_skips_are_the_plans() -> None:
    view = cluster(NODES, PODS)
    settings = config()
    explanation = explain_node("hot", view, settings, POLICY, NOW, {})
    whole = plan(view, settings, POLICY, NOW, {})
    assert explanation.node_class.kind is NodeKind.SOURCE
    assert explanation.moved_off == tuple(e for e in whole.evictions if e.source == "hot")
    assert explanation.moved_off
    assert {(s.pod_key, s.code) for s in explanation.skipped} == {
        ("default/bare", SkipCode.PROTECTED)
    }
    text = render_node(explanation, ["pod usage: test"])
    assert text.startswith("node hot: a source: the descheduler moves pods off it\n")
    assert "default/bare  protected" in text


def test_a_node_hot_for_fewer_rounds_than_asked_is_not_yet_a_source() -> None:
    explanation = explain_node("hot", cluster(NODES, PODS), config(consecutiveHotRounds=3),
                               POLICY, NOW, {"hot": 1})  # fmt: skip
    assert explanation.node_class.kind is NodeKind.DEBOUNCING
    assert explanation.node_class.hot_rounds == 2
    assert explanation.moved_off == ()
    assert "(round 2 of 3)" in render_node(explanation, [])


def test_a_destination_shows_what_it_would_receive_and_leaves_its_own_pods_alone() -> None:
    explanation = explain_node("cool", cluster(NODES, PODS), config(), POLICY, NOW, {})
    assert explanation.node_class.kind is NodeKind.DESTINATION
    assert explanation.sent_here
    assert all(e.destination == "cool" for e in explanation.sent_here)
    document = json.loads(json.dumps(node_json(explanation, [])))
    assert document["class"] == "destination"
    assert document["wouldReceive"][0]["from"] == "hot"
    warm = explain_node("warm", cluster(NODES, PODS), config(), POLICY, NOW, {})
    assert warm.node_class.kind is NodeKind.NEUTRAL
    assert "none: its 1 pods are not considered, since it is not a source" in render_node(warm, [])


def test_explain_says_which_scheduler_the_plan_assumes_and_why_an_untainted_node_stays() -> None:
    settings = config(scheduler="soft-taints")
    explanation = explain_node("hot", cluster(NODES, PODS), settings, POLICY, NOW, {})
    assert explanation.node_class.kind is NodeKind.UNTAINTED
    assert explanation.moved_off == ()
    text = render_node(explanation, [])
    assert text.startswith("node hot: not a source: hot, but without loadaware's soft taint")
    assert "not tainted yet" in text
    assert "scheduler: soft-taints: kube-scheduler without the extender" in text
    assert node_json(explanation, [])["scheduler"] == "soft-taints"
    by_requests = explain_node("hot", cluster(NODES, PODS), config(scheduler="requests"),
                               POLICY, NOW, {})  # fmt: skip
    assert by_requests.node_class.kind is NodeKind.SOURCE
    assert "scheduler: requests: kube-scheduler placing by requests alone" in render_node(
        by_requests, [])


def test_explain_shows_why_a_pod_stays_when_kube_scheduler_would_land_it_hot() -> None:
    # Beside soft taints: kube-scheduler ties "a", "b" and "c" by requests; "b" and "c"
    # are at 62 %, and the pod's 2 cores would take either 1.7 cores past 65 %, on
    # average more than the 0.1 core its eviction takes off "hot" (66 %).
    taint = Taint(SOFT_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)
    victim = pod("victim", "hot", cpu=0.5)
    agent = pod("agent", "hot", owner="agent", owner_kind="DaemonSet", cpu=4.0)
    nodes = [node("hot", 0.66, taints=(taint,)), node("a", 0.2), node("b", 0.62),
             node("c", 0.62)]  # fmt: skip
    view = cluster(nodes, [victim, agent], {victim.key: Resources(2.0, 2.0**30)})
    settings = config(scheduler="soft-taints", evictLastReplica=True)
    explanation = explain_node("hot", view, settings, POLICY, NOW, {})
    assert explanation.moved_off == ()
    (skipped,) = [s for s in explanation.skipped if s.pod_key == "default/victim"]
    assert skipped.code is SkipCode.HOT_LANDING
    text = render_node(explanation, [])
    assert "hot_landing" in text
    assert "no gain: kube-scheduler would place the replacement on one of a, b, c" in text
    assert any(n.startswith("standing down beside kube-scheduler (scheduler: soft-taints)")
               for n in explanation.notes)


def test_a_node_a_protected_burner_keeps_hot_is_reported_not_churned() -> None:
    """Issue 42, point 3: the burner's node says who holds it hot, and that the pods
    within their requests stay; the JSON names them for tools."""
    burner = pod("burner", "hot", namespace="tenant-a", cpu=0.001, local_storage=True)
    others = [pod(f"web-{i}", "hot", namespace="tenant-b", owner="web", cpu=0.5)
              for i in range(6)]
    usage = {p.key: p.requests for p in others}
    usage[burner.key] = Resources(5.0, GI)
    view = cluster(NODES, [burner, *others], usage=usage)
    explanation = explain_node("hot", view, config(), POLICY, NOW, {})
    assert explanation.moved_off == ()
    codes = {s.pod_key: s.code for s in explanation.skipped}
    assert codes["tenant-a/burner"] is SkipCode.PROTECTED
    assert {codes[p.key] for p in others} == {SkipCode.WITHIN_REQUESTS}
    text = render_node(explanation, [])
    assert "held hot: hot from pods above their requests that stay on it" in text
    assert "tenant-a/burner (cpu 5 cores above its requests)" in text
    document = json.loads(json.dumps(node_json(explanation, [])))
    assert document["heldHot"]["pods"][0]["pod"] == "tenant-a/burner"
    assert abs(document["heldHot"]["held"]["cpu"] - 0.25) < 1e-9  # the excess, 90 % - 65 %
    assert explain_node("cool", view, config(), POLICY, NOW, {}).held_hot is None


def test_a_node_that_opts_out_says_so_and_moves_nothing() -> None:
    opted = node("hot", 0.9, raw={**load_annotations(0.9), "karpenter.sh/do-not-disrupt": "true"})
    view = cluster([opted, *NODES[1:]], PODS)
    explanation = explain_node("hot", view, config(), POLICY, NOW, {})
    assert explanation.moved_off == ()
    assert {s.code for s in explanation.skipped} == {SkipCode.OPTED_OUT}
    assert 'opted out: karpenter.sh/do-not-disrupt: "true" on the node' in render_node(
        explanation, [])
    assert json.loads(json.dumps(node_json(explanation, [])))["optedOut"].startswith(
        "karpenter.sh/do-not-disrupt")



def test_explain_names_each_pod_an_autoscaler_opt_out_keeps_and_why() -> None:
    """Issue 40: a pod's opt-out is the plan's skip, and ``explain node`` says which
    annotation kept it, in text and JSON; the pods beside it still move."""
    kept = {
        "default/web-1": ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),
        "default/web-2": ("karpenter.sh/do-not-disrupt", "true"),
    }
    pods = [
        pod("web-1", "hot", cpu=1.0, annotations=dict([kept["default/web-1"]])),
        pod("web-2", "hot", cpu=1.0, annotations=dict([kept["default/web-2"]])),
        pod("web-3", "hot", cpu=1.0),
        pod("web-4", "hot", cpu=1.0),
    ]
    explanation = explain_node("hot", cluster(NODES, pods), config(), POLICY, NOW, {})
    assert explanation.moved_off
    assert not {e.pod.key for e in explanation.moved_off} & set(kept)
    opted = {s.pod_key: s.reason for s in explanation.skipped if s.code is SkipCode.OPTED_OUT}
    assert set(opted) == set(kept)
    text = render_node(explanation, [])
    for key, (annotation, value) in kept.items():
        assert f'{annotation}: "{value}" on the pod' in opted[key]
        line = next(line for line in text.splitlines() if line.startswith(key))
        assert "opted_out" in line
        assert annotation in line
    document = json.loads(json.dumps(node_json(explanation, [])))
    skipped = {s["pod"]: (s["code"], s["reason"]) for s in document["wouldSkip"]}
    assert {key: skipped[key][0] for key in kept} == dict.fromkeys(kept, "opted_out")
    assert document["wouldMove"]


# -- consolidation (issue 43): which nodes it would drain, why, and where each pod goes --

IDLE_NODES = [node("idle", 0.05, 0.1), node("used-a", 0.35, 0.2), node("used-b", 0.35, 0.2)]
IDLE_PODS = [
    pod("small-1", "idle", cpu=1.0, owner="rs-a"),
    pod("small-2", "idle", cpu=1.0, owner="rs-b"),
    *(pod(f"a-{i}", "used-a", cpu=1.0, owner="rs-a") for i in range(5)),
    *(pod(f"b-{i}", "used-b", cpu=1.0, owner="rs-b") for i in range(5)),
]


def consolidating() -> Any:
    return config(consolidation={"enabled": True, "minSpare": {"cpu": 10, "memory": 10}})


def test_explain_says_an_idle_node_would_be_drained_and_where_each_pod_would_go() -> None:
    view = cluster(IDLE_NODES, IDLE_PODS)
    explanation = explain_node("idle", view, consolidating(), POLICY, NOW, {})
    drained = explanation.consolidation
    assert drained is not None
    assert drained.verdict == "drained"
    assert "underused by requests and real usage" in drained.reason
    assert {e.pod.name for e in drained.moves} == {"small-1", "small-2"}
    assert {e.destination for e in drained.moves} <= {"used-a", "used-b"}
    text = render_node(explanation, [])
    assert "consolidation: drained: underused by requests and real usage" in text
    assert "consolidation would move off it (2):" in text
    document = json.loads(json.dumps(node_json(explanation, [])))
    assert document["consolidation"]["verdict"] == "drained"
    assert {m["to"] for m in document["consolidation"]["wouldMove"]} <= {"used-a", "used-b"}
    # A destination says what it would take, and why it is no candidate itself.
    used = explain_node("used-a", view, consolidating(), POLICY, NOW, {}).consolidation
    assert used is not None
    assert used.verdict == "no candidate"
    assert "consolidation.thresholds" in used.reason
    received = explain_node("used-b", view, consolidating(), POLICY, NOW, {}).consolidation
    assert received is not None
    assert {e.source for e in used.received + received.received} == {"idle"}


def test_explain_says_why_a_node_is_kept_and_when_consolidation_is_off() -> None:
    pods = [pod("small-1", "idle", cpu=1.0, owner="rs-a",
                annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
            *IDLE_PODS[1:]]  # fmt: skip
    explanation = explain_node("idle", cluster(IDLE_NODES, pods), consolidating(), POLICY, NOW, {})
    kept = explanation.consolidation
    assert kept is not None
    assert kept.verdict == "kept"
    assert "safe-to-evict" in kept.reason
    assert kept.moves == ()
    off = explain_node("idle", cluster(IDLE_NODES, IDLE_PODS), config(), POLICY, NOW, {})
    assert off.consolidation is None
    assert "consolidation: off (consolidation.enabled)" in render_node(off, [])
    assert node_json(off, [])["consolidation"] is None


def test_explain_shows_a_drain_in_progress_and_one_it_would_give_up() -> None:
    started = Taint(DRAIN_TAINT_KEY, str(int(NOW - 60)), "NoSchedule")
    old = Taint(DRAIN_TAINT_KEY, str(int(NOW - 7200)), "NoSchedule")
    going = [dataclasses.replace(IDLE_NODES[0], taints=(started,)), *IDLE_NODES[1:]]
    explanation = explain_node("idle", cluster(going, IDLE_PODS), consolidating(), POLICY, NOW, {})
    assert explanation.consolidation is not None
    assert explanation.consolidation.verdict == "draining"
    stale = [dataclasses.replace(IDLE_NODES[0], taints=(old,)), *IDLE_NODES[1:]]
    given_up = explain_node("idle", cluster(stale, IDLE_PODS), consolidating(), POLICY, NOW, {})
    assert given_up.consolidation is not None
    assert given_up.consolidation.verdict == "given up"
    assert "abandonAfter" in given_up.consolidation.reason


def test_explain_names_the_node_s_pools_and_an_overlap() -> None:
    policy = policy_with_pools({"gpu": ({"pool": "gpu"}, 0.4), "zone-a": ({"zone": "a"}, 0.5)})
    settings = config(nodePools=[{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                                  "targetThresholds": {"cpu": 40}}])  # fmt: skip
    nodes = [
        node("gpu-1", 0.5, labels={"pool": "gpu"}),
        node("both", 0.3, labels={"pool": "gpu", "zone": "a"}),
        node("plain", 0.3),
    ]
    view = cluster(nodes, [])
    gpu = explain_node("gpu-1", view, settings, policy, NOW, {})
    text = render_node(gpu, [])
    assert "node pool: policy gpu; descheduler configuration gpu\n" in text
    assert "hot above cpu=40%" in text
    assert node_json(gpu, [])["nodePool"] == {
        "policy": "gpu", "policyOverlap": [], "configuration": "gpu", "configurationOverlap": []
    }
    both = render_node(explain_node("both", view, settings, policy, NOW, {}), [])
    assert (
        "node pool: policy none: pools gpu, zone-a all select it, an error: judged by the "
        "policy's own limits until one pool selects it; descheduler configuration gpu"
    ) in both
    plain = explain_node("plain", view, settings, policy, NOW, {})
    assert "node pool: policy none (policy's own limits); descheduler configuration none" in (
        render_node(plain, [])
    )
    # Neither file with pools: no line, no key.
    unpooled = explain_node("plain", view, config(), POLICY, NOW, {})
    assert "node pool" not in render_node(unpooled, [])
    assert "nodePool" not in node_json(unpooled, [])


def test_explain_keeps_a_node_for_the_rise_the_descheduler_s_memory_holds() -> None:
    # The memory holds 12 cores of demand a minute ago after 6 (a 6-core rise); now 12
    # (the view's pods). Draining idle would leave 8 cores: room for it, drained. A
    # rise of 9 cores (3 then 12) is more than that: kept, and explain says why.
    view = cluster(IDLE_NODES, IDLE_PODS)

    def remembered(cores_before: float) -> Resources:
        demand = [(NOW - 120, Resources(cores_before, 12 * GI)), (NOW - 60, Resources(12, 12 * GI))]
        return remembered_rise(demand, IDLE_PODS, consolidating(), NOW)

    small = remembered(6)
    assert small == Resources(6, 0)
    drained = explain_node("idle", view, consolidating(), POLICY, NOW, {}, small).consolidation
    assert drained is not None
    assert drained.verdict == "drained"
    large = remembered(3)
    kept = explain_node("idle", view, consolidating(), POLICY, NOW, {}, large).consolidation
    assert kept is not None
    assert kept.verdict == "kept"
    assert "9.0 cores rise in demand" in kept.reason

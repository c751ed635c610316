"""``explain pod``, pure: the extender's verdicts and scores node by node, the estimate of
recent pods, the preferred node, and what a person reads first."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.explain.pod import NodeVerdict, PodExplanation, explain_pod
from app.explain.render import pod_json, render_pod
from app.extender.reserve import Reserve
from app.extender.table import NodeTable
from app.load.estimate import estimate_pod_usage
from app.load.samples import format_usage
from app.objects.nodes import NodeInfo, Taint
from app.objects.pods import OwnerRef, PodInfo, ScheduledPod, Toleration
from app.objects.resources import Resources
from app.policy import Policy, default_policy
from tests.support.pools import policy_with_pools

NOW_S = 1_700_000_000.0
GiB = 2.0**30
POLICY = default_policy()
EIGHT_CPUS = Resources(8.0, 32 * GiB)
# request 100m, limit 4: the estimate is 4 x 0.85 = 3.4 cores, 0.425 of 8, where it rests
# on the limit (a pod scored or bound through the scheduler), 0.1 x 0.85 on the request
BURSTABLE = (Resources(0.1, 64 * 2**20), Resources(4.0, 64 * 2**20))
GUARANTEED = (Resources(4.0, 64 * 2**20), Resources(4.0, 64 * 2**20))  # 0.425 either way


def node(name: str, cpu: float, taints: tuple[Taint, ...] = (), memory: float = 0.2) -> NodeInfo:
    """A node sampled 30 s ago: ``cpu`` on every cpu metric, ``memory`` on every memory one."""
    at_s = NOW_S - 30
    annotations = {
        m: format_usage(cpu if m.startswith("cpu") else memory, at_s) for m in POLICY.metrics
    }
    return NodeInfo(name, annotations, None, taints=taints, allocatable=EIGHT_CPUS)


def asking(
    node_name: str | None = None,
    tolerations: tuple[Toleration, ...] = (),
    owner: OwnerRef | None = None,
) -> PodInfo:
    return PodInfo(
        "shop", "asks", "uid-asks", node_name, "Pending", False, False, NOW_S,
        tolerations=tolerations, owner=owner,
    )  # fmt: skip


def bound(
    node_name: str,
    at_s: float = NOW_S - 10,
    finished: bool = False,
    shape: tuple[Resources, Resources] = BURSTABLE,
) -> ScheduledPod:
    return ScheduledPod("uid", node_name, *shape, bound_at_s=at_s, finished=finished)


def explained(
    nodes: list[NodeInfo],
    pods: dict[str, ScheduledPod] | None = None,
    pod: PodInfo | None = None,
    pod_object: dict[str, object] | None = None,
    policy: Policy = POLICY,
) -> PodExplanation:
    return explain_pod(
        pod or asking(),
        pod_object or {"metadata": {"name": "asks", "namespace": "shop"}},
        {n.name: n for n in nodes},
        (pods or {}).items(),
        policy,
        NOW_S,
    )


def verdicts(explanation: PodExplanation) -> dict[str, NodeVerdict]:
    return {v.node: v for v in explanation.verdicts}


def test_a_hot_node_is_refused_on_the_first_predicate_over_its_limit() -> None:
    answer = verdicts(explained([node("hot", 0.9), node("cool", 0.1)]))
    refused = answer["hot"].refused
    assert refused is not None
    assert (refused.metric, refused.limit_fraction) == ("cpu_usage_avg_5m", 0.65)
    assert refused.usage_fraction == pytest.approx(0.9)
    assert answer["hot"].load.reason == refused.reason
    assert answer["cool"].passes


def test_a_pod_bound_since_the_sample_is_added_and_refuses_a_node_under_its_limit() -> None:
    pods = {"shop/just-bound": bound("busy", shape=GUARANTEED)}
    answer = verdicts(explained([node("busy", 0.3)], pods))
    refused = answer["busy"].refused
    assert refused is not None
    reading = answer["busy"].reading("cpu_usage_avg_5m")
    assert reading is not None
    assert reading.measured_fraction == pytest.approx(0.3)
    assert reading.unsampled_fraction == pytest.approx(0.425)
    assert answer["busy"].recent_pods == 1


def test_a_bound_pods_estimate_rests_on_its_requests_as_for_a_pod_first_seen_placed() -> None:
    """What explain sees of a pod is a pod already on its node: the extender estimates
    such a pod from its requests (Evidence.PLACED), never from a limit nothing checks."""
    answer = verdicts(explained([node("busy", 0.3)], {"shop/just-bound": bound("busy")}))
    assert answer["busy"].passes
    reading = answer["busy"].reading("cpu_usage_avg_5m")
    assert reading is not None
    assert reading.unsampled_fraction == pytest.approx(0.1 * 0.85 / 8)


@pytest.mark.parametrize(
    ("key", "pod"),
    [
        ("shop/asks", bound("busy")),  # the pod asked about: judged before it was bound
        ("shop/done", bound("busy", finished=True)),  # uses nothing any more
        ("shop/old", bound("busy", at_s=NOW_S - 301)),  # past maxAge (5m)
    ],
    ids=["itself", "finished", "past-max-age"],
)
def test_pods_the_extender_does_not_count_add_nothing(key: str, pod: ScheduledPod) -> None:
    answer = verdicts(explained([node("busy", 0.3)], {key: pod}, asking(node_name="busy")))
    assert answer["busy"].passes
    assert answer["busy"].recent_pods == 0


def test_the_preferred_node_is_the_best_passing_one_kube_scheduler_offers() -> None:
    nodes = [
        node("hot", 0.9),
        node("tainted", 0.0, (Taint("dedicated", "db", "NoSchedule"),)),  # scores 9 of 10
        node("cool", 0.3),  # 8
        node("warm", 0.5),  # 7
    ]
    answer = explained(nodes)
    assert answer.preferred == "cool"
    assert (
        verdicts(answer)["tainted"].not_offered == "taint dedicated=db:NoSchedule is not tolerated"
    )
    tolerating = asking(tolerations=(Toleration("dedicated", "Equal", "db", "NoSchedule"),))
    assert explained(nodes, pod=tolerating).preferred == "tainted"


def test_nodes_with_the_top_score_are_named_as_ties() -> None:
    answer = explained([node("b", 0.1), node("a", 0.1), node("c", 0.5)])
    assert (answer.preferred, answer.tied) == ("a", ("b",))


def test_a_daemonset_pod_passes_every_node_as_the_extender_lets_it() -> None:
    """Its controller reference says so; a hot node passes but is never the one lifted
    (``wire.can_be_preferred``): with no other node, kube-scheduler's scores choose."""
    owners = {"ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}]}
    pod_object: dict[str, object] = {"metadata": {"name": "asks", **owners}}
    daemon = asking(owner=OwnerRef("DaemonSet", "agent", "u"))
    answer = explained([node("hot", 0.9)], pod=daemon, pod_object=pod_object)
    hot = verdicts(answer)["hot"]
    assert hot.passes
    assert answer.preferred is None
    assert hot.answered == min(hot.load.extender_score, 9)
    named_only = [{"kind": "DaemonSet", "name": "agent", "controller": False}]
    only_named: dict[str, object] = {"metadata": {"name": "asks", "ownerReferences": named_only}}
    assert not verdicts(explained([node("hot", 0.9)], pod_object=only_named))["hot"].passes


def test_the_preferred_node_has_room_for_the_pod_under_its_limits() -> None:
    """A pod estimated at 3.4 of 8 cores (0.425) fits under the 0.65 cpu limit of a node
    at 0.2, not of one at 0.1 whose memory is what scores it higher; the node without room
    is answered at most the preferred node's score."""
    roomy = node("roomy", 0.2)
    low_memory = {m: format_usage(0.1 if m.startswith("cpu") else 0.0, NOW_S - 30)
                  for m in POLICY.metrics}  # fmt: skip
    tight = NodeInfo("tight", low_memory, None, allocatable=Resources(4.0, 32 * GiB))
    heavy = PodInfo(
        "shop", "asks", "uid-asks", None, "Pending", False, False, NOW_S,
        requests=BURSTABLE[0], limits=BURSTABLE[1],
    )  # fmt: skip
    answer = explained([roomy, tight], pod=heavy)
    by_name = verdicts(answer)
    assert by_name["tight"].load.extender_score > by_name["roomy"].load.extender_score
    assert not by_name["tight"].has_room
    assert answer.preferred == "roomy"
    assert by_name["roomy"].answered == min(by_name["roomy"].load.extender_score + 1, 10)
    assert by_name["tight"].answered == min(by_name["roomy"].load.extender_score, 9)


def test_a_node_without_fresh_data_is_never_preferred() -> None:
    stale = {m: format_usage(0.0, NOW_S - 86_400) for m in POLICY.metrics}
    answer = explained([NodeInfo("stale", stale, None, allocatable=EIGHT_CPUS), node("warm", 0.5)])
    assert answer.preferred == "warm"
    assert explained([NodeInfo("stale", stale, None, allocatable=EIGHT_CPUS)]).preferred is None


def test_where_the_pod_runs_then_the_preferred_then_the_hottest_refused_come_first() -> None:
    nodes = [node(f"n{i}", cpu) for i, cpu in enumerate([0.5, 0.7, 0.1, 0.95, 0.3, 0.2])]
    answer = explained(nodes, pod=asking(node_name="n4"))
    assert [v.node for v in answer.verdicts] == ["n4", "n2", "n3", "n1", "n5", "n0"]


def test_the_text_fits_a_screen_and_json_holds_every_node() -> None:
    nodes = [node(f"n{i:02}", 0.1 + i / 100) for i in range(40)]
    answer = explained(nodes)
    text = render_pod(answer, "test", top=10)
    rows = [line for line in text.splitlines() if line.startswith("n")]
    assert len(rows) == 20  # ten in the verdict table, ten in the score parts
    assert "... 30 more nodes (--all shows every node)" in text
    assert "more nodes" not in render_pod(answer, "test", top=None)
    document = json.loads(json.dumps(pod_json(answer, "test")))
    assert len(document["nodes"]) == 40
    assert document["preferred"] == "n00"


def test_the_score_parts_add_up_to_the_load_score() -> None:
    rng = random.Random(7)
    for _ in range(200):
        values = {m: format_usage(rng.random(), NOW_S - 30) for m in POLICY.metrics}
        values.pop(rng.choice(POLICY.metrics))  # one without data: scored at its limit
        info = NodeInfo("n", values, None, allocatable=EIGHT_CPUS)
        verdict = verdicts(explained([info]))["n"]
        total = sum(part.points for part in verdict.parts)
        assert int(total + 1e-9) == verdict.load.load_score
        assert any(part.assumed for part in verdict.parts)


@settings(max_examples=60, deadline=None)
@given(
    usage=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), min_size=1, max_size=6),
    recent=st.lists(st.tuples(st.integers(0, 5), st.floats(0.0, 600.0)), max_size=8),
    asks_cpu=st.sampled_from([0.0, 0.5, 2.0, 4.0, 6.0]),  # cores, requested and limited
)
# n1 scores higher on its free memory, but the pod's 1.7 cores take it over the cpu limit
@example(usage=[(0.0, 0.625), (0.5, 0.0)], recent=[], asks_cpu=2.0)
def test_every_verdict_and_score_is_the_extender_tables(
    usage: list[tuple[float, float]], recent: list[tuple[int, float]], asks_cpu: float
) -> None:
    """The extender's own NodeTable and Reserve, fed the same nodes and bound pods one
    event at a time, reach the same reason and score for every node, and its verdict
    index answers prioritize for the pod with explain's scores and preferred node."""
    nodes = [node(f"n{i}", cpu, memory=memory) for i, (cpu, memory) in enumerate(usage)]
    pods = {
        f"shop/p{j}": bound(f"n{index % len(nodes)}", at_s=NOW_S - age_s)
        for j, (index, age_s) in enumerate(recent)
    }
    demand = Resources(asks_cpu, 64 * 2**20)
    pod = PodInfo(
        "shop", "asks", "uid-asks", None, "Pending", False, False, NOW_S,
        requests=demand, limits=demand,
    )  # fmt: skip
    explanation = explained(nodes, pods, pod=pod)
    answer = verdicts(explanation)
    reserve = Reserve(POLICY, lambda _result: None, clock=lambda: NOW_S)
    table = NodeTable(POLICY, clock=lambda: NOW_S, reserve=reserve)
    for info in nodes:
        reserve.set_allocatable(info.name, info.allocatable)
        table.upsert(info.name, info.annotations)
    for key, placed in pods.items():
        for name in reserve.on_pod(key, None, placed, NOW_S):
            table.recompute(name)
    for info in nodes:
        entry = table.get(info.name)
        assert entry is not None
        assert answer[info.name].load.reason == entry.reason
        assert answer[info.name].load.extender_score == entry.load.extender_score
        assert answer[info.name].load.readings == entry.load.readings
    # kube-scheduler asks prioritize about the passing nodes: the index's answer, the
    # preferred node alone on top, is explain's.
    asked = [name for name, verdict in sorted(answer.items()) if verdict.asked]
    if asked:
        estimate = estimate_pod_usage(demand, demand, POLICY.spec.estimation)
        body, _, best = table.index.prioritize(asked, estimate.cpu_cores, estimate.memory_bytes)
        scores = {item["Host"]: item["Score"] for item in json.loads(body)}
        assert scores == {name: answer[name].answered for name in asked}
        assert explanation.preferred == (asked[best] if best >= 0 else None)
    assert all(v.answered is None for v in answer.values() if not v.asked)


def test_a_forged_event_message_cannot_drive_the_terminal() -> None:
    """Anyone who may create Events in the pod's namespace can write a FailedScheduling
    message: it is shown without control characters, and bounded."""
    forged = "0/3 nodes are available\x1b[2J\x1b]0;owned\x07\nfake line" + "x" * 5000
    answer = explain_pod(
        asking(), {}, {"n": node("n", 0.1)}, (), POLICY, NOW_S, failed_scheduling=forged
    )
    text = render_pod(answer, "test", top=10)
    line = next(row for row in text.splitlines() if row.startswith("kube-scheduler's last"))
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "fake line" in line  # the line break did not start a line of its own
    assert line.endswith(" [...]")
    assert len(line) < 2100


def test_the_room_check_follows_the_workloads_published_usage_as_the_extenders_does() -> None:
    """A pod that requests 100m and sets no limit is estimated at 85m: every node at 0.6
    has room. Its workload is published to use 1 core a pod: 1/8 more takes a node at 0.6
    over the 0.65 limit, and none has room (the extender's room check, the same rule)."""
    light = PodInfo(
        "shop", "asks", "uid-asks", None, "Pending", False, False, NOW_S,
        requests=Resources(0.1, 64 * 2**20),
    )  # fmt: skip
    nodes = {n.name: n for n in (node("a", 0.6), node("b", 0.6))}

    def rooms(observed: Resources | None) -> set[bool]:
        answer = explain_pod(light, {}, nodes, (), POLICY, NOW_S, None, observed)
        return {v.has_room for v in answer.verdicts}

    assert rooms(None) == {True}
    assert rooms(Resources(1.0, 0.0)) == {False}
    assert rooms(Resources(0.2, 0.0)) == {True}  # 2.4x its estimate: kept


def test_each_node_is_judged_by_its_pool_s_limits() -> None:
    from dataclasses import replace

    policy = policy_with_pools({"gpu": ({"pool": "gpu"}, 0.4)})
    gpu = replace(node("gpu-1", 0.5), labels={"pool": "gpu"})
    plain = node("plain-1", 0.5)
    answer = verdicts(explained([gpu, plain], policy=policy))
    assert answer["gpu-1"].load.reason == "Load[cpu_usage_avg_5m] is too high (> 0.4)"
    assert answer["gpu-1"].limits["cpu_usage_avg_5m"] == 0.4
    assert answer["plain-1"].load.reason is None
    assert answer["plain-1"].limits["cpu_usage_avg_5m"] == 0.65


def test_a_pod_of_a_class_is_explained_by_its_class_s_usage_and_limits() -> None:
    from app.policy import class_usage_key, policy_from_yaml
    from tests.test_policy_classes import classed

    policy = policy_from_yaml(classed())
    busy = node("busy-prod", 0.3)
    busy = NodeInfo(
        busy.name,
        {**busy.annotations, class_usage_key("production", "cpu"): format_usage(0.5, NOW_S - 30)},
        None,
        allocatable=EIGHT_CPUS,
    )
    production = {"metadata": {"name": "asks", "namespace": "shop"}, "spec": {"priority": 9500}}
    explanation = explained([busy, node("quiet", 0.3)], pod_object=production, policy=policy)
    assert explanation.pod_class == "production"
    refused = verdicts(explanation)["busy-prod"].refused
    assert refused is not None
    assert refused.metric == "production:cpu_usage"
    assert "class of pods: production" in render_pod(explanation, "p.yaml", None)
    assert pod_json(explanation, "p.yaml")["class"] == "production"
    # The same pod in no class: the policy's own limits, and the node passes.
    plain = explained([busy, node("quiet", 0.3)], policy=policy)
    assert plain.pod_class is None
    assert verdicts(plain)["busy-prod"].passes
    # Offered busy-prod alone, production's limit on its own usage yields (as the
    # extender's filter does where no node passes it): the node passes.
    alone = explained([busy], pod_object=production, policy=policy)
    assert verdicts(alone)["busy-prod"].passes
    assert alone.preferred == "busy-prod"


def test_a_batch_pod_is_explained_with_production_s_limits_where_production_runs() -> None:
    from app.policy import class_usage_key, policy_from_yaml
    from tests.test_policy_classes import HOT_BATCH, classed

    policy = policy_from_yaml(classed(HOT_BATCH))
    hot = node("beside-production", 0.8)
    production = {class_usage_key("production", "memory"): format_usage(0.02, NOW_S - 30)}
    beside = NodeInfo(hot.name, {**hot.annotations, **production}, None, allocatable=EIGHT_CPUS)
    batch = {"metadata": {"name": "asks", "namespace": "shop"}, "spec": {"priority": 5500}}
    answer = verdicts(explained([beside, node("batch-only", 0.8)], pod_object=batch, policy=policy))
    refused = answer["beside-production"].refused
    assert refused is not None
    assert (refused.metric, refused.limit_fraction) == ("cpu_usage_avg_5m", 0.65)
    assert answer["beside-production"].limits["cpu_usage_avg_5m"] == 0.65
    assert answer["batch-only"].passes
    assert answer["batch-only"].limits["cpu_usage_avg_5m"] == 0.92


def test_a_class_s_pod_is_refused_a_node_its_own_estimate_takes_past_its_limits() -> None:
    from app.explain.render import render_pod
    from app.policy import policy_from_yaml
    from tests.test_policy_classes import HOT_BATCH, classed

    policy = policy_from_yaml(classed(HOT_BATCH))
    heavy = PodInfo(
        "shop", "asks", "uid-asks", None, "Pending", False, False, NOW_S,
        requests=BURSTABLE[0], limits=BURSTABLE[1],
    )  # fmt: skip
    batch = {"metadata": {"name": "asks", "namespace": "shop"}, "spec": {"priority": 5500}}
    nodes = [node("warm", 0.6), node("cool", 0.4)]
    # Batch's 92 %: 60 % + the pod's 42.5 % is past it, 40 % + 42.5 % is not.
    answer = explained(nodes, pod=heavy, pod_object=batch, policy=policy)
    by_name = verdicts(answer)
    assert by_name["warm"].refused is None  # no predicate over its limit before the pod
    assert by_name["warm"].short_of_room
    assert not by_name["warm"].passes
    assert by_name["cool"].passes
    assert "refused: no room for the pod's estimated usage" in render_pod(answer, "p.yaml", None)
    # The same pod in no class is judged by the usage before it (crane's rule): the
    # policy's 65 % passes both.
    plain = verdicts(explained(nodes, pod=heavy, policy=policy))
    assert plain["warm"].passes
    assert plain["cool"].passes


def test_a_node_in_a_pool_is_refused_a_pod_its_estimate_takes_past_the_pool_s_limits() -> None:
    """As the extender's filter: a node in a node pool passes a pod only where the pod's
    own estimate fits under the pool's limits; a node in no pool is judged by its usage
    before the pod (crane's rule)."""
    from dataclasses import replace

    policy = policy_with_pools({"gpu": ({"pool": "gpu"}, 0.6)})
    heavy = PodInfo(
        "shop", "asks", "uid-asks", None, "Pending", False, False, NOW_S,
        requests=BURSTABLE[0], limits=BURSTABLE[1],
    )  # fmt: skip
    gpu = replace(node("gpu-1", 0.3), labels={"pool": "gpu"})
    # The pod's 42.5 %: 30 % + 42.5 % is past the pool's 60 %; the node in no pool, at
    # 50 %, is under the policy's own 65 % before the pod, which is all it is judged by.
    answer = explained([gpu, node("plain", 0.5)], pod=heavy, policy=policy)
    by_name = verdicts(answer)
    assert by_name["gpu-1"].refused is None
    assert by_name["gpu-1"].short_of_room
    assert not by_name["gpu-1"].passes
    assert by_name["plain"].passes
    text = render_pod(answer, "p.yaml", None)
    assert "refused: no room for the pod's estimated usage under its node pool's limits" in text
    # A pod small enough for the pool's room passes it.
    small = verdicts(explained([gpu], policy=policy))
    assert small["gpu-1"].passes

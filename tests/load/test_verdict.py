"""One node verdict: the extender's table, the simulator's load filter and explain each
judge a node by ``app.load.node_verdict``, and on random nodes and pods all three give what
the reference gives for the same measurement and the same pods not yet sampled."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.explain.pod import explain_pod, judge_node
from app.extender.reserve import Reserve
from app.extender.table import NodeTable
from app.load import (
    HOT_VALUE_KEY,
    Evidence,
    NodeVerdict,
    PlacedPod,
    estimate_scheduled,
    format_hot_value,
    format_usage,
    measure,
    node_verdict,
    unsampled_after,
    unsampled_fractions,
)
from app.objects import CPU, MEMORY, NodeInfo, PodInfo, Resources, ScheduledPod
from app.policy import default_policy
from app.simulate.recording_rules import SimulatedMonitoring
from app.simulate.scheduling import LoadFilter

NOW = time.time()
POLICY = default_policy()
GIB = 1024.0**3

annotation_value = st.one_of(
    st.builds(format_usage, st.floats(0, 1.2), st.floats(NOW - 3 * 3600, NOW + 60)),
    st.sampled_from(["", "0.5,garbage", "nan,2026-01-01T00:00:00Z", "-1,2026-01-01T00:00:00Z"]),
)
hot_value = st.builds(format_hot_value, st.integers(0, 5), st.floats(NOW - 600, NOW))
node_annotations = st.builds(
    lambda metrics, hot: {**metrics, **hot},
    st.dictionaries(st.sampled_from(POLICY.metrics), annotation_value),
    st.dictionaries(st.just(HOT_VALUE_KEY), hot_value, max_size=1),
)
resources = st.builds(Resources, st.floats(0, 8), st.floats(0, 16 * GIB))
allocatable = st.builds(Resources, st.floats(0.5, 64), st.floats(GIB, 256 * GIB))
placed_pod = st.builds(
    PlacedPod, resources, resources, st.floats(NOW - 600, NOW), st.just(Evidence.PLACED)
)


@st.composite
def node(draw: st.DrawFn) -> tuple[dict[str, str], Resources, list[PlacedPod]]:
    return (
        draw(node_annotations),
        draw(allocatable),
        draw(st.lists(placed_pod, max_size=6)),
    )


def reference(
    annotations: Mapping[str, str], size: Resources, pods: list[PlacedPod], pod: PodInfo
) -> NodeVerdict:
    """The node judged by the load model alone, from the same inputs the callers get."""
    measurement = measure(annotations, POLICY, NOW)
    unsampled = unsampled_after(pods, measurement.freshest_sample_s(), size, POLICY, NOW)
    estimate = estimate_scheduled(pod.requests, pod.limits, POLICY.spec.estimation)
    return node_verdict(measurement, unsampled, POLICY, unsampled_fractions((estimate,), size))


def scheduled_pods(
    nodes: list[tuple[dict[str, str], Resources, list[PlacedPod]]],
) -> list[tuple[str, ScheduledPod]]:
    """Every node's bound pods as the pod cache holds them, by namespace/name."""
    return [
        (
            f"ns/pod-{index}-{number}",
            ScheduledPod(
                f"uid-{index}-{number}",
                f"node-{index}",
                placed.requests,
                placed.limits,
                placed.bound_at_s,
                finished=False,
            ),
        )
        for index, (_, _, pods) in enumerate(nodes)
        for number, placed in enumerate(pods)
    ]


def extender_entries(nodes: list[tuple[dict[str, str], Resources, list[PlacedPod]]]) -> NodeTable:
    """The extender's table, fed through its reserve as the pod and node caches feed it."""
    reserve = Reserve(POLICY, lambda _ended: None, clock=time.time)
    table = NodeTable(POLICY, clock=lambda: NOW, reserve=reserve)
    for index, (_, size, _) in enumerate(nodes):
        reserve.set_allocatable(f"node-{index}", size)
    for key, scheduled in scheduled_pods(nodes):
        reserve.on_pod(key, None, scheduled, NOW)
    for index, (written, _, _) in enumerate(nodes):
        table.upsert(f"node-{index}", written)
    return table


class GivenAnnotations(SimulatedMonitoring):
    """The simulator's monitoring, with each node's annotations given rather than scraped."""

    def __init__(self, annotations: list[dict[str, str]]) -> None:
        super().__init__(
            POLICY, len(annotations), epoch_s=NOW - 100.0, scrape_interval_s=15.0,
            rule_interval_s=30.0, hot_value_interval_s=60.0,
        )  # fmt: skip
        self._given = annotations

    def annotations(self, node: int) -> Mapping[str, str]:
        return self._given[node]


class GivenUnsampled:
    """The simulator's burst estimate (``UnsampledUsage``) over the given pods."""

    def __init__(self, nodes: list[tuple[dict[str, str], Resources, list[PlacedPod]]]) -> None:
        self._nodes = nodes

    def unsampled(
        self, node: int, t_s: float, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        annotations, _, _ = self._nodes[node]
        sample_at_s = measure(annotations, POLICY, NOW).freshest_sample_s()
        return self.unsampled_after(node, t_s, sample_at_s, partly_sampled)

    def unsampled_after(
        self, node: int, t_s: float, sample_at_s: float | None, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        _, size, pods = self._nodes[node]
        return unsampled_after(pods, sample_at_s, size, POLICY, NOW, partly_sampled)

    def changed_nodes(self, t_s: float) -> set[int]:
        return set()

    def recent_pods(self, t_s: float) -> list[PlacedPod]:
        return []


def pod_info(requests: Resources, limits: Resources) -> PodInfo:
    return PodInfo(
        "ns", "asked", "uid-asked", None, "Pending", False, False, NOW,
        requests=requests, limits=limits,
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(node(), min_size=1, max_size=5),
    requests=resources,
    limits=resources,
)
def test_the_extender_the_simulator_and_explain_judge_every_node_as_the_load_model(
    nodes: list[tuple[dict[str, str], Resources, list[PlacedPod]]],
    requests: Resources,
    limits: Resources,
) -> None:
    pod = pod_info(requests, limits)
    table = extender_entries(nodes)
    load_filter = LoadFilter(
        POLICY, GivenAnnotations([a for a, _, _ in nodes]), len(nodes), GivenUnsampled(nodes)
    )
    load_filter.refresh(100.0)  # NOW, on the simulator's clock
    for index, (written, size, pods) in enumerate(nodes):
        expected = reference(written, size, pods, pod)
        room_cpu = expected.room.get(CPU, math.inf)
        room_memory = expected.room.get(MEMORY, math.inf)

        entry = table.get(f"node-{index}")
        assert entry is not None
        assert entry.load == expected.load
        assert entry.preferable == expected.preferable
        assert (entry.limit_cpu, entry.limit_memory) == (room_cpu, room_memory)

        assert load_filter.loads[index] == expected.load
        assert load_filter.passes[index] == expected.passes
        assert load_filter.preferable[index] == expected.preferable
        assert load_filter.extender_score[index] == expected.extender_score
        assert load_filter.score[index] == expected.score
        assert (load_filter.room_cpu[index], load_filter.room_memory[index]) == (
            room_cpu,
            room_memory,
        )

        info = NodeInfo(f"node-{index}", written, None, allocatable=size)
        explained = judge_node(info, pod, {}, pods, POLICY, NOW)
        assert explained.load == expected.load
        assert explained.preferable == expected.preferable
        assert explained.has_room == expected.fits


def test_a_node_over_a_limit_fails_on_it_and_is_never_preferred() -> None:
    hot = {metric: format_usage(0.99, NOW - 10) for metric in POLICY.metrics}
    verdict = node_verdict(measure(hot, POLICY, NOW), None, POLICY)
    assert not verdict.passes
    assert verdict.reason is not None
    assert not verdict.preferable


def test_a_pod_larger_than_the_room_under_the_limits_does_not_fit() -> None:
    cool = {metric: format_usage(0.2, NOW - 10) for metric in POLICY.metrics}
    measurement = measure(cool, POLICY, NOW)
    verdict = node_verdict(measurement, None, POLICY, {CPU: 0.01})
    assert verdict.passes
    assert verdict.preferable
    assert verdict.fits
    room = verdict.room[CPU]
    assert not node_verdict(measurement, None, POLICY, {CPU: room + 0.01}).fits
    # What the samples do not hold yet takes its part of the room.
    assert not node_verdict(measurement, {CPU: room}, POLICY, {CPU: 0.01}).fits



@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(node(), min_size=1, max_size=5),
    requests=resources,
    limits=resources,
)
def test_explain_answers_prioritize_as_the_extenders_index_does(
    nodes: list[tuple[dict[str, str], Resources, list[PlacedPod]]],
    requests: Resources,
    limits: Resources,
) -> None:
    """The whole answer, the preferred node lifted alone to the top: explain's, from
    node_verdict's verdicts and the wire rule, and the extender's index, from its table."""
    pod = pod_info(requests, limits)
    table = extender_entries(nodes)
    infos = {
        f"node-{index}": NodeInfo(f"node-{index}", written, None, allocatable=size)
        for index, (written, size, _) in enumerate(nodes)
    }
    explained = explain_pod(pod, {}, infos, scheduled_pods(nodes), POLICY, NOW)
    asked = sorted(v.node for v in explained.verdicts if v.asked)
    estimate = estimate_scheduled(pod.requests, pod.limits, POLICY.spec.estimation)
    body, _, best = table.index.prioritize(asked, estimate.cpu_cores, estimate.memory_bytes)
    answered = {v.node: v.answered for v in explained.verdicts if v.asked}
    assert {item["Host"]: item["Score"] for item in orjson.loads(body)} == answered
    assert (asked[best] if best >= 0 else None) == explained.preferred

"""Issue 42, point 1, on the soft-taint rule: the next pod of the wave in progress is
estimated at its workload's published usage, so one pod of a tenant's workload whose
usage reads 60 % of a node made the next pod read 60 % on every node: 10 % + 60 % is
over the 65 % limit, and 14 of 20 cool nodes (the 70 % share) took the taint, sending
everyone's pods to the other six. The same bounds as the extender's
(``app.load.estimate``, "Bounds"): a usage measured on fewer than 3 pods raises
nothing, and no more nodes are hot only through a raised next pod than the workload
has raises left (``app.load.bounded_next_pod_heats``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from app.annotator.bindings import BindingObserver, BindingWindows, RecentPods
from app.annotator.softtaints import SoftTaintKeeper
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import NodeInfo
from app.load import START_GRACE_S, SoftTaintSettings, format_usage
from app.objects import PodPlacement, Resources
from app.policy import default_policy
from tests.annotator.helpers import Writer

NOW_S = 1_700_000_000.0
EIGHT_CPUS = Resources(8.0, 32 * 2.0**30)
BURNER = "evil/Deployment/burner"
OBSERVED = Resources(4.8, 2.0**28)  # 60 % of a node's CPU, a pod


def cool_nodes(count: int = 20) -> dict[str, NodeInfo]:
    annotations = {
        metric: format_usage(0.10 if metric.startswith("cpu") else 0.2, NOW_S - 30)
        for metric in default_policy().metrics
    }
    return {
        f"node-{i}": NodeInfo(f"node-{i}", annotations, None, allocatable=EIGHT_CPUS)
        for i in range(count)
    }


def tainted_after_one_idle_pod(measured: int | None) -> list[str]:
    """One idle pod of the burner's workload (1m, no limit, running) bound on node-0 a
    minute ago, the workload published at 60 % of a node measured on ``measured`` pods
    (None: the document says nothing of it); one round of the rule, as the annotator's
    loop runs it."""
    recent = RecentPods(default_policy().spec.estimation)
    clock = [NOW_S - 60]
    observer = BindingObserver(BindingWindows(()), lambda: clock[0], recent=recent)
    idle = Resources(0.001, 0.0)
    pending = PodPlacement("u-idle", None, idle, Resources(), workload=BURNER)
    observer.on_change("evil/idle", pending, PodPlacement(
        "u-idle", "node-0", idle, Resources(), workload=BURNER, running=True
    ))  # fmt: skip
    clock[0] = NOW_S

    def observed(workload: str | None) -> Resources | None:
        return OBSERVED if workload == BURNER else None

    counts = {} if measured is None else {BURNER: measured}
    by_node = recent.by_node(NOW_S, observed, counts)
    left = recent.raises_left(NOW_S, observed, counts)
    writer = Writer()
    keeper = SoftTaintKeeper(
        writer,  # type: ignore[arg-type]
        SoftTaintSettings(),
        telemetry=AnnotatorMetrics(),
        clock=lambda: NOW_S,
    )
    report = asyncio.run(keeper.run_round(cool_nodes(), default_policy(), by_node, left))
    return sorted(report.decided.tainted)


def test_one_burner_and_one_idle_pod_taint_no_cool_node() -> None:
    """The attack as replayed: the burner and the idle pod, two pods measured (or an
    older annotator's document, which does not say how many): nothing is raised."""
    assert tainted_after_one_idle_pod(2) == []
    assert tainted_after_one_idle_pod(None) == []


def test_nodes_hot_only_through_a_raised_next_pod_are_no_more_than_the_raises_left() -> None:
    """Four pods measured (three burners and the idle pod), the idle pod holding one
    raise: three more pods of the workload could come at 60 % of a node, so three cool
    nodes at most take the taint for them, not fourteen."""
    assert len(tainted_after_one_idle_pod(4)) == 3
    assert len(tainted_after_one_idle_pod(3)) == 2


WAVE_BURNER = Resources(7.5, 2.0**28)  # the burner's 7.5 of 8 cores, as published


def never_started_wave(after_s: float, started: int = 0) -> tuple[RecentPods, float]:
    """Point 1's wave as the annotator's binding observer sees it: 9 pods of the burner's
    workload (1m, no limit) seen pending and bound one a node (nodes 0-8) 20 s before
    the readings' round, their containers never started but for the first ``started``,
    which run 5 s after their binding (the kubelet reports them Running). Returns the
    recent pods and the instant ``after_s`` after the bindings."""
    recent = RecentPods(default_policy().spec.estimation)
    bound_at_s = NOW_S - 20
    clock = [bound_at_s]
    observer = BindingObserver(BindingWindows(()), lambda: clock[0], recent=recent)
    tiny = Resources(0.001, 0.0)
    for i in range(9):
        uid, key = f"u-wave-{i}", f"evil/wave-{i}"
        pending = PodPlacement(uid, None, tiny, Resources(), workload=BURNER)
        bound = PodPlacement(uid, f"node-{i}", tiny, Resources(), workload=BURNER)
        observer.on_change(key, None, pending)
        observer.on_change(key, pending, bound)
    clock[0] = bound_at_s + 5
    for i in range(started):
        bound = PodPlacement(f"u-wave-{i}", f"node-{i}", tiny, Resources(), workload=BURNER)
        running = replace(bound, running=True)
        observer.on_change(f"evil/wave-{i}", bound, running)
    return recent, bound_at_s + after_s


def wave_observed(workload: str | None) -> Resources | None:
    return WAVE_BURNER if workload == BURNER else None


def tainted_after_a_never_started_wave(
    measured: int | None, after_s: float, started: int = 0
) -> list[str]:
    """node-9 really hot (80 % CPU), nodes 0-8 at 15 % with the wave on them
    (``never_started_wave``), the workload published at 7.5 cores a pod measured on
    ``measured`` pods: one round of the rule, as the annotator's loop runs it."""
    recent, now_s = never_started_wave(after_s, started)
    counts = {} if measured is None else {BURNER: measured}
    by_node = recent.by_node(now_s, wave_observed, counts)
    left = recent.raises_left(now_s, wave_observed, counts)
    nodes = cool_nodes(10)
    hot = {
        metric: format_usage(0.80 if metric.startswith("cpu") else 0.2, NOW_S - 30)
        for metric in default_policy().metrics
    }
    nodes["node-9"] = NodeInfo("node-9", hot, None, allocatable=EIGHT_CPUS)
    keeper = SoftTaintKeeper(
        Writer(),  # type: ignore[arg-type]
        SoftTaintSettings(),
        telemetry=AnnotatorMetrics(),
        clock=lambda: now_s,
    )
    report = asyncio.run(keeper.run_round(nodes, default_policy(), by_node, left))
    return sorted(report.decided.tainted)


def test_a_never_started_wave_of_one_burners_workload_takes_no_taint_away() -> None:
    """Before: each of the 9 wave pods counted as the burner's 7.5 cores, so every node
    read hot as it stood, no node was left not hot, and the taint went from node-9, the
    one really hot node. Now: the burner's own word (no count, or 1 pod measured) raises
    nothing, and node-9 keeps its taint alone."""
    assert tainted_after_a_never_started_wave(None, 10) == ["node-9"]
    assert tainted_after_a_never_started_wave(1, 10) == ["node-9"]


def test_a_never_started_wave_heats_as_many_nodes_as_were_measured_for_its_grace() -> None:
    """Three pods measured: three wave pods hold a raise (their nodes read hot, as three
    burners' nodes would), the six others are estimated at their 1m; two minutes on, no
    container of the wave has started and only node-9 is hot."""
    tainted = tainted_after_a_never_started_wave(3, 10)
    assert "node-9" in tainted
    assert len(tainted) == 4, tainted
    assert tainted_after_a_never_started_wave(3, START_GRACE_S + 1) == ["node-9"]
    # A wave pod that did start keeps its raise past the grace, as a burner would.
    assert tainted_after_a_never_started_wave(3, START_GRACE_S + 1, started=1) == [
        "node-0",
        "node-9",
    ]


def test_the_largest_raise_is_a_metric_by_namespace_for_the_alert() -> None:
    """What ``LoadawareEstimateNearWholeNode`` watches where only the annotator runs
    (soft taints on a managed cluster): of one wave pod's estimate, the part the
    burner's published usage adds, as a fraction of its 8-CPU node, with the namespace;
    nothing without a count of pods measured, nor once the grace is over."""

    def largest(measured: int | None, after_s: float) -> dict[tuple[str, str], float]:
        recent, now_s = never_started_wave(after_s)
        counts = {} if measured is None else {BURNER: measured}
        return recent.largest_raises(now_s, wave_observed, counts, lambda _: EIGHT_CPUS)

    raised = largest(3, 10)
    assert raised[("cpu", "evil")] == pytest.approx((7.5 - 0.001 * 0.85) / 8)
    assert {namespace for _, namespace in raised} == {"evil"}
    assert largest(None, 10) == largest(1, 10) == largest(3, START_GRACE_S + 1) == {}
    metrics = AnnotatorMetrics()
    metrics.record_raises(raised)
    name = "loadaware_annotator_pod_estimate_raise_max_fraction"
    labels = {"resource": "cpu", "namespace": "evil"}
    assert metrics.registry.get_sample_value(name, labels) == pytest.approx(raised[("cpu", "evil")])
    metrics.record_raises({})
    assert metrics.registry.get_sample_value(name, labels) is None

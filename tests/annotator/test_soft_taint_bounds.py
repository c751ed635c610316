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
from dataclasses import dataclass, field

from app.annotator.bindings import BindingObserver, BindingWindows, RecentPods
from app.annotator.softtaints import SoftTaintKeeper
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import NodeInfo
from app.kube.patching import PatchOutcome
from app.load import SoftTaintSettings, format_usage
from app.objects import PodPlacement, Resources, Taint
from app.policy import default_policy

NOW_S = 1_700_000_000.0
EIGHT_CPUS = Resources(8.0, 32 * 2.0**30)
BURNER = "evil/Deployment/burner"
OBSERVED = Resources(4.8, 2.0**28)  # 60 % of a node's CPU, a pod


@dataclass
class Writer:
    """Records each taint change instead of writing it."""

    changes: dict[str, bool] = field(default_factory=dict)

    async def set_taint(self, node: str, _taint: Taint, present: bool) -> PatchOutcome:
        self.changes[node] = present
        return PatchOutcome.WRITTEN


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
    observer = BindingObserver(
        BindingWindows(()), lambda: clock[0], recent=recent
    )
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

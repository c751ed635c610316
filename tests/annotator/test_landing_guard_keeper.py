"""The annotator's guard ahead of the descheduler's replacements (app/load/landing_guard.py,
through ``DrainedNodes.guard``): a node the largest pod the descheduler moved would take
above the lower line is tainted for the round, on top of the rule's taints, and loses
the taint at the first round it is guarded no more (it is not the rule's memory)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from app.annotator.bindings import BindingObserver, BindingWindows
from app.annotator.drained import DrainedNodes
from app.annotator.softtaints import SOFT_TAINT, SoftTaintKeeper
from app.annotator.telemetry import AnnotatorMetrics
from app.kube import NodeInfo
from app.load import GUARD_WINDOW_S, SoftTaintSettings, format_usage
from app.objects import EvictionRecord, PodPlacement, Resources
from app.policy import default_policy
from tests.annotator.helpers import Writer

NOW_S = 1_700_000_000.0
SIXTEEN_CPUS = Resources(16.0, 64 * 2.0**30)


@dataclass
class Saved:
    evictions: dict[str, EvictionRecord]


@dataclass
class Store:
    """The descheduler's state ConfigMap, as read: one eviction of a 3.2-core pod."""

    where: str = "loadaware/loadaware-descheduler-state"

    async def load(self, now_s: float, since_s: float) -> Saved:
        moved = EvictionRecord(
            "shop/feed-1", "u-feed-1", "b-0", None, Resources(3.2, 2.0**30), NOW_S - 600,
            "shop/Deployment/feed",
        )  # fmt: skip
        return Saved({moved.uid: moved})


def nodes(cpu: dict[str, float], tainted: set[str], now_s: float = NOW_S) -> dict[str, NodeInfo]:
    return {
        name: NodeInfo(
            name,
            {
                metric: format_usage(usage if metric.startswith("cpu") else 0.1, now_s - 30)
                for metric in default_policy().metrics
            },
            None,
            taints=(SOFT_TAINT,) if name in tainted else (),
            allocatable=SIXTEEN_CPUS,
        )
        for name, usage in cpu.items()
    }


def test_a_node_the_moved_pod_would_warm_is_tainted_while_the_guard_lasts() -> None:
    clock = [NOW_S]
    writer = Writer()
    keeper = SoftTaintKeeper(
        writer,  # type: ignore[arg-type]
        SoftTaintSettings(),
        telemetry=AnnotatorMetrics(),
        clock=lambda: clock[0],
        drained=DrainedNodes(Store()),  # type: ignore[arg-type]
    )
    # b-0 hot (the rule's taint); a-2 at 0.38 + 0.20 would read 0.58, above the lower
    # line 0.55; a-11 at 0.33 stays under it with the pod.
    cpu = {"b-0": 0.70, "a-2": 0.38, "a-11": 0.33}
    report = asyncio.run(keeper.run_round(nodes(cpu, set()), default_policy()))
    assert report.decided.tainted == {"b-0"}
    assert writer.changes == {"b-0": True, "a-2": True}
    # The next round, the guard still on: nothing to write.
    writer.changes.clear()
    asyncio.run(keeper.run_round(nodes(cpu, {"b-0", "a-2"}), default_policy()))
    assert writer.changes == {}
    # An hour after the eviction the guard is off: a-2 loses its taint at once, no
    # hold (min_hold_s) as for a node the rule tainted.
    clock[0] = NOW_S - 600 + GUARD_WINDOW_S + 1
    asyncio.run(keeper.run_round(nodes(cpu, {"b-0", "a-2"}, clock[0]), default_policy()))
    assert writer.changes == {"a-2": False}


def keeper_over(
    store: Store, settings: SoftTaintSettings, writer: Writer, drained: DrainedNodes | None = None
) -> SoftTaintKeeper:
    return SoftTaintKeeper(
        writer,  # type: ignore[arg-type]
        settings,
        telemetry=AnnotatorMetrics(),
        clock=lambda: NOW_S,
        drained=drained or DrainedNodes(store),  # type: ignore[arg-type]
    )


def test_the_guard_is_bounded_by_its_own_share_not_the_rules_cap() -> None:
    # The rule's cap (max_share 0.25 of 4 nodes: one) is taken by b-0; the guard still
    # taints a-2, within its own share of the cluster, while a-11 stays cool.
    writer = Writer()
    keeper = keeper_over(Store(), SoftTaintSettings(max_share=0.25), writer)
    cpu = {"b-0": 0.70, "a-2": 0.38, "a-11": 0.33, "a-12": 0.30}
    asyncio.run(keeper.run_round(nodes(cpu, set()), default_policy()))
    assert writer.changes == {"b-0": True, "a-2": True}


def test_a_pod_bound_that_is_no_replacement_stands_the_guard_down() -> None:
    # The pod watch tells the guard of each binding (BindingObserver -> DrainedNodes.bound).
    clock = [NOW_S - 300]
    drained = DrainedNodes(Store())  # type: ignore[arg-type]
    observer = BindingObserver(BindingWindows(()), lambda: clock[0], on_bound=drained.bound)
    writer = Writer()
    keeper = keeper_over(Store(), SoftTaintSettings(), writer, drained)
    cpu = {"b-0": 0.70, "a-2": 0.38, "a-11": 0.33}

    def bind(uid: str, workload: str | None) -> None:
        pending = PodPlacement(uid, None, workload=workload)
        observer.on_change(uid, pending, replace(pending, node_name="a-11"))

    # feed's replacement (feed had a pod evicted 10 minutes ago): the guard goes on.
    bind("u-feed-2", "shop/Deployment/feed")
    asyncio.run(keeper.run_round(nodes(cpu, set()), default_policy()))
    assert writer.changes == {"b-0": True, "a-2": True}
    # A pod of another workload bound 5 minutes ago: the guard stands down, a-2's
    # taint goes at once.
    writer.changes.clear()
    bind("u-web-1", "shop/Deployment/web")
    asyncio.run(keeper.run_round(nodes(cpu, {"b-0", "a-2"}), default_policy()))
    assert writer.changes == {"a-2": False}


def test_a_tenant_cannot_taint_every_node_through_the_guard() -> None:
    # docs/security.md: a tenant's pods, hot, make the descheduler evict a large pod;
    # whatever the readings, the rule and the guard together leave a node untainted
    # and the guard takes at most three quarters of them.
    for spread in range(6):
        cpu = {f"n-{i}": min(0.95, 0.30 + 0.05 * spread + 0.04 * i) for i in range(8)}
        writer = Writer()
        keeper = keeper_over(Store(), SoftTaintSettings(max_share=1.0), writer)
        report = asyncio.run(keeper.run_round(nodes(cpu, set()), default_policy()))
        tainted = {name for name, present in writer.changes.items() if present}
        assert tainted != set(cpu)
        assert len(tainted - report.decided.tainted) <= int(0.75 * len(cpu))

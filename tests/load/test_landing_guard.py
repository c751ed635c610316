"""The guard ahead of the descheduler's replacements (app/load/landing_guard.py): while
it is moving pods, the untainted nodes the largest pod it moved would take above the
taint's lower line are tainted, only while some node stays under it, they are at most
three quarters of the cluster and no pod that is not a replacement was bound in the
last 10 minutes."""

from __future__ import annotations

from app.load import format_usage, measure
from app.load.landing_guard import (
    ARRIVAL_WINDOW_S,
    GUARD_WINDOW_S,
    guard_landings,
    largest_moved,
    other_arrivals,
)
from app.load.model import Measurement
from app.objects import EvictionRecord, Resources
from app.policy import Policy, default_policy

NOW = 1_700_000_000.0
POLICY = default_policy()  # cpu_usage_avg_5m limited at 0.65: the lower line 0.55
MARGIN = 0.1
ALLOCATABLE = Resources(16.0, 64 * 2**30)
GIB = 2**30


def record(
    cores: float,
    at_s: float = NOW - 600,
    memory: float = GIB,
    workload: str | None = "shop/Deployment/feed",
) -> EvictionRecord:
    return EvictionRecord(
        pod_key=f"shop/b-{cores}-{at_s}",
        uid=f"{cores}-{at_s}",
        node="b-0",
        destination=None,
        usage=Resources(cores, memory),
        evicted_at_s=at_s,
        workload=workload,
    )


def guarded(cpu: dict[str, float], moved: Resources | None, nodes: int = 40) -> set[str]:
    measured = {
        name: measure({"cpu_usage_avg_5m": format_usage(usage, NOW - 30)}, POLICY, NOW)
        for name, usage in cpu.items()
    }

    def of(name: str) -> tuple[Measurement, Policy, Resources] | None:
        return (measured[name], POLICY, ALLOCATABLE) if name in measured else None

    return guard_landings(moved, [*cpu, "gone"], of, MARGIN, nodes)


def test_the_largest_pod_moved_within_the_window_is_what_a_node_is_judged_with() -> None:
    records = [
        record(3.0),
        record(1.0, memory=4 * GIB),
        record(8.0, at_s=NOW - GUARD_WINDOW_S - 1),  # too old
        record(9.0, at_s=NOW + 3600),  # dated ahead: not trusted
    ]
    assert largest_moved(records, NOW) == Resources(3.0, 4 * GIB)
    assert largest_moved(records[2:], NOW) is None
    assert largest_moved([], NOW) is None


def test_nodes_the_pod_would_take_above_the_lower_line_are_guarded_while_one_stays_cool() -> None:
    # 3.2 cores of 16 = 0.20: a-2 at 0.38 would read 0.58 > 0.55, a-11 at 0.33 0.53.
    cpu = {"a-2": 0.38, "a-4": 0.41, "a-11": 0.33, "a-12": 0.31}
    assert guarded(cpu, Resources(3.2, GIB)) == {"a-2", "a-4"}
    # No pod moved: nothing guarded.
    assert guarded(cpu, None) == set()
    # Every node would be warm with it: the taints would steer nothing, none guarded.
    assert guarded({"a-2": 0.38, "a-4": 0.41}, Resources(3.2, GIB)) == set()
    # Bounded by its own share, not the rule's cap: at most three quarters of the
    # cluster's nodes; more, none (a part would steer the pods onto the rest).
    assert guarded(cpu, Resources(3.2, GIB), nodes=3) == {"a-2", "a-4"}
    assert guarded(cpu, Resources(3.2, GIB), nodes=2) == set()


def test_a_tenant_cannot_make_the_guard_taint_every_node() -> None:
    # docs/security.md: however large the pod a tenant's load made the descheduler
    # move, the guard leaves a cool node untainted and takes at most three quarters of
    # the nodes.
    cluster = {f"n-{i}": 0.05 * i for i in range(10)}  # 0.00 .. 0.45
    for cores in (0.5, 2.0, 4.0, 8.0, 16.0, 64.0):
        taken = guarded(cluster, Resources(cores, GIB), nodes=len(cluster))
        assert len(taken) <= int(0.75 * len(cluster))
        assert taken != set(cluster)
    # A pod no node stays cool with: none guarded at all.
    assert guarded(cluster, Resources(64.0, GIB), nodes=len(cluster)) == set()


def test_a_pod_bound_lately_that_is_no_replacement_stands_the_guard_down() -> None:
    feed, web = "shop/Deployment/feed", "shop/Deployment/web"
    evicted = [record(3.0, NOW - 900), record(3.0, NOW - 800)]  # two of feed's pods
    # Their two replacements: the guard goes on.
    assert not other_arrivals([(NOW - 890, feed), (NOW - 790, feed)], evicted, NOW)
    # A third pod of feed (a scale-up beside them), a pod of another workload, a bare
    # pod, each bound within the window: it stands down.
    assert other_arrivals([(NOW - 890, feed), (NOW - 790, feed), (NOW - 60, feed)], evicted, NOW)
    assert other_arrivals([(NOW - 890, feed), (NOW - 60, web)], evicted, NOW)
    assert other_arrivals([(NOW - 60, None)], evicted, NOW)
    # Bound before the eviction: not its replacement.
    assert other_arrivals([(NOW - 300, feed)], [record(3.0, NOW - 200)], NOW)
    # Bound longer ago than the window: no longer holds it down.
    assert not other_arrivals([(NOW - ARRIVAL_WINDOW_S - 1, web)], evicted, NOW)
    # An eviction older than the guard's window makes no replacement.
    old = [record(3.0, NOW - GUARD_WINDOW_S - 1)]
    assert other_arrivals([(NOW - 60, feed)], old, NOW)
    # A bare pod evicted makes no replacement either.
    assert other_arrivals([(NOW - 60, None)], [record(3.0, NOW - 90, workload=None)], NOW)
    assert not other_arrivals([], evicted, NOW)

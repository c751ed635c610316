"""The guard ahead of the descheduler's replacements (app/load/landing_guard.py): while
it is moving pods, the untainted nodes the largest pod it moved would take above the
taint's lower line are tainted, only while some node stays under it and the share cap
holds them."""

from __future__ import annotations

from app.load import format_usage, measure
from app.load.landing_guard import GUARD_WINDOW_S, guard_landings, largest_moved
from app.load.model import Measurement
from app.objects import EvictionRecord, Resources
from app.policy import Policy, default_policy

NOW = 1_700_000_000.0
POLICY = default_policy()  # cpu_usage_avg_5m limited at 0.65: the lower line 0.55
MARGIN = 0.1
ALLOCATABLE = Resources(16.0, 64 * 2**30)
GIB = 2**30


def record(cores: float, at_s: float = NOW - 600, memory: float = GIB) -> EvictionRecord:
    return EvictionRecord(
        pod_key=f"shop/b-{cores}-{at_s}",
        uid=f"{cores}-{at_s}",
        node="b-0",
        destination=None,
        usage=Resources(cores, memory),
        evicted_at_s=at_s,
        workload="shop/Deployment/feed",
    )


def guarded(cpu: dict[str, float], moved: Resources | None, room: int = 10) -> set[str]:
    measured = {
        name: measure({"cpu_usage_avg_5m": format_usage(usage, NOW - 30)}, POLICY, NOW)
        for name, usage in cpu.items()
    }

    def of(name: str) -> tuple[Measurement, Policy, Resources] | None:
        return (measured[name], POLICY, ALLOCATABLE) if name in measured else None

    return guard_landings(moved, [*cpu, "gone"], of, MARGIN, room)


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
    # More than the share cap leaves room for: none guarded (a part would steer the
    # pods onto the rest).
    assert guarded(cpu, Resources(3.2, GIB), room=1) == set()
    assert guarded(cpu, Resources(3.2, GIB), room=2) == {"a-2", "a-4"}
    assert guarded(cpu, Resources(3.2, GIB), room=0) == set()

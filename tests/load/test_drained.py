"""Soft taints on drained nodes: a tainted node the descheduler evicted from keeps its
taint while the largest pod that left would take it back over a limit
(app/load/drained.py), and only then."""

from __future__ import annotations

from app.load import format_usage, measure
from app.load.drained import (
    DRAINED_WINDOW_S,
    FUTURE_SLACK_S,
    hold_drained,
    largest_left,
    recent_evictions,
)
from app.load.model import Measurement
from app.load.taints import SoftTaintSettings, decide_soft_taints, judge_measured
from app.objects import EvictionRecord, Resources
from app.policy import Policy, default_policy

NOW = 1_700_000_000.0
POLICY = default_policy()  # cpu_usage_avg_5m limited at 0.65
SETTINGS = SoftTaintSettings(release_margin=0.1, min_hold_s=600, max_share=0.5)
ALLOCATABLE = Resources(16.0, 64 * 2**30)
GIB = 2**30


def record(node: str, cores: float, at_s: float = NOW - 600, uid: str = "") -> EvictionRecord:
    return EvictionRecord(
        pod_key=f"shop/{node}-{cores}-{at_s}",
        uid=uid or f"{node}-{cores}-{at_s}",
        node=node,
        destination="elsewhere",
        usage=Resources(cores, GIB),
        evicted_at_s=at_s,
        workload="shop/Deployment/web",
    )


def nodes_at(cpu: dict[str, float]) -> dict[str, Measurement]:
    return {
        name: measure({"cpu_usage_avg_5m": format_usage(usage, NOW - 30)}, POLICY, NOW)
        for name, usage in cpu.items()
    }


def held(
    warm_at_s: dict[str, float], cpu: dict[str, float], records: list[EvictionRecord]
) -> dict[str, float]:
    measured = nodes_at(cpu)

    def of(name: str) -> tuple[Measurement, Policy, Resources] | None:
        return (measured[name], POLICY, ALLOCATABLE) if name in measured else None

    return hold_drained(warm_at_s, largest_left(records), of, NOW, SETTINGS.release_margin)


def test_a_tainted_node_the_largest_pod_that_left_would_take_over_the_limit_is_held() -> None:
    # 0.47 + 3 cores of 16 (0.19) = 0.66 > 0.65: the pod would take it back over.
    memory = held({"b-0": NOW - 900}, {"b-0": 0.47}, [record("b-0", 1.0), record("b-0", 3.0)])
    assert memory == {"b-0": NOW}
    # Held, the rule keeps the taint although the node has been cool for longer than
    # the hold; without the hold it goes.
    measured = nodes_at({"b-0": 0.47, "a-0": 0.30})
    heats = {name: judge_measured(m, POLICY, 0.1) for name, m in measured.items()}
    assert decide_soft_taints(heats, memory, NOW, SETTINGS).tainted == {"b-0"}
    assert decide_soft_taints(heats, {"b-0": NOW - 900}, NOW, SETTINGS).tainted == frozenset()


def test_a_node_the_pod_would_not_take_over_an_untainted_node_and_others_are_as_they_were() -> (
    None
):
    records = [record("b-0", 1.0), record("b-1", 3.0), record("b-2", 6.0)]
    cpu = {"b-0": 0.47, "b-1": 0.40, "b-2": 0.47, "b-3": 0.47}
    warm = {"b-0": NOW - 900, "b-1": NOW - 900, "b-3": NOW - 900}
    # b-0: 0.47 + 0.06, b-1: 0.40 + 0.19, under the limit; b-2 is not tainted (never
    # tainted by this); b-3 had no eviction.
    assert held(warm, cpu, records) == warm
    # A node gone (not measured) is not held.
    assert held({"gone": NOW - 900}, {}, [record("gone", 8.0)]) == {"gone": NOW - 900}


def test_the_largest_is_per_resource_and_per_node() -> None:
    records = [
        EvictionRecord("a/x", "1", "n", None, Resources(3.0, GIB), NOW, None),
        EvictionRecord("a/y", "2", "n", None, Resources(1.0, 4 * GIB), NOW, None),
        EvictionRecord("a/z", "3", "m", None, Resources(-1.0, 2 * GIB), NOW, None),
    ]
    assert largest_left(records) == {
        "n": Resources(3.0, 4 * GIB),
        "m": Resources(0.0, 2 * GIB),  # a negative usage (an edited record) counts 0
    }


def test_evictions_are_kept_for_the_window_by_uid_and_never_from_the_future() -> None:
    old = record("n", 1.0, NOW - DRAINED_WINDOW_S - 1, uid="old")
    kept_record = record("n", 2.0, NOW - DRAINED_WINDOW_S + 1, uid="kept")
    ahead = record("n", 9.0, NOW + FUTURE_SLACK_S + 1, uid="ahead")
    near = record("n", 3.0, NOW + 1, uid="near")
    kept = recent_evictions({"old": old}, [kept_record, ahead, near], NOW)
    assert kept == {"kept": kept_record, "near": near}
    # Read again (the descheduler's state holds it still): the first record stays.
    again = record("n", 5.0, NOW, uid="kept")
    assert recent_evictions(kept, [again], NOW)["kept"] is kept_record

"""``recheck``: just before each eviction, the destination is checked again against live
caches, so that a change since planning (a scale-up, a node gone hot) stops it."""

from __future__ import annotations

from app.objects.nodes import NodeInfo
from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.rebalance import PlannedEviction, plan, recheck
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod

HOT_PODS = [pod(f"web-{i}", "hot", owner="web") for i in range(10)]
USAGE = {p.key: Resources(0.8, 1 * GI) for p in HOT_PODS}


def planned() -> PlannedEviction:
    result = plan(cluster([node("hot", 0.85), node("cool", 0.2)], HOT_PODS, USAGE), config(),
                  POLICY, NOW, {})
    assert result.evictions, result.notes
    first = result.evictions[0]
    assert first.destination == "cool"
    return first


def check(cool: NodeInfo, *, extra: list[PodInfo] | None = None,
          pods: list[PodInfo] | None = None,
          reserved: dict[str, Resources] | None = None) -> str | None:
    view = cluster([node("hot", 0.85), cool],
                   (HOT_PODS if pods is None else pods) + (extra or []), USAGE)
    return recheck(planned(), view, config(), POLICY, NOW + 5, reserved or {})


def test_an_unchanged_destination_passes() -> None:
    assert check(node("cool", 0.2)) is None


def test_a_destination_whose_requests_were_taken_by_a_scale_up_is_refused() -> None:
    # 10 allocatable cores; new pods since planning request 9.8 of them, the victim 0.5
    scaled_up = [pod(f"new-{i}", "cool", owner="new", cpu=2.45) for i in range(4)]
    why = check(node("cool", 0.2), extra=scaled_up)
    assert why == "destination cool: not enough unrequested cpu"


def test_a_destination_whose_usage_rose_above_thresholds_is_refused() -> None:
    # 35 % now, plus the victim's 0.8 of 10 cores: 43 % > thresholds 40 %
    assert check(node("cool", 0.3)) is None
    why = check(node("cool", 0.35))
    assert why is not None
    assert why.startswith("destination cool: cpu would be at 43% with the pod's real usage, "
                          "above 40%")


def test_a_destination_that_now_fails_the_load_filter_is_refused() -> None:
    # still cool on the 5m average, but over the policy's 1h limit (75 %)
    why = check(node("cool", 0.2, cpu_1h=0.8))
    assert why is not None
    assert "fails the load filter" in why
    assert "cpu_usage_max_avg_1h" in why


def test_a_destination_whose_data_went_stale_is_refused() -> None:
    why = check(node("cool", 0.2, age_s=3600))
    assert why is not None
    assert "no usable data" in why


def test_usage_already_moved_there_by_this_run_counts() -> None:
    # earlier evictions of the run put 1 core there: 20 % + 10 % + 8 % = 38 %; 2 cores: 48 %
    assert check(node("cool", 0.2), reserved={"cool": Resources(1.0, 0.0)}) is None
    why = check(node("cool", 0.2), reserved={"cool": Resources(2.0, 0.0)})
    assert why is not None
    assert "cpu would be at 48%" in why


def test_a_pod_gone_replaced_or_moved_is_not_evicted() -> None:
    victim = planned().pod
    others = [p for p in HOT_PODS if p.key != victim.key]
    assert check(node("cool", 0.2), pods=others) == "the pod is gone"
    replaced = pod(victim.name, "hot", owner="web", uid="a-new-uid")
    assert check(node("cool", 0.2), pods=[*others, replaced]) == "the pod is gone"
    moved = pod(victim.name, "cool", owner="web")
    assert check(node("cool", 0.2), pods=[*others, moved]) == (
        "the pod is no longer running on the source"
    )


def test_a_destination_gone_from_the_cache_is_refused() -> None:
    view = cluster([node("hot", 0.85)], HOT_PODS, USAGE)
    assert recheck(planned(), view, config(), POLICY, NOW, {}) == "destination cool is gone"

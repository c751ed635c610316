"""The burst estimate: what a pod adds, which pods count, and how it reaches the verdict."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.load.estimate import (
    PlacedPod,
    counts,
    estimate_pod_usage,
    freshest_sample_s,
    node_unsampled,
    unsampled_after,
    unsampled_fractions,
    unsampled_share,
)
from app.load.model import Freshness, assess, evaluate_node, headroom, measure
from app.load.samples import format_usage
from app.objects.resources import Resources
from app.policy import DEFAULT_POLICY_YAML, Policy, PolicyError, default_policy, policy_from_yaml
from app.policy_check.main import describe

NOW_S = 1_700_000_000.0
GiB = 2.0**30
POLICY = default_policy()
SETTINGS = POLICY.spec.estimation
EIGHT_CPUS = Resources(8.0, 32 * GiB)


def usage_values(cpu: float, mem: float, at_s: float) -> dict[str, str]:
    return {m: format_usage(cpu if m.startswith("cpu") else mem, at_s) for m in POLICY.metrics}


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        # burstable: the limit is the larger, times 0.85 / 0.70
        (Resources(0.2, GiB), Resources(3.0, 2 * GiB), Resources(2.55, 1.4 * GiB)),
        # guaranteed
        (Resources(1.0, GiB), Resources(1.0, GiB), Resources(0.85, 0.7 * GiB)),
        # a request without a limit
        (Resources(0.5, 0.0), Resources(), Resources(0.425, 200 * 2.0**20)),
        # best effort: the defaults, not scaled
        (Resources(), Resources(), Resources(0.1, 200 * 2.0**20)),
    ],
)
def test_pod_usage_is_the_larger_of_request_and_limit_times_the_factor(
    requests: Resources, limits: Resources, expected: Resources
) -> None:
    usage = estimate_pod_usage(requests, limits, SETTINGS)
    assert usage.cpu_cores == pytest.approx(expected.cpu_cores)
    assert usage.memory_bytes == pytest.approx(expected.memory_bytes)


def test_policy_factors_and_default_change_the_estimate() -> None:
    policy = policy_from_yaml(
        DEFAULT_POLICY_YAML
        + "  estimation:\n    factors: {cpu: 1.0, memory: 0.5}\n"
        + "    defaultPodUsage: {cpu: '1', memory: 1Gi}\n"
    )
    settings = policy.spec.estimation
    assert estimate_pod_usage(Resources(0.2, GiB), Resources(3, 0), settings) == Resources(
        3.0, 0.5 * GiB
    )
    assert estimate_pod_usage(Resources(), Resources(), settings) == Resources(1.0, GiB)


SHORT = policy_from_yaml(
    DEFAULT_POLICY_YAML + "  estimation: {maxAge: 10m, coveredAfter: 2m}\n"
).spec.estimation


@pytest.mark.parametrize(
    ("bound_at_s", "sample_at_s", "counted"),
    [
        (NOW_S - 10, NOW_S - 30, True),  # bound after the sample
        # Equal times: a sample stamped in the binding's second cannot hold the pod.
        (NOW_S - 30, NOW_S - 30, True),
        # A sample taken 30 s after the binding averages in 4.5 minutes without it.
        (NOW_S - 60, NOW_S - 30, True),
        (NOW_S - 299, NOW_S - 1, True),  # 298 s later: still short of coveredAfter (5m)
        (NOW_S - 301, NOW_S - 1, False),  # older than maxAge (5m)
        (NOW_S - 10, None, False),  # no fresh sample: nothing to add to
    ],
)
def test_a_pod_counts_until_a_sample_taken_long_enough_after_its_binding_covers_it(
    bound_at_s: float, sample_at_s: float | None, counted: bool
) -> None:
    assert counts(bound_at_s, sample_at_s, NOW_S, SETTINGS) is counted


@pytest.mark.parametrize(
    ("bound_at_s", "sample_at_s", "counted"),
    [
        (NOW_S - 300, NOW_S - 181, True),  # the sample 119 s after: not yet
        (NOW_S - 300, NOW_S - 180, False),  # 120 s after: covered
        (NOW_S - 100, NOW_S - 100, True),  # equal times always count
        (NOW_S - 599, NOW_S - 599, True),
        (NOW_S - 600, NOW_S - 600, False),  # maxAge (10m) has passed
    ],
)
def test_covered_after_and_max_age_are_the_policys(
    bound_at_s: float, sample_at_s: float | None, counted: bool
) -> None:
    assert counts(bound_at_s, sample_at_s, NOW_S, SHORT) is counted


def test_covered_after_below_a_second_is_refused() -> None:
    with pytest.raises(PolicyError, match="coveredAfter"):
        policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {coveredAfter: 500ms}\n")


def test_fractions_are_of_allocatable_and_skip_an_unknown_allocatable() -> None:
    usage = Resources(2.55, GiB)
    assert unsampled_fractions([usage, usage], EIGHT_CPUS) == pytest.approx(
        {"cpu": 0.6375, "memory": 2 / 32}
    )
    assert unsampled_fractions([usage], Resources(8.0, 0.0)) == pytest.approx({"cpu": 0.31875})
    assert unsampled_fractions([], EIGHT_CPUS) == {}


def test_freshest_sample_ignores_stale_and_unreadable_values() -> None:
    values = usage_values(0.2, 0.3, NOW_S - 30)
    values["cpu_usage_max_avg_1d"] = format_usage(0.2, NOW_S - 10 * 3600)  # stale
    values["mem_usage_avg_5m"] = "garbage"
    assert freshest_sample_s(values, POLICY, NOW_S) == NOW_S - 30
    assert freshest_sample_s({}, POLICY, NOW_S) is None


def burst_pod(bound_at_s: float) -> PlacedPod:
    return PlacedPod(Resources(0.2, 0.0), Resources(3.0, 0.0), bound_at_s)


def test_effective_usage_rises_after_a_binding_and_drops_once_a_sample_covers_it() -> None:
    before = usage_values(0.15, 0.3, NOW_S - 30)
    pods = [burst_pod(NOW_S - 5)]
    unsampled = node_unsampled(pods, before, EIGHT_CPUS, POLICY, NOW_S)
    load = evaluate_node(before, POLICY, NOW_S, unsampled)
    cpu = next(r for r in load.readings if r.metric == "cpu_usage_avg_5m")
    assert cpu.measured_fraction == pytest.approx(0.15)
    assert cpu.usage_fraction == pytest.approx(0.15 + 3 * 0.85 / 8)
    assert not load.overloaded
    # The second burst pod pushes the node over crane's 0.65 limit.
    two = node_unsampled([*pods, burst_pod(NOW_S - 1)], before, EIGHT_CPUS, POLICY, NOW_S)
    assert evaluate_node(before, POLICY, NOW_S, two).reason == (
        "Load[cpu_usage_avg_5m] is too high (> 0.65)"
    )
    # A sample taken just after the binding does not cover the pod: it is an average
    # over 5 minutes that the pod was mostly not part of.
    soon_after = usage_values(0.2, 0.3, NOW_S)
    assert node_unsampled(pods, soon_after, EIGHT_CPUS, POLICY, NOW_S + 1) != {}
    # Once maxAge has passed the estimate ends; by then every sample holds the pod.
    later = usage_values(0.45, 0.3, NOW_S + 295)
    assert node_unsampled(pods, later, EIGHT_CPUS, POLICY, NOW_S + 296) == {}


@pytest.mark.parametrize(
    ("bound_at_s", "sample_at_s", "share"),
    [
        (NOW_S - 60, NOW_S - 90, 1.0),  # sampled before the binding: none of it shown
        (NOW_S - 60, NOW_S - 60, 1.0),  # in the binding's second: none either
        (NOW_S - 60, NOW_S - 60 + 30, 0.9),  # 30 s of a 5-minute average
        (NOW_S - 240, NOW_S - 240 + 150, 0.5),  # half the window
        (NOW_S - 300, NOW_S, 0.0),  # a whole window: covered (and no longer counted)
        (NOW_S - 300, None, 1.0),  # no fresh sample (and nothing counted: counts)
    ],
)
def test_a_sample_shows_the_part_of_a_pod_its_average_ran_with(
    bound_at_s: float, sample_at_s: float | None, share: float
) -> None:
    assert unsampled_share(bound_at_s, sample_at_s, SETTINGS) == pytest.approx(share)


def test_partly_sampled_counts_only_what_the_sample_does_not_show_for_the_taint_rule() -> None:
    """Two pods of 2.55 CPU on 8: one bound 2 minutes before the freshest sample (a
    5-minute average), which shows 2/5 of it; one bound after it, which it shows none
    of. The extender counts both whole; the soft-taint rule the rest only."""
    values = usage_values(0.5, 0.3, NOW_S - 30)
    pods = [burst_pod(NOW_S - 150), burst_pod(NOW_S - 10)]
    whole = node_unsampled(pods, values, EIGHT_CPUS, POLICY, NOW_S)
    rest = node_unsampled(pods, values, EIGHT_CPUS, POLICY, NOW_S, partly_sampled=True)
    pod = 3 * 0.85 / 8
    assert whole["cpu"] == pytest.approx(2 * pod)
    assert rest["cpu"] == pytest.approx(pod * (1 - 120 / 300) + pod)
    assert rest["memory"] < whole["memory"]
    assert node_unsampled(pods, {}, EIGHT_CPUS, POLICY, NOW_S, partly_sampled=True) == {}


@pytest.mark.parametrize("sample_age_s", [30.0, 0.0, -1.0, 300_000.0])
def test_a_node_measured_already_gets_the_same_unsampled_usage(sample_age_s: float) -> None:
    """``unsampled_after`` (for a caller that keeps the node's Measurement) is
    ``node_unsampled`` given the Measurement's freshest sample: fresh, just taken,
    a second ahead, and days old (no fresh sample: nothing counts)."""
    values = usage_values(0.15, 0.3, NOW_S - sample_age_s)
    pods = [burst_pod(NOW_S - 5), burst_pod(NOW_S - 40)]
    sample_at_s = measure(values, POLICY, NOW_S).freshest_sample_s()
    expected = node_unsampled(pods, values, EIGHT_CPUS, POLICY, NOW_S)
    assert unsampled_after(pods, sample_at_s, EIGHT_CPUS, POLICY, NOW_S) == expected
    assert (expected != {}) is (sample_age_s < 86_400)


def test_estimation_off_in_the_policy_adds_nothing() -> None:
    policy: Policy = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {enabled: false}\n")
    values = usage_values(0.15, 0.3, NOW_S - 30)
    assert node_unsampled([burst_pod(NOW_S - 5)], values, EIGHT_CPUS, policy, NOW_S) == {}
    assert unsampled_after([burst_pod(NOW_S - 5)], NOW_S - 30, EIGHT_CPUS, policy, NOW_S) == {}


@pytest.mark.parametrize("state", ["stale", "missing", "unreadable"])
def test_fail_open_holds_with_pods_estimated_on_a_node_without_fresh_data(state: str) -> None:
    values = usage_values(0.9, 0.9, NOW_S - 30)
    if state == "stale":
        values = usage_values(0.9, 0.9, NOW_S - 10 * 3600)
    elif state == "missing":
        values = {}
    else:
        values = {m: "0.9,yesterday" for m in values}
    heavy = {"cpu": 5.0, "memory": 5.0}  # far more than any node could take
    load = evaluate_node(values, POLICY, NOW_S, heavy)
    assert not load.overloaded
    assert all(r.freshness is not Freshness.FRESH for r in load.readings)
    assert all(r.unsampled_fraction == 0 for r in load.readings)
    assert not math.isnan(load.score)


def test_a_crane_file_without_the_section_estimates_by_default() -> None:
    settings = policy_from_yaml(DEFAULT_POLICY_YAML).spec.estimation
    assert settings.enabled
    assert (settings.factors.cpu, settings.factors.memory) == (0.85, 0.70)
    assert settings.max_age_s == 300


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("factors: {cpu: -1}", "spec.estimation.factors.cpu"),
        ("defaultPodUsage: {memory: lots}", "spec.estimation.defaultPodUsage.memory"),
        ("maxAge: 300", "spec.estimation.maxAge"),
        ("enable: true", "spec.estimation.enable"),
    ],
)
def test_a_bad_estimation_section_names_the_field(section: str, field: str) -> None:
    with pytest.raises(PolicyError, match=field.replace(".", r"\.")):
        policy_from_yaml(DEFAULT_POLICY_YAML + f"  estimation: {{{section}}}\n")


def test_policy_check_shows_the_estimation_settings() -> None:
    on = describe(default_policy())
    assert "estimation: on; pods a node's samples do not cover add max(request, limit) x 0.85" in on
    assert "until a sample taken 5m after its binding, or for at most 5m" in on
    off = describe(policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {enabled: false}\n"))
    assert "estimation: off" in off


@settings(max_examples=300, deadline=None)
@given(
    cpu=st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3),
    mem=st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3),
    hot=st.integers(0, 4),
    share=st.floats(0.0, 1.0),
)
def test_usage_within_the_headroom_changes_no_answer(
    cpu: list[float], mem: list[float], hot: int, share: float
) -> None:
    values = {
        f"{resource}_{window}": format_usage(value, NOW_S - 30)
        for resource, series in (("cpu", cpu), ("mem", mem))
        for window, value in zip(
            ("usage_avg_5m", "usage_max_avg_1h", "usage_max_avg_1d"), series, strict=True
        )
    }
    values["node_hot_value"] = f"{hot},2023-11-14T22:13:10Z"
    measured = measure(values, POLICY, NOW_S)
    load = assess(measured, POLICY)
    rooms = headroom(load, measured, POLICY)
    for resource in ("cpu", "memory"):
        room = rooms[resource]
        if math.isinf(room):
            continue
        within = assess(measured, POLICY, {resource: room * share})
        assert (within.extender_score, within.reason) == (load.extender_score, load.reason)
        if load.reason is None:  # then the headroom is tight, not just safe
            beyond = assess(measured, POLICY, {resource: room + 1e-6})
            assert (beyond.extender_score, beyond.reason) != (load.extender_score, load.reason)


def test_a_class_s_pods_placed_since_the_sample_count_in_its_usage_too() -> None:
    """A pod of a class bound since the node's sample adds its estimate to the node's
    usage and to its class's (``production:cpu``), as koordinator adds production pods
    not yet reported to production's usage; a pod in no class to the node's alone. A
    class's policy reads it under its class usage metric (``production:cpu_usage``)."""
    from app.load import class_annotations, node_verdict
    from app.policy import class_usage_key, pod_classes
    from tests.test_policy_classes import classed

    now_s = 1_000_000.0
    allocatable = Resources(8.0, 32 * 2**30)
    placed = [
        PlacedPod(Resources(1.0, 2**30), Resources(), now_s - 30, pod_class="production"),
        PlacedPod(Resources(1.0, 2**30), Resources(), now_s - 30),  # in no class
    ]
    policy = policy_from_yaml(classed())
    added = unsampled_after(placed, now_s - 10, allocatable, policy, now_s)
    each = estimate_pod_usage(Resources(1.0, 2**30), Resources(), SETTINGS).cpu_cores / 8.0
    assert added["cpu"] == pytest.approx(2 * each)
    assert added["production:cpu"] == pytest.approx(each)
    assert "batch:cpu" not in added
    # Production at 40 % of its 45 % limit: with one such pod placed since, over it.
    classes = pod_classes(policy)
    annotations = {
        **usage_values(0.3, 0.3, now_s - 10),
        class_usage_key("production", "cpu"): format_usage(0.4, now_s - 10),
        class_usage_key("production", "memory"): format_usage(0.1, now_s - 10),
    }
    production = classes.policies["production"]
    measurement = measure(class_annotations(annotations, classes), production, now_s)
    assert node_verdict(measurement, None, production).passes
    verdict = node_verdict(measurement, added, production)
    assert verdict.reason == "Load[production:cpu_usage] is too high (> 0.45)"
    # A pod of no class alone leaves production's usage as measured.
    alone = unsampled_after(placed[1:], now_s - 10, allocatable, policy, now_s)
    assert node_verdict(measurement, alone, production).passes

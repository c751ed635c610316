"""The soft-taint rule: hot nodes tainted, hysteresis, fail open, bounded share."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.load import evaluate_node, format_usage, measure
from app.load.estimate import Evidence, PlacedPod
from app.load.taints import (
    Heat,
    NodeHeat,
    SoftTaints,
    SoftTaintSettings,
    decide_soft_taints,
    judge_measured,
    judge_node,
    next_pod,
    node_heat,
    wave_of,
)
from app.objects import Resources
from app.policy import DEFAULT_POLICY_YAML, default_policy, policy_from_yaml

NOW = 1_700_000_000.0
POLICY = default_policy()  # cpu_usage_avg_5m and mem_usage_avg_5m limited at 0.65, 1h at 0.75
SETTINGS = SoftTaintSettings(release_margin=0.1, min_hold_s=600, max_share=0.5)


def heat_of(cpu_5m: float | None, *, age_s: float = 30.0) -> NodeHeat:
    annotations = {} if cpu_5m is None else {"cpu_usage_avg_5m": format_usage(cpu_5m, NOW - age_s)}
    return node_heat(evaluate_node(annotations, POLICY, NOW), POLICY, SETTINGS.release_margin)


def decide(
    heats: dict[str, NodeHeat], memory: dict[str, float] | None = None, now_s: float = NOW
) -> SoftTaints:
    return decide_soft_taints(heats, memory or {}, now_s, SETTINGS)


def test_heat_follows_the_fresh_reading_against_the_limit_and_the_lower_line() -> None:
    assert heat_of(0.80).heat is Heat.HOT
    assert heat_of(0.60).heat is Heat.WARM  # below 0.65, above 0.55
    assert heat_of(0.40).heat is Heat.COOL
    assert heat_of(None).heat is Heat.UNKNOWN
    assert heat_of(0.95, age_s=3600).heat is Heat.UNKNOWN  # stale: fail open
    assert "cpu_usage_avg_5m 0.80 > 0.65" in heat_of(0.80).describe()


def test_the_estimate_of_pods_not_yet_sampled_counts_as_the_extender_counts_it() -> None:
    """A node its readings show at 0.50 with 0.20 of CPU bound since is hot: the
    extender's filter rejects it too. Stale data stays unknown whatever is estimated."""
    annotations = {"cpu_usage_avg_5m": format_usage(0.50, NOW - 30)}
    margin = SETTINGS.release_margin
    unsampled = {"cpu": 0.20}
    hot = judge_node(annotations, POLICY, NOW, margin, unsampled)
    assert hot.heat is Heat.HOT
    assert evaluate_node(annotations, POLICY, NOW, unsampled).overloaded
    assert "0.70 (+0.20 estimated) > 0.65" in hot.describe()
    assert judge_node(annotations, POLICY, NOW, margin).heat is Heat.COOL
    assert judge_node(annotations, POLICY, NOW, margin, {"memory": 0.20}).heat is Heat.COOL
    assert judge_node(annotations, POLICY, NOW, margin, {"cpu": 0.10}).heat is Heat.WARM
    stale = {"cpu_usage_avg_5m": format_usage(0.55, NOW - 3600)}
    assert judge_node(stale, POLICY, NOW, margin, {"cpu": 0.5}).heat is Heat.UNKNOWN


def test_a_node_the_next_pod_of_the_wave_would_take_over_its_limit_is_hot() -> None:
    """cpu-heavy's last wave: pods of 1.5 CPU (limit 2, estimated 1.7 cores) on a node of
    16 CPUs with 6 of them (0.56). The next like them (0.106) takes it over 0.65: hot
    before that pod lands, so the taint steers it elsewhere. A node of 5 (0.47) is not.
    The next pod is the wave's largest on this node; pods bound longer than maxAge ago
    (5 minutes) are no wave; one placed around the scheduler is read from its requests;
    stale data stays unknown; a kind over the limit alone is no next pod."""
    node = Resources(16.0, 64 * 2.0**30)
    service = PlacedPod(Resources(0.1, 2.0**28), Resources(2.0, 0.0), NOW - 60)
    small = PlacedPod(Resources(0.1, 2.0**28), Resources(0.5, 0.0), NOW - 30)
    old = PlacedPod(Resources(0.1, 2.0**28), Resources(8.0, 0.0), NOW - 301)
    wave = wave_of([service, small, old, service], POLICY, NOW)
    assert sorted(pod.limits.cpu_cores for pod in wave) == [0.5, 2.0]  # one of each kind
    ahead = next_pod(wave, node, POLICY)
    assert ahead["cpu"] == pytest.approx(1.7 / 16)
    margin = SETTINGS.release_margin
    six = {"cpu_usage_avg_5m": format_usage(6 * 1.5 / 16, NOW - 30)}
    five = {"cpu_usage_avg_5m": format_usage(5 * 1.5 / 16, NOW - 30)}
    hot = judge_node(six, POLICY, NOW, margin, None, ahead)
    assert hot.heat is Heat.HOT
    assert "cpu_usage_avg_5m 0.67 (+0.11 next pod) > 0.65" in hot.describe()
    assert judge_node(six, POLICY, NOW, margin).heat is Heat.WARM  # as it stands
    assert judge_node(five, POLICY, NOW, margin, None, ahead).heat is Heat.WARM
    assert next_pod(wave_of([old], POLICY, NOW), node, POLICY) == {}
    # A kind over the limit alone (a 100,000-CPU limit: the whole node) has room on no
    # node, so it is no next pod: with it every node would be hot.
    huge = PlacedPod(Resources(0.1, 2.0**28), Resources(100_000.0, 0.0), NOW - 10)
    assert next_pod(wave_of([huge, service], POLICY, NOW), node, POLICY) == ahead
    assert next_pod(wave_of([huge], POLICY, NOW), node, POLICY) == {}
    around = PlacedPod(service.requests, service.limits, NOW - 60, Evidence.PLACED)
    assert next_pod(wave_of([around], POLICY, NOW), node, POLICY)["cpu"] == pytest.approx(
        0.085 / 16)
    stale = {"cpu_usage_avg_5m": format_usage(0.60, NOW - 3600)}
    assert judge_node(stale, POLICY, NOW, margin, None, ahead).heat is Heat.UNKNOWN


def test_the_next_pod_is_its_workloads_observed_usage_as_the_extender_estimates_it() -> None:
    """crane-style-waves' CPU service: requests 100m, no CPU limit, uses about 0.7 core.
    Estimated from requests (85m) the next pod is nothing to a node of 8 CPUs; with its
    workload's published usage (issue 27: at least 3 times the guess, so raised) it is
    0.7 of a core, as the extender's estimate takes it, and a node at 0.58 is hot before
    it lands. Two workloads that declare the same but use different amounts are two
    kinds. Placed around the scheduler, a pod keeps its requests-only estimate."""
    node = Resources(8.0, 32 * 2.0**30)
    requests = Resources(0.1, 2.0**28)
    used = Resources(0.7, 2.0**29)
    guessed = PlacedPod(requests, Resources(), NOW - 30)
    observed = PlacedPod(requests, Resources(), NOW - 30, observed=used)
    assert next_pod(wave_of([guessed], POLICY, NOW), node, POLICY)["cpu"] == pytest.approx(
        0.085 / 8)
    ahead = next_pod(wave_of([guessed, observed], POLICY, NOW), node, POLICY)
    assert len(wave_of([guessed, observed], POLICY, NOW)) == 2
    assert ahead["cpu"] == pytest.approx(0.7 / 8)
    reading = {"cpu_usage_avg_5m": format_usage(0.58, NOW - 30)}
    margin = SETTINGS.release_margin
    assert judge_node(reading, POLICY, NOW, margin, None, ahead).heat is Heat.HOT
    around = PlacedPod(requests, Resources(), NOW - 30, Evidence.PLACED, observed=used)
    assert next_pod(wave_of([around], POLICY, NOW), node, POLICY)["cpu"] == pytest.approx(
        0.085 / 8)
    off = policy_from_yaml(DEFAULT_POLICY_YAML + "  estimation: {workloadUsage: false}\n")
    assert next_pod(wave_of([observed], off, NOW), node, off)["cpu"] == pytest.approx(0.085 / 8)


def test_the_bound_counts_the_nodes_hot_as_they_stand_not_with_the_next_pod() -> None:
    """Six nodes: two busy from the start (0.75), three a wave has filled to one pod
    short of the limit (0.56, hot with the next pod), one cool. The share allows 3; the
    nodes not hot as they stand are 4, so 3 are tainted: both busy nodes and one of the
    three. Had the bound counted the next pod (5 hot, 1 not), one taint would be left
    and a busy node would take the wave's pods (memory-heavy: 0.94 of a node's memory)."""
    margin = SETTINGS.release_margin
    ahead = {"cpu": 1.7 / 16}

    def node(usage: float) -> NodeHeat:
        annotations = {"cpu_usage_avg_5m": format_usage(usage, NOW - 30)}
        return judge_node(annotations, POLICY, NOW, margin, None, ahead)

    heats = {"busy-1": node(0.75), "busy-2": node(0.74), "cool": node(0.30)}
    heats |= {f"filled-{i}": node(0.56 + i / 100) for i in range(3)}
    assert [heats[n].hot_now for n in ("busy-1", "filled-0", "cool")] == [True, False, False]
    assert all(heats[n].heat is Heat.HOT for n in heats if n != "cool")
    assert decide(heats).tainted == {"busy-1", "busy-2", "filled-2"}


def test_a_hot_node_is_tainted_and_a_warm_one_is_not_until_it_was_hot() -> None:
    heats = {"a": heat_of(0.80), "b": heat_of(0.60), "c": heat_of(0.30), "d": heat_of(0.20)}
    first = decide(heats)
    assert first.tainted == {"a"}
    assert first.decisions["a"].reason.startswith("hot:")
    # a drops to warm: kept, because it is above the lower line
    second = decide({**heats, "a": heat_of(0.60)}, dict(first.warm_at_s), NOW + 60)
    assert second.tainted == {"a"}
    assert "lower line" in second.decisions["a"].reason


def test_a_short_dip_keeps_the_taint_and_a_long_cool_spell_removes_it() -> None:
    others = {"b": heat_of(0.3), "c": heat_of(0.3), "d": heat_of(0.3)}
    memory = dict(decide({"a": heat_of(0.8), **others}).warm_at_s)
    dip = decide({"a": heat_of(0.3), **others}, memory, NOW + 300)
    assert dip.tainted == {"a"}
    assert dip.warm_at_s["a"] == NOW  # the hold counts from the last warm instant
    gone = decide({"a": heat_of(0.3), **others}, dict(dip.warm_at_s), NOW + 600)
    assert gone.tainted == set()
    assert gone.warm_at_s == {}
    assert gone.decisions["a"].reason.startswith("cool for 600s")


def test_stale_or_missing_data_removes_a_taint_at_once() -> None:
    others = {"b": heat_of(0.3), "c": heat_of(0.3), "d": heat_of(0.3)}
    memory = dict(decide({"a": heat_of(0.8), **others}).warm_at_s)
    for unknown in (heat_of(None), heat_of(0.9, age_s=3600)):
        result = decide({"a": unknown, **others}, memory, NOW + 10)
        assert result.tainted == set()
        assert result.decisions["a"].reason == "no fresh data: fail open"


@pytest.mark.parametrize("nodes", [2, 3, 5, 10, 41])
def test_a_cluster_hot_everywhere_is_never_tainted_beyond_the_share(nodes: int) -> None:
    cool = nodes - nodes // 2  # enough not hot that only the share bounds the taints
    heats = {f"n{i}": heat_of(0.70 + i * 0.005) for i in range(nodes // 2)} | {
        f"c{i}": heat_of(0.2) for i in range(cool)
    }
    result = decide(heats)
    assert len(result.tainted) == SETTINGS.cap(nodes) <= max(1, nodes // 2)
    hottest = sorted(heats, key=lambda n: -heats[n].excess)[: SETTINGS.cap(nodes)]
    assert result.tainted == set(hottest)
    assert all(
        "over the share" in d.reason for n, d in result.decisions.items() if n.startswith("n")
        and not d.tainted
    )


@pytest.mark.parametrize("hot", [5, 6, 8, 10])
def test_no_more_nodes_are_tainted_than_are_not_hot(hot: int) -> None:
    """A taint sends a hot node's pods to the others: where they are hot too, tainting
    more would pile the pods onto the least hot of the hot nodes."""
    heats = {f"n{i}": heat_of(0.70 + i * 0.005) for i in range(hot)} | {
        f"c{i}": heat_of(0.2) for i in range(10 - hot)
    }
    result = decide(heats)
    assert len(result.tainted) == min(SETTINGS.cap(10), 10 - hot)
    assert result.tainted == {f"n{i}" for i in range(hot - len(result.tainted), hot)}
    assert all(f"{hot} hot" in d.reason for d in result.decisions.values()
               if d.node.startswith("n") and not d.tainted)  # fmt: skip


def test_a_tainted_node_is_not_displaced_by_one_barely_hotter() -> None:
    heats = {"a": heat_of(0.70), "b": heat_of(0.71), "c": heat_of(0.1), "d": heat_of(0.1)}
    settings = SoftTaintSettings(release_margin=0.1, min_hold_s=600, max_share=0.25)
    first = decide_soft_taints(heats, {}, NOW, settings)
    assert first.tainted == {"b"}
    swapped = {**heats, "a": heat_of(0.72)}
    assert decide_soft_taints(swapped, dict(first.warm_at_s), NOW + 60, settings).tainted == {"b"}


def test_a_single_node_is_never_tainted() -> None:
    assert decide({"only": heat_of(0.99)}).tainted == set()


@pytest.mark.parametrize(
    "kwargs", [{"release_margin": -0.1}, {"min_hold_s": float("inf")}, {"max_share": 1.5},
               {"release_margin": float("nan")}, {"min_hold_s": float("nan")}]
)
def test_settings_refuse_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        SoftTaintSettings(**kwargs)


def test_leaving_out_cool_untainted_nodes_changes_nothing_but_the_work() -> None:
    """A large cluster is judged without its cool nodes: ``nodes`` keeps the share."""
    heats = {f"n{i}": heat_of(0.1 + 0.08 * i) for i in range(10)}  # n7-n9 above 0.65
    memory = {"n5": NOW - 120}  # tainted before, now cool and held
    whole = decide_soft_taints(heats, memory, NOW, SETTINGS)
    judged = {n: h for n, h in heats.items() if h.heat is Heat.HOT or n in memory}
    part = decide_soft_taints(judged, memory, NOW, SETTINGS, nodes=len(heats))
    assert part.tainted == whole.tainted == {"n5", "n7", "n8", "n9"}
    assert part.warm_at_s == whole.warm_at_s
    assert {n: part.decisions[n] for n in judged} == {n: whole.decisions[n] for n in judged}
    # Without ``nodes`` the share would be of the 4 judged, 3 of them hot: 1 at most.
    assert len(decide_soft_taints(judged, memory, NOW, SETTINGS).tainted) == 1
    with pytest.raises(ValueError, match="more than the 3"):
        decide_soft_taints(judged, memory, NOW, SETTINGS, nodes=3)


@pytest.mark.parametrize("cpu_5m", [0.30, 0.58, 0.62, 0.70])
@pytest.mark.parametrize("later_s", [0.0, 60.0, 269.0])
def test_a_measurement_kept_until_it_changes_judges_as_the_annotations_read_now(
    cpu_5m: float, later_s: float
) -> None:
    """judge_measured of a node's Measurement, taken when the annotations were read and
    judged up to its changes_at_s (as the simulated annotator keeps it), is judge_node
    of the annotations at that instant: with and without an estimate and a next pod,
    and past changes_at_s (the reading gone stale) no longer."""
    margin = SETTINGS.release_margin
    annotations = {
        "cpu_usage_avg_5m": format_usage(cpu_5m, NOW - 30),
        "mem_usage_avg_5m": format_usage(0.40, NOW - 30),
        "node_hot_value": "2," + format_usage(0.0, NOW - 30).split(",")[1],
    }
    measurement = measure(annotations, POLICY, NOW)
    at_s = NOW + later_s
    assert at_s < measurement.changes_at_s
    for unsampled, ahead in [(None, None), ({"cpu": 0.04}, None), (None, {"cpu": 0.05})]:
        kept = judge_measured(measurement, POLICY, margin, unsampled, ahead)
        assert kept == judge_node(annotations, POLICY, at_s, margin, unsampled, ahead)
    expired = NOW + 500.0  # both readings stale by then (480 s windows): unknown
    assert expired >= measurement.changes_at_s
    assert judge_node(annotations, POLICY, expired, margin).heat is Heat.UNKNOWN
    assert judge_measured(measurement, POLICY, margin).heat is not Heat.UNKNOWN


_FRACTIONS = st.one_of(st.none(), st.floats(0.0, 1.2, allow_nan=False))
_ADDED = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "gpu"]), st.floats(-0.5, 0.5, allow_nan=False),
        max_size=3,
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    readings=st.fixed_dictionaries(
        {
            metric: st.tuples(_FRACTIONS, st.sampled_from([30.0, 400.0, 5000.0]))
            for metric in ("cpu_usage_avg_5m", "mem_usage_avg_5m", "cpu_usage_max_avg_1h")
        }
    ),
    unsampled=_ADDED,
    ahead=_ADDED,
    crane=st.booleans(),
)
def test_a_heat_is_the_heat_of_the_node_load_the_extender_evaluates(
    readings: dict[str, tuple[float | None, float]],
    unsampled: dict[str, float] | None,
    ahead: dict[str, float] | None,
    crane: bool,
) -> None:
    """judge_measured reads the limited metrics' readings with the estimate and the
    next pod added, without making the rest of the NodeLoad: its heat is node_heat of
    the node as ``evaluate_node`` evaluates it (fresh, stale or missing readings, an
    estimate that adds or takes away, resources the policy does not measure), and hot
    as it stands is that heat without the next pod."""
    policy = POLICY.as_crane_scores() if crane else POLICY
    annotations = {
        metric: format_usage(value, NOW - age_s)
        for metric, (value, age_s) in readings.items()
        if value is not None
    }
    margin = SETTINGS.release_margin
    added = dict(unsampled or {})
    for resource, fraction in (ahead or {}).items():
        added[resource] = added.get(resource, 0.0) + fraction
    expected = node_heat(evaluate_node(annotations, policy, NOW, added), policy, margin)
    heat = judge_measured(measure(annotations, policy, NOW), policy, margin, unsampled, ahead)
    assert (heat.heat, heat.excess, heat.metric) == (
        expected.heat, expected.excess, expected.metric)
    assert (heat.usage_fraction, heat.limit_fraction, heat.estimated_fraction) == (
        expected.usage_fraction, expected.limit_fraction, expected.estimated_fraction)
    if ahead and expected.metric is not None:
        standing = node_heat(evaluate_node(annotations, policy, NOW, unsampled), policy, margin)
        assert heat.hot_as_it_stands == (expected.heat is Heat.HOT and standing.heat is Heat.HOT)
    else:
        assert heat == expected

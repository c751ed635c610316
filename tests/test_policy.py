from pathlib import Path

import pytest

from app.objects.durations import format_duration, parse_duration_s
from app.policy import (
    DEFAULT_POLICY_YAML,
    PolicyError,
    default_policy,
    load_policy,
    policy_from_yaml,
)

# A policy file as crane ships it, misspelling included.
CRANE_POLICY = DEFAULT_POLICY_YAML


def test_crane_policy_file_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(CRANE_POLICY)
    policy = load_policy(path)
    assert [p.max_limit_fraction for p in policy.spec.predicate] == [0.65, 0.75, 0.65, 0.75]
    assert policy.freshness_window_s("cpu_usage_avg_5m") == 8 * 60
    assert policy.freshness_window_s("cpu_usage_max_avg_1d") == 3 * 3600 + 5 * 60
    assert [(h.time_range_s, h.count) for h in policy.spec.hot_value] == [(300, 5), (60, 2)]
    assert policy.warnings == ()


def test_correct_spelling_of_max_limit_percent_is_accepted() -> None:
    policy = policy_from_yaml(CRANE_POLICY.replace("maxLimitPecent", "maxLimitPercent"))
    assert policy.spec.predicate[0].max_limit_fraction == 0.65


def test_unknown_metric_names_are_allowed() -> None:
    policy = policy_from_yaml(
        """
spec:
  syncPolicy: [{name: gpu_usage_avg_5m, period: 1m}]
  predicate: [{name: gpu_usage_avg_5m, maxLimitPecent: 0.9}]
  priority: [{name: gpu_usage_avg_5m, weight: 1}]
"""
    )
    assert policy.metrics == ("gpu_usage_avg_5m",)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("3m", 180),
        ("1h", 3600),
        ("3h", 10800),
        ("90s", 90),
        ("1h30m", 5400),
        ("1.5m", 90),
        ("500ms", 0.5),
        ("0", 0),
    ],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "3", "3 minutes", "m", "-3m", "3d"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration_s(text)


def test_durations_format_like_go() -> None:
    assert [format_duration(s) for s in (180, 5400, 10800, 0, 0.5)] == [
        "3m",
        "1h30m",
        "3h",
        "0s",
        "0.5s",
    ]


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (("period: 3m", "period: three"), "spec.syncPolicy.0.period: invalid duration 'three'"),
        (("period: 3m", "period: 180"), "got the number 180"),
        (("maxLimitPecent: 0.65", "maxLimitPecent: 65"), "write 0.65 for 65 %"),
        (("weight: 0.2", "weight: -1"), "spec.priority.0.weight"),
        (("count: 5", "count: 0"), "spec.hotValue.0.count"),
        (("kind: DynamicSchedulerPolicy", "kind: Deployment"), "kind is 'Deployment'"),
        (("  syncPolicy:", "  syncPolicyy:"), "syncPolicyy: Extra inputs are not permitted"),
        (
            (
                "- name: cpu_usage_max_avg_1h\n      period: 15m",
                "- name: cpu_usage_avg_5m\n      period: 15m",
            ),
            "lists metric 'cpu_usage_avg_5m' twice",
        ),
    ],
)
def test_bad_policy_names_the_field_and_problem(mutation: tuple[str, str], message: str) -> None:
    old, new = mutation
    assert old in CRANE_POLICY
    with pytest.raises(PolicyError) as error:
        policy_from_yaml(CRANE_POLICY.replace(old, new, 1), "policy.yaml")
    assert message in str(error.value)
    assert str(error.value).startswith("policy.yaml: ")


def test_not_yaml_is_a_clear_error() -> None:
    with pytest.raises(PolicyError, match="not valid YAML"):
        policy_from_yaml("spec: [unclosed", "p.yaml")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "absent.yaml")


def test_predicate_without_sync_policy_warns() -> None:
    policy = policy_from_yaml(
        """
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: mem_usage_avg_5m, maxLimitPecent: 0.5}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}]
  hotValue: [{timeRange: 1m, count: 2}]
"""
    )
    assert len(policy.warnings) == 1
    assert "'mem_usage_avg_5m' has no syncPolicy entry" in policy.warnings[0]


def test_default_policy_matches_crane_defaults() -> None:
    policy = default_policy()
    weights = {p.name: p.weight for p in policy.spec.priority}
    assert weights["cpu_usage_max_avg_1d"] == 0.5
    assert policy.freshness_window_s("mem_usage_max_avg_1h") == 20 * 60


def test_the_load_models_lookups_are_cached_on_each_policy_and_never_shared() -> None:
    first = default_policy()
    assert first.limits is first.limits  # computed once per policy
    assert first.priority_ceilings is first.priority_ceilings
    assert dict(first.limits)["cpu_usage_avg_5m"] == 0.65
    # A priority without a predicate is scored at 1.0 when its data is missing.
    assert ("cpu_usage_max_avg_1d", 0.5, 1.0) in first.priority_ceilings
    stricter = DEFAULT_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0.5")
    reloaded = policy_from_yaml(stricter)
    assert dict(reloaded.limits)["cpu_usage_avg_5m"] == 0.5
    assert dict(first.limits)["cpu_usage_avg_5m"] == 0.65  # the old policy is untouched
    assert reloaded.metric_resources["mem_usage_avg_5m"] == "memory"


SMALL_POLICY = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
  priority: [{name: cpu_usage_avg_5m, weight: 0.5}]
  hotValue: [{timeRange: 5m, count: 5}]
  estimation: {enabled: true}
"""

# (what is written instead, the field named, what the message says)
REFUSED = [
    ("period: 3m", "period: 1ns", "spec.syncPolicy.0.period", "shorter than the minimum 1ms"),
    ("period: 3m", "period: 999us", "spec.syncPolicy.0.period", "shorter than the minimum 1ms"),
    ("period: 3m", "period: 721h", "spec.syncPolicy.0.period", "longer than the maximum 720h"),
    ("timeRange: 5m", "timeRange: 1ns", "spec.hotValue.0.timeRange", "minimum 1ms"),
    ("weight: 0.5", "weight: yes", "spec.priority.0.weight", "got the boolean True"),
    ("weight: 0.5", "weight: true", "spec.priority.0.weight", "expected a number"),
    ("maxLimitPecent: 0.65", "maxLimitPecent: on", "maxLimitPecent", "got the boolean True"),
    ("count: 5", "count: yes", "spec.hotValue.0.count", "got the boolean True"),
    ("enabled: true", "enabled: 1", "spec.estimation.enabled", "expected true or false"),
    ("v1alpha1", "v1alpha1x", "apiVersion", "expected 'scheduler.policy.crane.io/v1alpha1'"),
    ("scheduler.policy.crane.io/v1alpha1", "apps/v1", "apiVersion", "crane's"),
    ("name: cpu_usage_avg_5m, weight", "name: 'cpu usage!', weight", "spec.priority.0.name",
     "neither a Prometheus metric name nor a node annotation key"),
    ("name: cpu_usage_avg_5m, period", "name: 'a/b/c', period", "spec.syncPolicy.0.name",
     "neither"),
    ("name: cpu_usage_avg_5m, period", "name: 5, period", "spec.syncPolicy.0.name",
     "valid string"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "field", "says"), REFUSED, ids=[r[1] for r in REFUSED])
def test_a_policy_value_of_the_wrong_kind_or_range_is_refused_naming_its_field(
    old: str, new: str, field: str, says: str
) -> None:
    assert old in SMALL_POLICY
    with pytest.raises(PolicyError) as caught:
        policy_from_yaml(SMALL_POLICY.replace(old, new, 1), "p.yaml")
    message = str(caught.value)
    assert message.startswith("p.yaml: invalid DynamicSchedulerPolicy: "), message
    assert field in message, message
    assert says in message, message


@pytest.mark.parametrize(
    "name",
    ["cpu_usage_avg_5m", "node:cpu_usage:avg5m", "example.com/cpu-usage", "gpu.util-5m", "_x"],
)
def test_a_metric_named_as_prometheus_or_as_an_annotation_key_is_accepted(name: str) -> None:
    text = SMALL_POLICY.replace("cpu_usage_avg_5m", name)
    assert name in policy_from_yaml(text, "p.yaml").metrics


def test_the_smallest_and_largest_durations_and_a_number_in_a_string_are_accepted() -> None:
    text = (
        SMALL_POLICY.replace("period: 3m", "period: 1s")
        .replace("timeRange: 5m", "timeRange: 720h")
        .replace("weight: 0.5", "weight: 1e-3")  # PyYAML reads this as a string
    )
    policy = policy_from_yaml(text, "p.yaml")
    assert policy.spec.sync_policy[0].period_s == 1.0
    assert policy.spec.hot_value[0].time_range_s == 720 * 3600
    assert policy.spec.priority[0].weight == 0.001


def test_a_policy_without_apiversion_and_kind_is_still_read_as_crane_reads_it() -> None:
    body = SMALL_POLICY.split("spec:", 1)[1]
    assert policy_from_yaml("spec:" + body, "p.yaml").metrics == ("cpu_usage_avg_5m",)


def test_a_second_empty_predicate_is_refused_rather_than_dropping_every_filter() -> None:
    with pytest.raises(PolicyError, match=r"key 'predicate' is written twice"):
        policy_from_yaml(SMALL_POLICY + "  predicate:\n", "p.yaml")

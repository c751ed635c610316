"""Percentile metrics in a policy: the names the grammar knows and what they mean, and
a name meant as a percentile but written wrong refused at load, naming the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.policy import PolicyError, policy_from_yaml
from app.policy.metric_names import (
    UsageMetric,
    percentile_problem,
    shipped_percentile_metrics,
    usage_metric,
)

POLICY = """\
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}, {name: METRIC, period: 15m}]
  predicate: [{name: METRIC, maxLimitPecent: 0.8}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}]
  hotValue: [{timeRange: 5m, count: 5}]
"""


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        ("cpu_usage_avg_5m", UsageMetric("cpu", "avg")),
        ("mem_usage_max_avg_1h", UsageMetric("mem", "max", 3600.0)),
        ("cpu_usage_max_avg_1d", UsageMetric("cpu", "max", 86400.0)),
        ("cpu_usage_max_avg_6h", UsageMetric("cpu", "max", 6 * 3600.0)),
        ("cpu_usage_p95_avg_1h", UsageMetric("cpu", "quantile", 3600.0, 0.95)),
        ("mem_usage_p90_avg_1d", UsageMetric("mem", "quantile", 86400.0, 0.90)),
        ("mem_usage_p50_avg_30m", UsageMetric("mem", "quantile", 1800.0, 0.50)),
        ("cpu_usage_p99_avg_7d", UsageMetric("cpu", "quantile", 7 * 86400.0, 0.99)),
        ("cpu_usage_p1_avg_10m", UsageMetric("cpu", "quantile", 600.0, 0.01)),
        ("gpu_usage_avg_5m", None),  # a metric of your own: synced, not simulated
        ("node_load1", None),
        ("cpu_usage_avg_1m", None),
    ],
)
def test_a_usage_metric_name_says_what_it_measures_and_over_what(
    name: str, meaning: UsageMetric | None
) -> None:
    assert usage_metric(name) == meaning


def test_the_shipped_percentile_names_are_p90_and_p95_over_an_hour_and_a_day() -> None:
    assert shipped_percentile_metrics() == (
        "cpu_usage_p90_avg_1h", "cpu_usage_p90_avg_1d", "cpu_usage_p95_avg_1h",
        "cpu_usage_p95_avg_1d", "mem_usage_p90_avg_1h", "mem_usage_p90_avg_1d",
        "mem_usage_p95_avg_1h", "mem_usage_p95_avg_1d",
    )  # fmt: skip


@pytest.mark.parametrize("name", [*shipped_percentile_metrics(), "cpu_usage_p99_avg_6h"])
def test_a_policy_names_a_percentile_metric_in_every_section(name: str) -> None:
    policy = policy_from_yaml(POLICY.replace("METRIC", name), "p.yaml")
    assert policy.metrics == ("cpu_usage_avg_5m", name)
    assert policy.limits == ((name, 0.8),)
    assert policy.metric_resources[name] == name[:3].replace("mem", "memory")


# (name, what the message says)
MALFORMED = [
    ("cpu_usage_p95_1h", "looks like a percentile but is not one"),
    ("cpu_usage_avg_p95_1h", "looks like a percentile but is not one"),
    ("cpu_usage_p95_max_1h", "looks like a percentile but is not one"),
    ("memory_usage_p95_avg_1h", "<cpu|mem>_usage_p<1-99>_avg_<window>"),
    ("cpu_usage_p95_avg_1w", "such as cpu_usage_p95_avg_1h"),
    ("cpu_usage_p95_avg_", "looks like a percentile"),
    ("cpu_usage_p0_avg_1h", "p0 is no percentile"),
    ("cpu_usage_p100_avg_1h", "p100 is no percentile"),
    ("cpu_usage_p950_avg_1h", "p950 is no percentile"),
    ("cpu_usage_p05_avg_1h", "without a leading zero"),
    ("cpu_usage_p95_avg_5m", "the window 5m is outside 10m to 7d"),
    ("cpu_usage_p95_avg_8d", "the window 8d is outside 10m to 7d"),
]


@pytest.mark.parametrize(("name", "says"), MALFORMED, ids=[m[0] for m in MALFORMED])
@pytest.mark.parametrize("field", ["syncPolicy", "predicate"])
def test_a_malformed_percentile_name_is_refused_at_load_naming_its_field(
    name: str, says: str, field: str
) -> None:
    # The bad name in one section only; the other keeps a good one.
    good, other = "cpu_usage_p95_avg_1h", {"syncPolicy": "maxLimitPecent", "predicate": "period"}
    text = POLICY.replace("METRIC", name).replace(
        f"{{name: {name}, {other[field]}", f"{{name: {good}, {other[field]}"
    )
    with pytest.raises(PolicyError) as caught:
        policy_from_yaml(text, "p.yaml")
    message = str(caught.value)
    assert message.startswith("p.yaml: invalid DynamicSchedulerPolicy: "), message
    assert f"spec.{field}." in message, message
    assert says in message, message


@pytest.mark.parametrize(
    "name",
    ["cpu_usage_avg_5m", "node_p2p_bytes", "gpu_p95", "app_latency_p99", "cpu_usage_max_avg_9d"],
)
def test_a_name_that_is_no_percentile_is_not_judged_as_one(name: str) -> None:
    assert percentile_problem(name) is None


def test_a_synced_annotation_key_loads_with_a_warning_that_the_annotator_cannot_sync_it() -> None:
    policy = policy_from_yaml(POLICY.replace("METRIC", "example.com/gpu"), "p.yaml")
    assert any(
        "'example.com/gpu'" in w and "annotator cannot sync it" in w for w in policy.warnings
    ), policy.warnings
    crane = policy_from_yaml(POLICY.replace("METRIC", "cpu_usage_p95_avg_1d"), "p.yaml")
    assert not any("cannot sync" in w for w in crane.warnings)


def test_the_tuning_guides_percentile_policy_loads_and_names_only_shipped_metrics() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "tuning.md").read_text()
    section = text.split("## Percentiles", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    policy = policy_from_yaml(example, "docs/tuning.md")
    assert policy.warnings == ()
    shipped = {*shipped_percentile_metrics(), "cpu_usage_avg_5m", "mem_usage_avg_5m"}
    assert set(policy.metrics) <= shipped
    filtered = {name for name, _ in policy.limits}
    # What the section says: filter on p95 (and the 5-minute mean as the fast guard),
    # score on the 5-minute mean, never filter on a day.
    assert {"cpu_usage_p95_avg_1h", "cpu_usage_avg_5m"} <= filtered
    assert not any(name.endswith("_1d") for name in filtered)
    assert max(policy.spec.priority, key=lambda p: p.weight).name == "cpu_usage_avg_5m"


def test_policy_check_says_what_each_percentile_is_and_nothing_more_for_cranes_names() -> None:
    from app.policy import default_policy
    from app.policy_check.main import describe

    said = describe(policy_from_yaml(POLICY.replace("METRIC", "mem_usage_p90_avg_1d"), "p.yaml"))
    assert (
        "mem_usage_p90_avg_1d: the 90th percentile of the 5-minute means of memory usage in "
        "the last 1d, one every 5m"
    ) in said.splitlines()
    assert "percentile" not in describe(default_policy())

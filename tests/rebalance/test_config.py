"""The configuration file: every error names its field and the file."""

from __future__ import annotations

import pytest

from app.rebalance.config import ConfigError, DeschedulerConfig, config_from_yaml

BAD_CONFIGS = [
    # (document, the field the error must name, what it must say)
    ("thresholds: {cpu: high}", "thresholds.cpu", "valid number"),
    ("dryRun: maybe", "dryRun", "true or false"),
    ("priorityThreshold: {value: x}", "priorityThreshold.value", "valid integer"),
    ("evictableNamespaces: {exclude: kube-system}", "evictableNamespaces.exclude", "tuple"),
    ("maxNoOfPodsToEvictPerNode: -1", "maxNoOfPodsToEvictPerNode", "greater than or equal to 0"),
    ("maxNoOfPodsToEvictTotal: -3", "maxNoOfPodsToEvictTotal", "greater than or equal to 0"),
    ("minReplicas: -2", "minReplicas", "greater than or equal to"),
    ("consecutiveHotRounds: 0", "consecutiveHotRounds", "greater than or equal to 1"),
    ("evictionsPerSecond: 0", "evictionsPerSecond", "greater than or equal to 0.01"),
    ("evictionsPerSecond: 1e-300", "evictionsPerSecond", "greater than or equal to 0.01"),
    ("evictionsPerSecond: .inf", "evictionsPerSecond", "finite number"),
    ("evictionsPerSecond: 1000", "evictionsPerSecond", "less than or equal to 100"),
    ("thresholds: {cpu: 70}\ntargetThresholds: {cpu: 60}", "thresholds.cpu (70)",
     "above targetThresholds.cpu (60)"),
    ("thresholds: {cpu: 140}\ntargetThresholds: {cpu: 150}", "thresholds.cpu",
     "percentage from 0 to 100"),
    ("thresholdz: {cpu: 70}", "thresholdz", "Extra inputs are not permitted"),
    ("evictableNamespaces: {includes: [shop]}", "evictableNamespaces.includes",
     "Extra inputs are not permitted"),
    ("interval: 5 minutes", "interval", "use Go syntax"),
    # One range for every duration, as the flags: 1ms to 720h, 0 where it means off; a run
    # at least every second (interval: 1ns ran 787 rounds in 5 s).
    ("interval: 1ns", "interval", "shorter than the minimum 1ms"),
    ("interval: 500ms", "interval", "shorter than the minimum 1s"),
    ("minPodAge: 721h", "minPodAge", "longer than the maximum 720h"),
    ("settleTime: 10us", "settleTime", "shorter than the minimum 1ms"),
    ("dryRun: 1", "dryRun", "expected true or false"),
    ("numberOfNodes: yes", "numberOfNodes", "got the boolean True"),
    ("minimumGain: on", "minimumGain", "got the boolean True"),
    ("settleTime: -5m", "settleTime", "negative"),
    ("workloadCooldown: soon", "workloadCooldown", "invalid duration"),
    ("evictableNamespaces: {include: [a], exclude: [b]}", "evictableNamespaces",
     "not both"),
    ("podUsageQueries: {cpu: '   '}", "podUsageQueries.cpu", "pattern"),
    ("metrics: {cpu: mem_usage_avg_5m}", "metrics.cpu", "does not measure cpu"),
    ("apiVersion: loadaware.io/v2", "apiVersion", "expected 'loadaware.io/v1alpha1'"),
    ("nodeSelector: 'zone in (a, b)'", "nodeSelector", "equality terms"),
    ("nodeSelector: '!spot'", "nodeSelector", "equality terms"),
]


@pytest.mark.parametrize(("document", "field", "says"), BAD_CONFIGS,
                         ids=[case[1] for case in BAD_CONFIGS])
def test_each_bad_config_is_refused_with_its_field_named(document: str, field: str,
                                                         says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_yaml(document, "/etc/loadaware/descheduler.yaml")
    message = str(caught.value)
    assert message.startswith("/etc/loadaware/descheduler.yaml: invalid DeschedulerConfiguration")
    assert field in message
    assert says in message


def test_a_document_that_is_not_a_mapping_or_not_yaml_is_refused_with_the_file_named() -> None:
    with pytest.raises(ConfigError, match=r"^d.yaml: expected a DeschedulerConfiguration mapping"):
        config_from_yaml("- thresholds", "d.yaml")
    with pytest.raises(ConfigError, match=r"^d.yaml: not valid YAML"):
        config_from_yaml("thresholds: {cpu: [", "d.yaml")


def test_an_empty_file_means_the_defaults() -> None:
    assert config_from_yaml("", "d.yaml") == DeschedulerConfig()


@pytest.mark.parametrize(
    ("written", "labels"),
    [
        ("{pool: web, zone: a}", {"pool": "web", "zone": "a"}),
        ("'pool=web,zone=a'", {"pool": "web", "zone": "a"}),  # descheduler's string form
        ("'node-role.kubernetes.io/worker='", {"node-role.kubernetes.io/worker": ""}),
        ("'pool==web'", {"pool": "web"}),
    ],
)
def test_node_selector_takes_a_map_or_descheduler_s_string(
    written: str, labels: dict[str, str]
) -> None:
    assert config_from_yaml(f"nodeSelector: {written}", "d.yaml").node_selector == labels

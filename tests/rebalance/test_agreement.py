"""Thresholds that cannot loop: the descheduler says where its thresholds and the
scheduler's load filter disagree, at start, on reload and in every plan (--dry-run)."""

from __future__ import annotations

from typing import Any

import pytest

from app.policy import DEFAULT_POLICY_YAML, default_policy, policy_from_yaml
from app.rebalance import plan, render_plan
from app.rebalance.agreement import threshold_conflicts
from tests.rebalance.builders import NOW, POLICY, cluster, config, node, pod


def test_the_shipped_defaults_agree() -> None:
    assert threshold_conflicts(config(), default_policy()) == []


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        # The scheduler fills nodes up to 65 %; the descheduler empties them above 55 %.
        (
            {"targetThresholds": {"cpu": 55, "memory": 75}},
            "pods bounce on cpu: targetThresholds.cpu is 55% but the policy's "
            "cpu_usage_avg_5m maxLimitPercent is 65%",
        ),
        # A node at 70 % is cool to the descheduler and refused by the scheduler.
        (
            {
                "thresholds": {"cpu": 70, "memory": 50},
                "targetThresholds": {"cpu": 80, "memory": 75},
            },
            "thresholds.cpu is 70%, above the policy's cpu_usage_avg_5m maxLimitPercent (65%)",
        ),
        ({"useDeviationThresholds": True}, "useDeviationThresholds is on"),
    ],
)
def test_a_disagreement_is_said_in_plain_words(fields: dict[str, Any], says: str) -> None:
    conflicts = threshold_conflicts(config(**fields), default_policy())
    assert len(conflicts) == 1
    assert says in conflicts[0]


def test_a_metric_the_scheduler_does_not_filter_on_makes_pods_bounce() -> None:
    no_cpu_predicate = policy_from_yaml(
        DEFAULT_POLICY_YAML.replace(
            "maxLimitPecent: 0.65\n    - name: cpu_usage_max",
            "maxLimitPecent: 0\n    - name: cpu_usage_max",
            1,
        )
    )
    (conflict,) = threshold_conflicts(config(), no_cpu_predicate)
    assert "the policy has no predicate on cpu_usage_avg_5m" in conflict


def test_every_plan_carries_the_conflicts_so_a_dry_run_prints_them() -> None:
    looping = config(targetThresholds={"cpu": 55, "memory": 75})
    nodes = [node("hot", 0.9), node("cool", 0.1)]
    result = plan(cluster(nodes, [pod("a", "hot")]), looping, POLICY, NOW, {})
    assert any("pods bounce on cpu" in note for note in result.notes)
    assert "pods bounce on cpu" in render_plan(result)


def test_the_descheduler_says_it_at_start(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from app.descheduler.main import parse_args, settings_from_args

    path = tmp_path / "descheduler.yaml"
    path.write_text(
        "apiVersion: loadaware.io/v1alpha1\nkind: DeschedulerConfiguration\n"
        "targetThresholds: {cpu: 55, memory: 75}\n",
        encoding="utf-8",
    )
    argv = ["--descheduler-config", str(path), "--no-leader-elect", "--prometheus-url", "http://127.0.0.1:9"]
    with caplog.at_level("WARNING", logger="app.descheduler.main"):
        settings_from_args(parse_args(argv))
    assert any("pods bounce on cpu" in record.getMessage() for record in caplog.records)

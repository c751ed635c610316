"""The shipped alerts: checked and unit-tested with ``promtool test rules``, and the
PrometheusRule kept equal to the plain file."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.prom_fixtures import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy" / "prometheus"
PLAIN_ALERTS = DEPLOY / "loadaware-alerts.yaml"
OPERATOR_ALERTS = DEPLOY / "operator" / "alerts.yaml"
RAISE = "loadaware_extender_pod_estimate_raise_max_fraction"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, check=False, timeout=60
    )


def test_plain_alerts_pass_promtool_check() -> None:
    proc = _promtool("check", "rules", str(PLAIN_ALERTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_prometheusrule_holds_the_same_alerts_as_the_plain_file() -> None:
    manifest = _load(OPERATOR_ALERTS)
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"] == _load(PLAIN_ALERTS)


def test_the_estimate_alert_fires_on_a_raise_near_a_whole_node_held_for_five_minutes(
    tmp_path: Path,
) -> None:
    """promtool's unit test: a raise of 0.94 of a node (issue 42's burner at 7.5 of 8
    cores) held 10 minutes fires after 5, labelled with the namespace; 0.6 held as long
    (a workload that requests little and uses 60 % of a node) and 0.94 for 3 minutes do
    not."""
    tests = {
        "rule_files": [str(PLAIN_ALERTS)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'{RAISE}{{resource="cpu",namespace="evil",pod="x"}}',
                        "values": "0.94x10",
                    },
                    {
                        "series": f'{RAISE}{{resource="cpu",namespace="shop",pod="y"}}',
                        "values": "0.6x10",
                    },
                    {
                        "series": f'{RAISE}{{resource="memory",namespace="blip",pod="z"}}',
                        "values": "0.94x2 0x7",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "LoadawareEstimateNearWholeNode",
                     "exp_alerts": []},
                    {
                        "eval_time": "6m",
                        "alertname": "LoadawareEstimateNearWholeNode",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "namespace": "evil",
                                    "resource": "cpu",
                                },
                                "exp_annotations": _annotations("evil", "cpu", "94%"),
                            }
                        ],
                    },
                ],
            }
        ],
    }
    test_file = tmp_path / "alerts_test.yaml"
    test_file.write_text(yaml.safe_dump(tests))
    proc = _promtool("test", "rules", str(test_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _annotations(namespace: str, resource: str, value: str) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them for these labels."""
    rule = _load(PLAIN_ALERTS)["groups"][0]["rules"][0]
    rendered = {}
    for key, template in rule["annotations"].items():
        text = template.replace("{{ $labels.namespace }}", namespace)
        text = text.replace("{{ $labels.resource }}", resource)
        text = text.replace("{{ $value | humanizePercentage }}", value)
        rendered[key] = text
    return rendered

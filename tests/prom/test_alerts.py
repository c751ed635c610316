"""The shipped descheduler alert (deploy/prometheus/operator/descheduler-alerts.yaml):
``promtool test rules`` on its spec, with a case that fires and one that does not."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.prom_fixtures import REPO_ROOT
from tests.support.promserver import PROMTOOL_BIN

ALERTS = REPO_ROOT / "deploy" / "prometheus" / "operator" / "descheduler-alerts.yaml"
OUTCOMES = "loadaware_descheduler_eviction_outcomes_total"


def promtool_test(tmp_path: Path, series: dict[str, str], alerts: list[dict[str, Any]]) -> None:
    manifest = yaml.safe_load(ALERTS.read_text())
    assert manifest["kind"] == "PrometheusRule"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(manifest["spec"]))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "5m",
        "tests": [
            {
                "interval": "5m",
                "input_series": [
                    {"series": f'{OUTCOMES}{{outcome="{outcome}"}}', "values": values}
                    for outcome, values in series.items()
                ],
                "alert_rule_test": [
                    {"eval_time": "3h", "alertname": "LoadawareDeschedulerNotHelping",
                     "exp_alerts": alerts}
                ],
            }
        ],
    }  # fmt: skip
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    proc = subprocess.run(
        [PROMTOOL_BIN, "test", "rules", "tests.yaml"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def expected_annotations(value: str) -> dict[str, str]:
    """The rule's annotations with its value rendered as ``value``."""
    rule = yaml.safe_load(ALERTS.read_text())["spec"]["groups"][0]["rules"][0]
    rendered: dict[str, str] = {
        key: text.replace("{{ $value | humanizePercentage }}", value)
        for key, text in rule["annotations"].items()
    }
    return rendered


def test_the_alert_fires_when_evictions_stop_helping(tmp_path: Path) -> None:
    # Two evictions judged every 5 minutes, none helped: for far longer than 30m.
    promtool_test(
        tmp_path,
        {"helped": "0+0x36", "no_effect": "0+2x36", "backfired": "0+0x36"},
        [{"exp_labels": {"severity": "warning"}, "exp_annotations": expected_annotations("0%")}],
    )


def test_the_alert_stays_quiet_while_most_evictions_help(tmp_path: Path) -> None:
    promtool_test(
        tmp_path,
        {"helped": "0+2x36", "no_effect": "0+1x36", "backfired": "0+0x36"},
        [],
    )

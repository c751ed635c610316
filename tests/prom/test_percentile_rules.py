"""The shipped percentile rules (``*_usage_p90_avg_1h`` ... ``_p95_avg_1d``): the names
the policy grammar knows, and their values on known input by `promtool test rules`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.policy.metric_names import shipped_percentile_metrics, usage_metric
from tests.support.prom_fixtures import REPO_ROOT
from tests.support.promserver import promtool_test_rules

RULES = REPO_ROOT / "deploy" / "prometheus" / "loadaware-rules.yaml"


def _records() -> dict[str, str]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def _sample(metric: str, value: float, labels: str = 'instance="a"') -> dict[str, Any]:
    return {"labels": f"{metric}{{{labels}}}", "value": value}


def _expect(metric: str, at: str, value: float) -> dict[str, Any]:
    return {"expr": metric, "eval_time": at, "exp_samples": [_sample(metric, value)]}


# Each case: (input series at 30s steps, what the rules must record). A series value
# "a+bxN" is promtool's expanding notation: a, a+b, ... N more samples; "axN" repeats a.
CASES: list[tuple[list[dict[str, str]], list[dict[str, Any]]]] = [
    (   # the 5-minute means climb 0, 1, ..., 200 over 100 minutes (a sample each 30s).
        # The hour's percentiles take its 121 samples (80 ... 200) sorted: p90 at rank
        # 0.90 * 120 = 108 and p95 at 114 (Prometheus interpolates between ranks; these
        # fall on whole ones); the max is the top one. The day's take a mean every 5
        # minutes: 0, 10, ..., 200, so p90 at rank 18 of 20 is 180
        [{"series": 'cpu_usage_avg_5m{instance="a"}', "values": "0+1x200"},
         {"series": 'mem_usage_avg_5m{instance="a"}', "values": "0+0.5x200"}],
        [_expect("cpu_usage_p90_avg_1h", "100m", 188),
         _expect("cpu_usage_p95_avg_1h", "100m", 194),
         _expect("cpu_usage_max_avg_1h", "100m", 200),
         _expect("cpu_usage_p90_avg_1d", "100m", 180),
         _expect("cpu_usage_p95_avg_1d", "100m", 190),
         _expect("mem_usage_p90_avg_1h", "100m", 94),
         _expect("mem_usage_p95_avg_1h", "100m", 97),
         _expect("mem_usage_p95_avg_1d", "100m", 95)],
    ),
    (   # a mean of 0 on each 5-minute mark and 100 between: the hour's p95 (every
        # sample) reads 100, the day's (a mean every 5 minutes) 0, as the simulator
        # takes them (tests/simulate/test_percentile_windows.py)
        [{"series": 'cpu_usage_avg_5m{instance="a"}',
          "values": " ".join("0" if i % 10 == 0 else "100" for i in range(241))}],
        [_expect("cpu_usage_p95_avg_1h", "2h", 100),
         _expect("cpu_usage_p95_avg_1d", "2h", 0)],
    ),
    (   # 20 % all day but one hour at 90 %: 120 of the day's 2,881 means (4 %) are
        # high, so the day's p90 and p95 stay at 20 while its max reads 90; an hour
        # after the spike the hour's p95 has forgotten it too
        [{"series": 'cpu_usage_avg_5m{instance="a"}', "values": "20x1439 90x119 20x1320"}],
        [_expect("cpu_usage_max_avg_1d", "24h", 90),
         _expect("cpu_usage_p90_avg_1d", "24h", 20),
         _expect("cpu_usage_p95_avg_1d", "24h", 20),
         _expect("cpu_usage_p95_avg_1h", "13h30m", 90),  # inside the spike
         _expect("cpu_usage_p95_avg_1h", "14h30m", 20)],
    ),
    (   # from node-exporter's own series through every rule: each of 2 CPUs idle 40 %
        # of each second (12 s a 30 s step) and three quarters of the memory used
        [{"series": 'node_cpu_seconds_total{cpu="0",mode="idle",instance="a"}',
          "values": "0+12x200"},
         {"series": 'node_cpu_seconds_total{cpu="1",mode="idle",instance="a"}',
          "values": "0+12x200"},
         {"series": 'node_memory_MemAvailable_bytes{instance="a"}', "values": "250x200"},
         {"series": 'node_memory_MemTotal_bytes{instance="a"}', "values": "1000x200"}],
        [_expect("cpu_usage_p95_avg_1h", "80m", 60),
         _expect("cpu_usage_p90_avg_1d", "80m", 60),
         _expect("mem_usage_p95_avg_1h", "80m", 75),
         _expect("mem_usage_p90_avg_1d", "80m", 75)],
    ),
]  # fmt: skip


def test_the_percentile_rules_give_the_expected_quantile_on_known_input(tmp_path: Path) -> None:
    tests = [
        {"interval": "30s", "input_series": series, "promql_expr_test": expected}
        for series, expected in CASES
    ]
    done = promtool_test_rules(tmp_path, RULES, "30s", tests)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_shipped_percentile_rule_is_tested_on_known_input() -> None:
    tested = {e["expr"] for _, expected in CASES for e in expected}
    assert set(shipped_percentile_metrics()) <= tested


def test_each_shipped_usage_rule_computes_what_its_name_says() -> None:
    # The simulator computes each name by what it says (app/policy/metric_names.py):
    # the rules must say the same, crane's included.
    records = _records()
    usage = {name: usage_metric(name) for name in records}
    for metric, meaning in usage.items():
        if meaning is not None:
            assert records[metric] == meaning.promql(), metric
    assert set(shipped_percentile_metrics()) <= {m for m, u in usage.items() if u is not None}


def test_a_days_percentile_takes_a_5_minute_mean_every_5_minutes_and_an_hours_every_one() -> None:
    records = _records()
    assert records["cpu_usage_p95_avg_1d"].endswith("[1d:5m])")
    assert records["cpu_usage_p95_avg_1h"].endswith("[1h])")

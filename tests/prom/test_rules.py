"""The shipped recording rules: static checks, and their values on a real Prometheus."""

from __future__ import annotations

import io
import re
import socket
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.policy.metric_names import shipped_percentile_metrics
from tests.support import http_client, promdata
from tests.support.prom_fixtures import REPO_ROOT, PromNodeData
from tests.support.promserver import (
    PrometheusError,
    PrometheusServer,
    import_openmetrics,
    rule_stages,
    temporary_prometheus,
)

DEPLOY = REPO_ROOT / "deploy" / "prometheus"
PLAIN_RULES = DEPLOY / "loadaware-rules.yaml"
OPERATOR_RULES = DEPLOY / "operator" / "prometheusrule.yaml"

LOOKBACK_S = 300  # Prometheus' default instant-query lookback
MAX_SCRAPE_INTERVAL_S = 30  # what deploy/prometheus/README.md asks for
TOLERANCE_PP = 1.0


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    m = re.fullmatch(r"(\d+)([smhd])", text)
    assert m, f"unexpected duration {text!r}"
    return int(m.group(1)) * units[m.group(2)]


def _promtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", "check", "rules", str(path)],
        capture_output=True, text=True, check=False, timeout=60,
    )


def _query(data: PromNodeData, expr: str, t: float) -> list[dict[str, Any]]:
    r = http_client.get(f"{data.url}/api/v1/query", params={"query": expr, "time": t}, timeout=10)
    r.raise_for_status()
    body = r.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _by_instance(result: list[dict[str, Any]]) -> dict[str, float]:
    return {s["metric"]["instance"]: float(s["value"][1]) for s in result}


# --------------------------------------------------------------------------- static


def test_plain_rules_file_passes_promtool_check() -> None:
    proc = _promtool_check(PLAIN_RULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prometheusrule_spec_passes_promtool_check(tmp_path: Path) -> None:
    manifest = _load(OPERATOR_RULES)
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(manifest["spec"]))
    proc = _promtool_check(spec_file)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prometheusrule_spec_has_the_same_groups_and_rules_as_plain_file() -> None:
    assert _load(OPERATOR_RULES)["spec"] == _load(PLAIN_RULES)


def test_rules_record_the_active_levels_the_six_default_metrics_and_the_percentiles() -> None:
    records = [r["record"] for g in _load(PLAIN_RULES)["groups"] for r in g["rules"]]
    assert sorted(records) == sorted(promdata.RECORDED_METRICS + promdata.PERCENTILE_METRICS)
    assert sorted(promdata.PERCENTILE_METRICS) == sorted(shipped_percentile_metrics())


def test_rules_in_a_group_come_after_the_rules_they_read() -> None:
    # A live Prometheus evaluates a group's rules in order at one timestamp,
    # so e.g. cpu_usage_avg_5m must follow cpu_usage_active to include its
    # newest sample.
    for group in _load(PLAIN_RULES)["groups"]:
        seen: set[str] = set()
        names = {r["record"] for r in group["rules"]}
        for rule in group["rules"]:
            reads = {n for n in names if re.search(rf"\b{n}\b", rule["expr"])}
            assert reads <= seen, f"{rule['record']} reads {reads - seen} recorded later"
            seen.add(rule["record"])


def test_rules_split_into_active_then_average_then_maxima_stages() -> None:
    stages = [
        sorted(r["record"] for g in s["groups"] for r in g["rules"])
        for s in rule_stages(_load(PLAIN_RULES))
    ]
    assert stages == [
        ["cpu_usage_active", "mem_usage_active"],
        ["cpu_usage_avg_5m", "mem_usage_avg_5m"],
        sorted([m for m in promdata.DEFAULT_METRICS if "_max_" in m]
               + list(promdata.PERCENTILE_METRICS)),
    ]  # fmt: skip


def test_group_intervals_leave_two_samples_within_the_query_lookback() -> None:
    # An instant query must find a recorded sample even if one evaluation is late.
    for group in _load(PLAIN_RULES)["groups"]:
        assert 2 * _duration_s(group["interval"]) < LOOKBACK_S, group["name"]


def test_irate_window_spans_three_scrapes_at_the_documented_interval() -> None:
    exprs = " ".join(r["expr"] for g in _load(PLAIN_RULES)["groups"] for r in g["rules"])
    windows = re.findall(r"irate\([^\[]*\[(\w+)\]", exprs)
    assert windows, "no irate() in the rules"
    for w in windows:
        assert _duration_s(w) >= 3 * MAX_SCRAPE_INTERVAL_S, w


# --------------------------------------------------------------------------- synthetic truth


def test_expected_values_of_default_nodes_match_their_documented_shapes() -> None:
    anchor = 1_700_000_040.0
    nodes = {n.name: n for n in promdata.default_nodes(anchor)}
    want = {  # avg_5m / max_avg_1h / max_avg_1d, cpu then mem
        "node-busy": (70, 70, 70, 50, 50, 50),
        "node-peak": (20, 20, 90, 35, 35, 80),
        "node-memhot": (15, 15, 15, 92, 92, 92),
        "node-cool": (5, 5, 5, 10, 10, 10),
        "node-cooling": (30, 80, 80, 45, 75, 75),
    }
    for name, values in want.items():
        got = tuple(
            promdata.expected_value(nodes[name], m, anchor) for m in promdata.DEFAULT_METRICS
        )
        assert got == pytest.approx(values), name
    assert promdata.expected_value(nodes["node-nodata"], "cpu_usage_avg_5m", anchor) is None


def test_generated_idle_counters_grow_by_the_idle_seconds_of_the_shape() -> None:
    node = promdata.NodeSpec(
        "n", "10.9.9.9", "10.9.9.9:9100", cpus=2,
        cpu_busy=promdata.step(0.25, 0.75, 600.0),
    )
    buf = io.StringIO()
    promdata.write_node_openmetrics(buf, [node], 0.0, 1200.0, 15.0)
    text = buf.getvalue()
    assert text.endswith("# EOF\n")
    idle: dict[str, list[tuple[float, float]]] = {}
    for line in text.splitlines():
        m = re.match(r'node_cpu_seconds_total\{cpu="(\d)",.*mode="idle"\} (\S+) (\S+)', line)
        if m:
            idle.setdefault(m.group(1), []).append((float(m.group(3)), float(m.group(2))))
    assert sorted(idle) == ["0", "1"]
    for t, want_busy in ((300.0, 0.25), (900.0, 0.75)):
        rates = []
        for samples in idle.values():
            (t0, v0), (t1, v1) = (s for s in samples if t - 15 <= s[0] <= t)
            rates.append((v1 - v0) / (t1 - t0))
        assert 1 - sum(rates) / len(rates) == pytest.approx(want_busy)


# --------------------------------------------------------------------------- real Prometheus


@pytest.mark.prometheus
@pytest.mark.parametrize("metric", promdata.RECORDED_METRICS)
def test_recorded_metric_at_now_equals_the_node_shapes(
    prometheus_node_data: PromNodeData, metric: str
) -> None:
    t = prometheus_node_data.query_time()
    got = _by_instance(_query(prometheus_node_data, metric, t))
    want = prometheus_node_data.expected_by_instance(metric, t)
    assert sorted(got) == sorted(want)
    for instance, value in want.items():
        assert got[instance] == pytest.approx(value, abs=TOLERANCE_PP), instance


@pytest.mark.prometheus
@pytest.mark.parametrize("node", sorted(promdata.DEFAULT_NODE_PERCENTILES))
def test_recorded_percentiles_at_now_equal_the_node_shapes(
    prometheus_node_data: PromNodeData, node: str
) -> None:
    t = prometheus_node_data.query_time()
    instance = prometheus_node_data.node(node).instance
    assert instance is not None
    for metric, want in promdata.DEFAULT_NODE_PERCENTILES[node].items():
        got = _by_instance(_query(prometheus_node_data, f'{metric}{{instance="{instance}"}}', t))
        assert got[instance] == pytest.approx(want, abs=TOLERANCE_PP), metric


@pytest.mark.prometheus
def test_daily_peak_shows_in_max_avg_1d_but_not_in_max_avg_1h(
    prometheus_node_data: PromNodeData,
) -> None:
    t = prometheus_node_data.query_time()
    instance = prometheus_node_data.node("node-peak").instance
    assert instance is not None
    sel = f'{{instance="{instance}"}}'
    day = _by_instance(_query(prometheus_node_data, "cpu_usage_max_avg_1d" + sel, t))
    hour = _by_instance(_query(prometheus_node_data, "cpu_usage_max_avg_1h" + sel, t))
    assert day[instance] == pytest.approx(90, abs=TOLERANCE_PP)
    assert hour[instance] == pytest.approx(20, abs=TOLERANCE_PP)


@pytest.mark.prometheus
def test_recent_load_drop_shows_in_max_avg_1h_but_not_in_avg_5m(
    prometheus_node_data: PromNodeData,
) -> None:
    t = prometheus_node_data.query_time()
    instance = prometheus_node_data.node("node-cooling").instance
    assert instance is not None
    sel = f'{{instance="{instance}"}}'
    hour = _by_instance(_query(prometheus_node_data, "cpu_usage_max_avg_1h" + sel, t))
    now = _by_instance(_query(prometheus_node_data, "cpu_usage_avg_5m" + sel, t))
    assert hour[instance] == pytest.approx(80, abs=TOLERANCE_PP)
    assert now[instance] == pytest.approx(30, abs=TOLERANCE_PP)


@pytest.mark.prometheus
def test_recorded_series_carry_only_the_instance_label(
    prometheus_node_data: PromNodeData,
) -> None:
    t = prometheus_node_data.query_time()
    names = "|".join(promdata.RECORDED_METRICS + promdata.PERCENTILE_METRICS)
    result = _query(prometheus_node_data, f'{{__name__=~"{names}"}}', t)
    assert result
    assert {tuple(sorted(s["metric"])) for s in result} == {("__name__", "instance")}


@pytest.mark.prometheus
def test_node_without_series_gets_no_recorded_value(
    prometheus_node_data: PromNodeData,
) -> None:
    t = prometheus_node_data.query_time()
    node = prometheus_node_data.node("node-nodata")
    names = "|".join(promdata.RECORDED_METRICS)
    # Every form the annotator matches: InternalIP, IP:port, node name.
    candidates = f"{node.internal_ip}|{node.internal_ip}:[0-9]+|{node.name}"
    expr = f'{{__name__=~"{names}", instance=~"{candidates}"}}'
    assert _query(prometheus_node_data, expr, t) == []


def test_readme_node_label_rules_differ_from_shipped_only_by_the_node_label() -> None:
    readme = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL)
    variant = [b for b in blocks if "by (instance, node)" in b]
    assert len(variant) == 1, "README should show one node-label rules example"
    shown = {r["record"]: r["expr"] for r in yaml.safe_load(textwrap.dedent(variant[0]))}
    shipped = {r["record"]: r["expr"] for g in _load(PLAIN_RULES)["groups"] for r in g["rules"]}
    assert sorted(shown) == sorted(promdata.ACTIVE_METRICS)
    for record, expr in shown.items():
        assert expr == shipped[record].replace("by (instance)", "by (instance, node)")


# --------------------------------------------------------------------------- harness


@pytest.mark.prometheus
def test_empty_prometheus_answers_queries_with_no_series(
    empty_prometheus: PrometheusServer,
) -> None:
    query = {"query": "cpu_usage_avg_5m"}
    r = http_client.get(f"{empty_prometheus.url}/api/v1/query", params=query)
    assert r.json()["data"]["result"] == []


@pytest.mark.prometheus
def test_server_that_cannot_start_fails_with_its_log_tail(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = PrometheusServer(tmp_path, port=busy.getsockname()[1])
        with pytest.raises(PrometheusError, match="address already in use"):
            server.start(timeout=20)
    assert not server.running


@pytest.mark.prometheus
def test_bench_data_serves_each_metric_for_every_node() -> None:
    nodes = promdata.bench_nodes(40)
    now = time.time()
    with temporary_prometheus() as server:
        om = server.workdir / "bench.om"
        promdata.write_bench_openmetrics(om, nodes, now - 600, now + 600)
        import_openmetrics(om, server.tsdb_dir)
        server.start()
        for metric in promdata.DEFAULT_METRICS:
            r = http_client.get(f"{server.url}/api/v1/query", params={"query": metric, "time": now})
            got = _by_instance(r.json()["data"]["result"])
            assert got == {n.instance: promdata.bench_value(n.name, metric) for n in nodes}

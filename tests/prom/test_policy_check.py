"""``loadaware policy check FILE --prometheus-url URL`` against a real Prometheus (the
shipped rules over backfilled node data): a synced metric Prometheus has no series for
is one clear error, and every shipped metric, percentiles included, is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.policy import DEFAULT_POLICY_YAML
from tests.support.prom_fixtures import PromNodeData
from tests.support.promdata import PERCENTILE_METRICS

pytestmark = pytest.mark.prometheus


def _policy(tmp_path: Path, *metrics: str) -> str:
    sync = ", ".join(f"{{name: {m}, period: 15m}}" for m in metrics)
    path = tmp_path / "policy.yaml"
    path.write_text(f"spec:\n  syncPolicy: [{sync}]\n  hotValue: [{{timeRange: 5m, count: 5}}]\n")
    return str(path)


def test_every_shipped_metric_is_found_with_a_series_per_node(
    prometheus_node_data: PromNodeData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy(tmp_path, "cpu_usage_avg_5m", "mem_usage_max_avg_1d", *PERCENTILE_METRICS)
    code = main(["policy", "check", path, "--prometheus-url", prometheus_node_data.url])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    found = out.splitlines()[-1]
    assert found.startswith(f"prometheus: series at {prometheus_node_data.url}: ")
    for metric in ("cpu_usage_avg_5m", "mem_usage_max_avg_1d", *PERCENTILE_METRICS):
        assert f"{metric} 5" in found  # the five nodes with series


def test_the_crane_default_policy_is_found_whole(
    prometheus_node_data: PromNodeData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "crane.yaml"
    path.write_text(DEFAULT_POLICY_YAML)
    code = main(["policy", "check", str(path), "--prometheus-url", prometheus_node_data.url])
    assert code == 0, capsys.readouterr().err


def test_a_metric_prometheus_has_no_series_for_is_one_error_naming_it(
    prometheus_node_data: PromNodeData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy(tmp_path, "cpu_usage_avg_5m", "cpu_usage_p99_avg_6h", "mem_usage_p95_avg_1h")
    code = main(["policy", "check", path, "--prometheus-url", prometheus_node_data.url])
    out, err = capsys.readouterr()
    assert code == 2
    assert "cpu_usage_p99_avg_6h" in out  # the policy is still described
    [line] = err.splitlines()
    assert line.startswith(
        f"loadaware policy check: error: Prometheus at {prometheus_node_data.url} has no "
        "series for cpu_usage_p99_avg_6h: "
    )
    assert "install the recording rule" in line
    assert "mem_usage_p95_avg_1h" not in line  # that one is there


def test_a_metric_that_is_no_prometheus_name_is_said_not_looked_up(
    prometheus_node_data: PromNodeData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy(tmp_path, "cpu_usage_avg_5m", "example.com/gpu")
    code = main(["policy", "check", path, "--prometheus-url", prometheus_node_data.url])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "prometheus: not looked up: example.com/gpu (no Prometheus metric name" in out


def test_without_a_url_the_check_says_prometheus_was_not_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOADAWARE_PROMETHEUS_URL", raising=False)
    code = main(["policy", "check", _policy(tmp_path, "cpu_usage_p99_avg_6h")])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out.splitlines()[-1].startswith("prometheus: not asked (no --prometheus-url)")

"""``loadaware report --prometheus-url``: node-minutes above the policy's limits before
and after the evictions, and churn (container restarts), per node and per workload,
from a real Prometheus holding generated series; without them, unknown, not 0."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.cli import main
from app.kube import state
from app.objects import MoveRecord
from tests.explain.test_cli import kubeconfig
from tests.support.fakekube import CONFIGMAPS
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port
from tests.support.promserver import import_openmetrics, temporary_prometheus

pytestmark = pytest.mark.prometheus

NOW_S = time.time()
MOVE_S = NOW_S - 1800.0  # both moves: half an hour ago (the default --window)
STEP_S = 30
WEB = "shop/Deployment/web"
DB = "shop/StatefulSet/db"
IPS = {"hot-1": "10.0.0.1", "hot-2": "10.0.0.2", "cool": "10.0.0.3"}


def cpu_percent(node: str) -> Callable[[float], float]:
    """hot-1 is at 90 % until the move, then 50 %; hot-2 stays at 90 %; cool at 20 %."""
    if node == "hot-1":
        return lambda t: 90.0 if t < MOVE_S else 50.0
    if node == "hot-2":
        return lambda t: 90.0
    return lambda t: 20.0


def restarts_of_web_1(t: float) -> float:
    """web-1 (on hot-2) restarted three times an hour ago; db-0 never."""
    return 0.0 if t < NOW_S - 3600 else 3.0


def write_series(path: Path) -> None:
    times = range(int(NOW_S - 7200) // STEP_S * STEP_S, int(NOW_S + 600), STEP_S)
    lines = ["# TYPE cpu_usage_avg_5m gauge"]
    for node, ip in IPS.items():
        shape = cpu_percent(node)
        lines += [f'cpu_usage_avg_5m{{instance="{ip}:9100"}} {shape(t)} {t}' for t in times]
    for metric in ("mem_usage_avg_5m", "cpu_usage_max_avg_1h", "mem_usage_max_avg_1h"):
        lines += [f"# TYPE {metric} gauge"]  # every limited metric has series, below 75 %
        for ip in IPS.values():
            lines += [f'{metric}{{instance="{ip}:9100"}} 30 {t}' for t in times]
    lines += ["# TYPE kube_pod_container_status_restarts counter"]
    for pod, count in (("web-1", restarts_of_web_1), ("db-0", lambda t: 0.0)):
        labels = f'namespace="shop",pod="{pod}",container="app"'
        lines += [f"kube_pod_container_status_restarts_total{{{labels}}} {count(t)} {t}"
                  for t in times]  # fmt: skip
    path.write_text("\n".join([*lines, "# EOF", ""]), encoding="utf-8")


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    with temporary_prometheus("loadaware-report-") as server:
        path = server.workdir / "series.om"
        write_series(path)
        import_openmetrics(path, server.tsdb_dir)
        server.start()
        yield server.url


@pytest.fixture
def cluster(fake_kube: FakeKube, tmp_path: Path) -> str:
    """The memory (one judged move from each hot node), the nodes and the pods; the
    kubeconfig's path."""
    saved_state = state.DeschedulerState()
    for move in (
        MoveRecord("hot-1", MOVE_S, "cpu", 0.9, 0.2, 0.6, "cool", 1, (WEB,),
                   outcome="helped", judged_at_s=MOVE_S + 300, attributed=0.2, reason="r"),
        MoveRecord("hot-2", MOVE_S, "cpu", 0.9, 0.1, 0.7, "cool", 1, (DB,),
                   outcome="no effect", judged_at_s=MOVE_S + 300, reason="r"),
    ):  # fmt: skip
        saved_state.moves[move.key] = move
    fake_kube.store.add(CONFIGMAPS, {
        "metadata": {"name": state.DEFAULT_NAME, "namespace": "loadaware"},
        "data": {state.STATE_KEY: state.encode(saved_state, NOW_S - 3600)},
    })  # fmt: skip
    for node, ip in IPS.items():
        fake_kube.store.add_node(node, internal_ip=ip)
    fake_kube.store.add_pod("web-1", "shop", node_name="hot-2", owner=("ReplicaSet", "web-5d8f9"))
    fake_kube.store.add_pod("db-0", "shop", node_name="hot-2", owner=("StatefulSet", "db"))
    return kubeconfig(tmp_path / "kubeconfig", fake_kube.url)


def report_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["report", *argv, "-o", "json"]) == 0
    summary: dict[str, object] = json.loads(capsys.readouterr().out)
    return summary


def test_node_minutes_above_the_limits_before_and_after_each_eviction(
    cluster: str, prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = report_json(["--kubeconfig", cluster, "--prometheus-url", prometheus_url], capsys)
    nodes = summary["nodes"]
    assert isinstance(nodes, dict)
    hot_1, hot_2 = nodes["hot-1"]["minutesAboveLimits"], nodes["hot-2"]["minutesAboveLimits"]
    # hot-1 was above cpu_usage_avg_5m's 65 % for the half hour before its eviction and
    # not after it (the 5-minute lookback of the last hot sample aside); hot-2 throughout.
    assert hot_1["beforeOf"] == pytest.approx(30, abs=1)
    assert hot_1["before"] == pytest.approx(30, abs=1)
    assert hot_1["after"] <= 1
    assert hot_2["before"] == pytest.approx(30, abs=1)
    assert hot_2["after"] == pytest.approx(hot_2["afterOf"], abs=1)
    assert hot_2["afterOf"] >= 29
    total = summary["total"]
    assert isinstance(total, dict)
    assert total["minutesAboveLimits"]["before"] == pytest.approx(60, abs=2)
    # The workloads carry their source's minutes.
    assert summary["workloads"][WEB]["minutesAboveLimits"] == hot_1  # type: ignore[index]
    assert summary["notes"] == []


def test_churn_is_container_restarts_per_node_and_workload(
    cluster: str, prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = report_json(["--kubeconfig", cluster, "--prometheus-url", prometheus_url], capsys)
    assert summary["total"]["restarts"] == 3  # type: ignore[index]
    assert summary["nodes"]["hot-2"]["restarts"] == 3  # type: ignore[index]
    assert summary["nodes"]["hot-1"]["restarts"] == 0  # type: ignore[index]
    assert summary["workloads"][DB]["restarts"] == 0  # type: ignore[index]
    # A shorter period, after the restarts: none.
    later = report_json(
        ["--kubeconfig", cluster, "--prometheus-url", prometheus_url, "--since", "40m"], capsys
    )
    assert later["total"]["restarts"] == 0  # type: ignore[index]


def test_the_text_report_has_the_columns_and_their_legend(
    cluster: str, prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--kubeconfig", cluster, "--prometheus-url", prometheus_url]) == 0
    out = capsys.readouterr().out
    assert "hot-bef" in out
    assert "restarts" in out
    assert "node-minutes above the policy's limits within 30m" in out
    row = next(line for line in out.splitlines() if line.startswith("hot-2 "))
    assert row.split()[-1] == "3"


def test_without_prometheus_the_minutes_and_restarts_are_unknown_not_zero(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = report_json(["--kubeconfig", cluster], capsys)
    assert summary["total"]["minutesAboveLimits"] is None  # type: ignore[index]
    assert summary["total"]["restarts"] is None  # type: ignore[index]
    down = f"http://127.0.0.1:{free_port()}"
    assert main(["report", "--kubeconfig", cluster, "--prometheus-url", down, "-o", "json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["total"]["evictions"]["helped"] == 1
    assert summary["nodes"]["hot-1"]["minutesAboveLimits"] is None
    assert summary["nodes"]["hot-1"]["restarts"] is None
    assert len(summary["notes"]) == 2
    assert "Traceback" not in captured.err
    assert "cannot connect to Prometheus" in captured.err


def test_limits_whose_metrics_have_no_series_are_unknown_not_zero(
    cluster: str, prometheus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A selector that matches nothing (or rules not loaded): no minute above the
    limits is known, which is not the same as none; restarts are still read."""
    argv = ["--kubeconfig", cluster, "--prometheus-url", prometheus_url,
            "--query-selector", 'cluster="elsewhere"']  # fmt: skip
    summary = report_json(argv, capsys)
    assert summary["nodes"]["hot-1"]["minutesAboveLimits"] is None  # type: ignore[index]
    assert summary["total"]["restarts"] == 3  # type: ignore[index]
    notes = summary["notes"]
    assert isinstance(notes, list)
    assert any("cpu_usage_avg_5m: no series at all" in n for n in notes), notes

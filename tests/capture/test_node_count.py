"""Issue 43: a capture carries the cluster's node count over time (``observed.nodeCount``,
one ``count(...)`` query against a real Prometheus), so that a replay under the
``+autoscaler`` policies sets their node-hours beside what the cluster really ran."""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
import pytest
from lightkube.resources.core_v1 import Node, Pod

from app.capture.catalog import build_catalog
from app.capture.document import Names, observed
from app.capture.history import record
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.simulate.main import observed_node_hours_line
from app.simulate.scenario import ScenarioError, scenario_from_mapping
from tests.support.usage_history import PodHistory, usage_history_prometheus

GI = 2.0**30
HOUR = 3600.0
STEP_S = 300.0


def _pod(name: str, node: str) -> Pod:
    return cast(Pod, Pod.from_dict({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }))  # fmt: skip


def _node(name: str) -> Node:
    return cast(Node, Node.from_dict({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}},
    }))  # fmt: skip


@pytest.mark.prometheus
def test_a_capture_counts_the_nodes_that_ran_at_each_point() -> None:
    end_s = float(int(time.time()) // 60 * 60)
    start_s = end_s - 3 * HOUR
    usage = lambda t: (0.2, 1 * GI)  # noqa: E731
    pods = [
        PodHistory("shop", "web-0", "n1", usage),
        PodHistory("shop", "web-1", "n2", usage),
        # n3 ran from 1 h to 2 h (a scale-up the autoscaler took back): gone from the
        # API server now, counted while it ran
        PodHistory("shop", "web-2", "n3", usage, since_s=1 * HOUR, until_s=2 * HOUR),
    ]
    catalog = build_catalog([_node("n1"), _node("n2")], [_pod("web-0", "n1"),
                            _pod("web-1", "n2")], {}, [])  # fmt: skip
    with usage_history_prometheus(pods, start_s - 600, end_s, 60.0, (), start_s) as url:
        source = PrometheusSource(PrometheusSettings(url=url, timeout_s=10.0))
        try:
            _, nodes, _, stats = record(source, catalog, start_s, end_s, STEP_S)
        finally:
            source.close()
    count = nodes.counted()
    assert count is not None
    times = np.arange(len(count)) * STEP_S
    # n3's last sample stays visible for Prometheus' 5-minute lookback
    ran_three = (times >= 1 * HOUR) & (times <= 2 * HOUR)
    ran_two = (times < 1 * HOUR) | (times > 2 * HOUR + 300)
    assert set(count[ran_three].tolist()) == {3.0}
    assert set(count[ran_two].tolist()) == {2.0}
    assert stats.queries >= 1

    document: dict[str, Any] | None = observed(nodes, catalog, STEP_S, Names())
    assert document is not None
    assert document["nodeCount"] == count.tolist()
    scenario = scenario_from_mapping({
        "name": "captured", "duration": "3h", "step": "30s",
        "nodes": [{"name": "n", "count": 2, "cpu": 4, "memory": "16Gi", "names": ["n1", "n2"]}],
        "workloads": [], "observed": document,
    }, "test")  # fmt: skip
    assert scenario.observed is not None
    ran = scenario.observed.node_hours(scenario.duration_s)
    assert ran is not None
    assert ran == pytest.approx(float(count[:36].sum()) * STEP_S / HOUR)
    assert 6.0 < ran < 7.5  # two nodes for 3 h, a third for about an hour
    assert f"ran {ran:.1f} node-hours" in observed_node_hours_line(ran)


def test_a_scenario_without_a_node_count_has_no_observed_node_hours() -> None:
    scenario = scenario_from_mapping({
        "name": "captured", "duration": "1h", "step": "30s",
        "nodes": [{"name": "n", "count": 1, "cpu": 4, "memory": "16Gi"}], "workloads": [],
        "observed": {"interval": "5m", "nodes": []},
    }, "test")  # fmt: skip
    assert scenario.observed is not None
    assert scenario.observed.node_hours(scenario.duration_s) is None
    with pytest.raises(ScenarioError, match="greater than or equal to 0"):
        scenario_from_mapping({
            "name": "captured", "duration": "1h", "step": "30s",
            "nodes": [{"name": "n", "count": 1, "cpu": 4, "memory": "16Gi"}], "workloads": [],
            "observed": {"interval": "5m", "nodeCount": [1, -2]},
        }, "test")  # fmt: skip

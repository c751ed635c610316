"""Sizing every node without making its readings gives what the readings give.

``measure_nodes`` reads each node's balanced metrics with ``read_fraction`` and makes
the node's full readings (``read_usage``) only when the plan uses them. These tests
hold it to the readings: the same usage, the same reason a node has no data, the same
readings when asked, for every way an annotation can be wrong."""

from __future__ import annotations

import dataclasses

import pytest

from app.load import read_usage
from app.load.samples import format_usage
from app.objects.evictions import EvictionRecord
from app.objects.resources import Resources
from app.rebalance.config import DeschedulerConfig
from app.rebalance.measure import measure_nodes, usage_of
from tests.rebalance.builders import NOW, POLICY, config, load_annotations, node

BROKEN = {
    "fresh": load_annotations(0.9, 0.4),
    "stale": load_annotations(0.9, 0.4, age_s=3600.0),
    "future": load_annotations(0.9, 0.4, age_s=-3600.0),
    "cpu-missing": {k: v for k, v in load_annotations(0.9).items() if k != "cpu_usage_avg_5m"},
    "mem-missing": {k: v for k, v in load_annotations(0.9).items() if k != "mem_usage_avg_5m"},
    "unreadable": {**load_annotations(0.5), "cpu_usage_avg_5m": "lots,yesterday"},
    "percent": {**load_annotations(0.5), "mem_usage_avg_5m": format_usage(63.0, NOW - 30)},
    "no-annotations": {},
}


def _nodes() -> list:  # type: ignore[type-arg]
    nodes = [node(name, 0.0, raw=raw) for name, raw in BROKEN.items()]
    zero = dataclasses.replace(node("no-allocatable", 0.8), allocatable=Resources(0.0, 0.0))
    return [*nodes, zero]


def _check(settings: DeschedulerConfig, records: tuple[EvictionRecord, ...] = ()) -> None:
    nodes = _nodes()
    metrics = tuple(dict.fromkeys(settings.metrics.values()))
    measured = measure_nodes(nodes, settings, POLICY, NOW, records)
    for n in nodes:
        if n.name in {r.node for r in records}:
            continue  # its readings carry unsampled usage: test_convergence's business
        readings = read_usage(n.annotations, POLICY, NOW, metrics)
        usage, missing = usage_of(n, readings, settings)
        got = measured[n.name]
        assert (dict(got.usage_fraction), got.missing) == (usage, missing), n.name
        assert dict(got.readings) == readings, n.name


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"targetThresholds": {"cpu": 70}, "thresholds": {"cpu": 20}},
        {"metrics": {"cpu": "cpu_usage_max_avg_1h", "memory": "mem_usage_max_avg_1d"}},
        # A metric the policy does not sync: every node lacks it.
        {"metrics": {"cpu": "cpu_usage_avg_15m", "memory": "mem_usage_avg_5m"}},
    ],
)
def test_sizing_without_readings_matches_the_readings(fields: dict[str, object]) -> None:
    _check(config(**fields))


def test_the_reasons_a_node_has_no_data_are_the_readings_reasons() -> None:
    measured = measure_nodes(_nodes(), config(), POLICY, NOW, ())
    assert measured["fresh"].missing is None
    assert measured["fresh"].usage_fraction == {"cpu": 0.9, "memory": 0.4}
    assert measured["stale"].missing == "cpu_usage_avg_5m is stale"
    assert measured["cpu-missing"].missing == "cpu_usage_avg_5m is missing"
    assert measured["mem-missing"].missing == "mem_usage_avg_5m is missing"
    assert measured["unreadable"].missing == "cpu_usage_avg_5m is unreadable"
    assert measured["percent"].missing == "mem_usage_avg_5m is unreadable"
    assert measured["no-allocatable"].missing == "allocatable cpu is unknown"


def test_a_node_a_recent_eviction_names_still_gets_its_unsampled_usage() -> None:
    record = EvictionRecord(
        pod_key="default/p",
        uid="u",
        node="fresh",
        destination="stale",
        usage=Resources(2.0, 0.0),
        evicted_at_s=NOW - 10,
        workload=None,
    )
    settings = config()
    _check(settings, (record,))
    measured = measure_nodes(_nodes(), settings, POLICY, NOW, (record,))
    # The source's sample (30 s old) predates the eviction: 2 of its 10 cores left it.
    assert measured["fresh"].usage_fraction["cpu"] == pytest.approx(0.7)

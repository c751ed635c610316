"""Percentile metrics synced from a real Prometheus (the shipped rules over backfilled
node data), and the metrics the annotator cannot sync: one Prometheus has no series
for, and a reloaded policy naming an annotation key. Each is a failed sync that says
why, in the log, in /status and in the metrics; never a traceback, never a made-up value."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from app.annotator.annotator import Annotator, AnnotatorConfig
from app.load.samples import parse_usage
from tests.annotator.helpers import annotator, eventually, metric_value, node_annotations, policy
from tests.annotator.helpers import running as running_annotator
from tests.annotator.promproxy import PromProxy
from tests.support.fakekube_fixtures import FakeKube
from tests.support.prom_fixtures import PromNodeData
from tests.support.promdata import DEFAULT_NODE_PERCENTILES, PERCENTILE_METRICS

MISSING = "cpu_usage_p99_avg_6h"  # well formed, but no shipped rule records it


@pytest.fixture
def cluster(fake_kube: FakeKube, prometheus_node_data: PromNodeData) -> PromNodeData:
    for spec in prometheus_node_data.nodes:
        fake_kube.store.add_node(spec.name, internal_ip=spec.internal_ip)
    return prometheus_node_data


async def _first_tick(fake_kube: FakeKube, url: str, **config: Any) -> dict[str, Any]:
    """Start an annotator (no leader election), wait for its first tick; its /status."""
    async with fake_kube.async_client() as client:
        the_annotator = annotator(fake_kube, client, url, **config)
        async with running_annotator(the_annotator):
            assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 15)
            return {
                "metrics": the_annotator.metric_loop.details(),
                "errors": {
                    m: metric_value(
                        the_annotator, "loadaware_annotator_query_errors_total",
                        {"metric": m, "reason": "no_series"},
                    )
                    for m in the_annotator.metric_loop.states
                },
                "failed_syncs": {
                    m: metric_value(
                        the_annotator, "loadaware_annotator_syncs_total",
                        {"metric": m, "result": "error"},
                    )
                    for m in the_annotator.metric_loop.states
                },
            }  # fmt: skip


@pytest.mark.prometheus
def test_the_shipped_percentiles_reach_each_node_as_its_load_shapes_say(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    the_policy = policy(dict.fromkeys(PERCENTILE_METRICS, "15m"))
    status = asyncio.run(_first_tick(fake_kube, prom_proxy.url, the_policy=the_policy))
    assert all(s["last_error"] is None for s in status["metrics"].values()), status
    checked = 0
    for node, wants in DEFAULT_NODE_PERCENTILES.items():
        written = node_annotations(fake_kube, node)
        for metric, want in wants.items():
            sample = parse_usage(written[metric])
            assert sample is not None, (node, metric, written[metric])
            assert sample.value * 100 == pytest.approx(want, abs=1.0), (node, metric)
            checked += 1
    assert checked == 38
    # One query per metric for every node, as for crane's metrics.
    assert sorted(prom_proxy.queries()) == sorted(PERCENTILE_METRICS)
    # A node with no series gets no value, and no other node's.
    assert not set(node_annotations(fake_kube, "node-nodata")) & set(PERCENTILE_METRICS)


@pytest.mark.prometheus
def test_a_metric_prometheus_has_no_series_for_is_a_failed_sync_that_says_why(
    fake_kube: FakeKube,
    cluster: PromNodeData,
    prom_proxy: PromProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    the_policy = policy({"cpu_usage_avg_5m": "1h", MISSING: "1h"})
    with caplog.at_level(logging.INFO):
        status = asyncio.run(_first_tick(fake_kube, prom_proxy.url, the_policy=the_policy))
    missing = status["metrics"][MISSING]
    assert missing["last_success"] is None
    assert missing["last_error"].startswith(f"Prometheus has no series for {MISSING}: ")
    assert "recording rule is not installed" in missing["last_error"]
    assert status["errors"][MISSING] == 1
    assert status["failed_syncs"][MISSING] == 1
    # The metric that exists syncs as ever, in the same tick.
    assert status["metrics"]["cpu_usage_avg_5m"]["last_error"] is None
    written = node_annotations(fake_kube, "node-busy")
    assert "cpu_usage_avg_5m" in written
    assert MISSING not in written
    said = [r for r in caplog.records
            if r.name == "app.annotator.sync" and MISSING in r.getMessage()]  # fmt: skip
    assert [r.levelno for r in said] == [logging.ERROR]
    assert "no series" in said[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)


def test_a_reloaded_policy_syncing_an_annotation_key_fails_that_metric_alone_without_a_traceback(
    fake_kube: FakeKube, static_prom: PromProxy, caplog: pytest.LogCaptureFixture
) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")
    static_prom.static_result = [
        {"metric": {"instance": "10.0.0.1"}, "value": [1.0e9, "42"]}
    ]  # fmt: skip
    key = "example.com/cpu-usage"

    async def scenario() -> dict[str, Any]:
        async with fake_kube.async_client() as client:
            the_annotator: Annotator = annotator(
                fake_kube, client, static_prom.url, the_policy=policy({"cpu_usage_avg_5m": "1h"})
            )
            async with running_annotator(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 5)
                the_annotator.policy_in_force.adopt(
                    policy({"cpu_usage_avg_5m": "1h", key: "1h"})
                )
                assert await eventually(
                    lambda: the_annotator.metric_loop.states[key].last_error is not None
                    if key in the_annotator.metric_loop.states else False, 5,
                )  # fmt: skip
                return dict(the_annotator.metric_loop.details())

    with caplog.at_level(logging.INFO):
        details = asyncio.run(scenario())
    assert "is not a Prometheus metric name" in details[key]["last_error"]
    assert details["cpu_usage_avg_5m"]["last_error"] is None
    assert static_prom.queries().count(key) == 0
    assert not any(r.exc_info for r in caplog.records)


def test_an_annotator_started_on_a_policy_syncing_an_annotation_key_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'example.com/cpu' is not a Prometheus metric name"):
        AnnotatorConfig(policy=policy({"example.com/cpu": "1m"}))

"""A sync against the real Prometheus (shipped rules over backfilled node data) and the
fake API server: the right values reach the right nodes, with one query per metric and
one patch per node."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from app.annotator.sync import QueryShape
from app.load.samples import HOT_VALUE_KEY, parse_hot_value, parse_usage
from tests.annotator.helpers import annotator, eventually, metric_value, node_annotations, running
from tests.annotator.promproxy import PromProxy
from tests.support.fakekube_fixtures import FakeKube
from tests.support.prom_fixtures import PromNodeData
from tests.support.promdata import DEFAULT_METRICS

pytestmark = pytest.mark.prometheus

FOREIGN = {"team.example.com/owner": "storage", "node.alpha.kubernetes.io/ttl": "0"}
OLD_VALUE = "0.12345,2026-01-01T00:00:00Z"


@pytest.fixture
def cluster(fake_kube: FakeKube, prometheus_node_data: PromNodeData) -> PromNodeData:
    for spec in prometheus_node_data.nodes:
        extra = {"cpu_usage_avg_5m": OLD_VALUE} if not spec.has_series else {}
        fake_kube.store.add_node(
            spec.name, internal_ip=spec.internal_ip, annotations={**FOREIGN, **extra}
        )
    return prometheus_node_data


async def one_sync(fake_kube: FakeKube, prom: PromProxy, **config: object) -> None:
    """Start an annotator (no leader election), wait for its first tick, stop it."""
    async with fake_kube.async_client() as client:
        the_annotator = annotator(fake_kube, client, prom.url, **config)  # type: ignore[arg-type]
        async with running(the_annotator):
            assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 15)
        return None


def test_every_metric_lands_within_one_point_of_the_generated_load(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy))
    t = cluster.query_time()
    checked = 0
    for spec in cluster.nodes_with_series:
        written = node_annotations(fake_kube, spec.name)
        for metric in DEFAULT_METRICS:
            sample = parse_usage(written[metric])
            assert sample is not None, (spec.name, metric, written[metric])
            want = cluster.expected(spec, metric, t)
            assert want is not None
            assert sample.value * 100 == pytest.approx(want, abs=1.0), (spec.name, metric)
            checked += 1
    assert checked == 5 * 6


def test_a_node_busy_70_percent_and_a_daily_peak_read_as_expected(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy))
    busy = parse_usage(node_annotations(fake_kube, "node-busy")["cpu_usage_avg_5m"])
    peak = node_annotations(fake_kube, "node-peak")
    assert busy is not None
    assert busy.value == pytest.approx(0.70, abs=0.01)
    day_peak = parse_usage(peak["cpu_usage_max_avg_1d"])
    last_5m = parse_usage(peak["cpu_usage_avg_5m"])
    assert day_peak is not None
    assert day_peak.value == pytest.approx(0.90, abs=0.01)
    assert last_5m is not None
    assert last_5m.value == pytest.approx(0.20, abs=0.01)


def test_timestamps_are_real_utc_of_the_query(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    before = time.time()
    asyncio.run(one_sync(fake_kube, prom_proxy))
    after = time.time()
    raw = node_annotations(fake_kube, "node-cool")["mem_usage_avg_5m"]
    assert raw.endswith("Z")
    sample = parse_usage(raw)
    assert sample is not None
    assert before - 1 <= sample.timestamp_s <= after + 1


def test_ip_port_bare_ip_and_name_instances_all_match(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy))
    forms = {
        "node-busy": "10.0.0.1:9100",  # IP:port
        "node-peak": "10.0.0.2",  # bare InternalIP
        "node-memhot": "node-memhot",  # node name
    }
    for node, instance in forms.items():
        assert cluster.node(node).instance == instance
        assert "cpu_usage_avg_5m" in node_annotations(fake_kube, node), node


def test_a_node_without_series_keeps_its_old_annotation_and_is_counted(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    async def scenario() -> float:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, prom_proxy.url)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 15)
            return metric_value(
                the_annotator,
                "loadaware_annotator_nodes_without_data",
                {"metric": "cpu_usage_avg_5m"},
            )

    without_data = asyncio.run(scenario())
    assert without_data == 1
    written = node_annotations(fake_kube, "node-nodata")
    assert written["cpu_usage_avg_5m"] == OLD_VALUE
    assert HOT_VALUE_KEY not in written
    assert not set(DEFAULT_METRICS[1:]) & written.keys()
    assert not fake_kube.requests("PATCH", "/api/v1/nodes/node-nodata")


def test_annotations_that_are_not_loadaware_s_are_untouched(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy))
    for spec in cluster.nodes:
        written = node_annotations(fake_kube, spec.name)
        assert {k: written[k] for k in FOREIGN} == FOREIGN
        ours = set(DEFAULT_METRICS) | {HOT_VALUE_KEY}
        assert set(written) <= ours | set(FOREIGN), spec.name


def test_one_query_per_metric_and_one_patch_per_node(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy))
    assert sorted(prom_proxy.queries()) == sorted(DEFAULT_METRICS)
    patches = fake_kube.requests("PATCH", "/api/v1/nodes/*")
    per_node = Counter(r.path.rsplit("/", 1)[1] for r in patches)
    assert per_node == {spec.name: 1 for spec in cluster.nodes_with_series}
    for request in patches:
        assert request.content_type == "application/merge-patch+json"
        carried = request.body["metadata"]["annotations"]
        assert set(carried) == {*DEFAULT_METRICS, HOT_VALUE_KEY}
        hot = parse_hot_value(carried[HOT_VALUE_KEY])
        assert hot is not None
        assert hot.value == 0


def test_query_selector_is_added_to_every_query_and_filters_series(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    # The recording rules aggregate by instance, so instance is the label left to select on.
    selector = 'instance=~"10[.]0[.]0[.][12](:.*)?"'
    asyncio.run(one_sync(fake_kube, prom_proxy, shape=QueryShape(selector=selector)))
    assert sorted(prom_proxy.queries()) == sorted(f"{m}{{{selector}}}" for m in DEFAULT_METRICS)
    patched = {r.path.rsplit("/", 1)[1] for r in fake_kube.requests("PATCH", "/api/v1/nodes/*")}
    assert patched == {"node-busy", "node-peak"}


def test_a_selector_that_matches_nothing_writes_nothing(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    asyncio.run(one_sync(fake_kube, prom_proxy, shape=QueryShape(selector='job="absent"')))
    assert not fake_kube.requests("PATCH", "/api/v1/nodes/*")


def test_only_the_metrics_that_are_due_are_queried_and_written(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    from tests.annotator.helpers import policy

    fast = policy({"cpu_usage_avg_5m": "1s", "mem_usage_max_avg_1d": "1h"})

    async def scenario() -> None:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, prom_proxy.url, the_policy=fast)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 3, 15)

    asyncio.run(scenario())
    queries = Counter(prom_proxy.queries())
    assert queries["mem_usage_max_avg_1d"] == 1
    assert queries["cpu_usage_avg_5m"] >= 3
    later = fake_kube.requests("PATCH", "/api/v1/nodes/node-busy")[1:]
    assert later
    assert all(
        set(r.body["metadata"]["annotations"]) == {"cpu_usage_avg_5m", HOT_VALUE_KEY} for r in later
    )


def test_the_annotator_s_own_metrics_describe_the_sync(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    async def scenario() -> str:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, prom_proxy.url)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 15)
            return generate_latest(the_annotator.telemetry.registry).decode()

    exposition = asyncio.run(scenario())
    families = {f.name: f for f in text_string_to_metric_families(exposition)}
    for metric in DEFAULT_METRICS:
        labels = {"metric": metric}
        assert value_of(families, "loadaware_annotator_nodes_annotated", labels) == 5
        assert value_of(families, "loadaware_annotator_nodes_without_data", labels) == 1
        assert value_of(families, "loadaware_annotator_sync_duration_seconds_count", labels) == 1
        assert 0 <= value_of(families, "loadaware_annotator_newest_sample_age_seconds", labels) < 60
    assert value_of(families, "loadaware_annotator_is_leader", {}) == 1
    assert (
        value_of(
            families, "loadaware_annotator_patches_total", {"kind": "metrics", "outcome": "written"}
        )
        == 5
    )


def value_of(families: dict[str, Metric], sample_name: str, labels: dict[str, str]) -> float:
    for family in families.values():
        for sample in family.samples:
            if sample.name == sample_name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no sample {sample_name}{labels} in the exposition")

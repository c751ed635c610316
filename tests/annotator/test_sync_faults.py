"""When Prometheus or the API server misbehaves, the sync reports it and carries on."""

from __future__ import annotations

import asyncio
from types import MappingProxyType

import pytest

from app.annotator.annotator import Annotator
from app.annotator.sync import MetricSync
from app.annotator.telemetry import AnnotatorMetrics
from app.kube.nodes import NodeInfo
from app.kube.patching import AnnotationPatcher, PatchOutcome
from tests.annotator.helpers import (
    annotator,
    eventually,
    metric_value,
    node_annotations,
    policy,
    running,
    source,
)
from tests.annotator.promproxy import PromProxy, ProxyBehaviour
from tests.support.fakekube import NODES
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port
from tests.support.prom_fixtures import PromNodeData
from tests.support.promdata import DEFAULT_METRICS

pytestmark = pytest.mark.prometheus

OLD_VALUE = "0.12345,2026-01-01T00:00:00Z"
CPU = "cpu_usage_avg_5m"


@pytest.fixture
def cluster(fake_kube: FakeKube, prometheus_node_data: PromNodeData) -> PromNodeData:
    for spec in prometheus_node_data.nodes:
        fake_kube.store.add_node(
            spec.name,
            internal_ip=spec.internal_ip,
            annotations=dict.fromkeys(DEFAULT_METRICS, OLD_VALUE),
        )
    return prometheus_node_data


def errors(the_annotator: Annotator, reason: str, metric: str = CPU) -> float:
    return metric_value(
        the_annotator,
        "loadaware_annotator_query_errors_total",
        {"metric": metric, "reason": reason},
    )


async def recover_after(
    fake_kube: FakeKube, prom: PromProxy, behaviour: ProxyBehaviour, reason: str
) -> Annotator:
    """Make the first tick fail as ``behaviour`` says; the retry must annotate."""
    prom.behave(behaviour)
    async with fake_kube.async_client() as client:
        the_annotator = annotator(
            fake_kube, client, prom.url, query_timeout_s=1.0, first_retry_s=0.2
        )
        async with running(the_annotator):
            assert await eventually(lambda: errors(the_annotator, reason) >= 1, 10)
            assert node_annotations(fake_kube, "node-busy")[CPU] == OLD_VALUE
            state = the_annotator.metric_loop.states[CPU]
            assert await eventually(lambda: state.last_success_s is not None, 10)
        assert node_annotations(fake_kube, "node-busy")[CPU] != OLD_VALUE
        return the_annotator


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (ProxyBehaviour(status=503, times=6), "http"),
        (ProxyBehaviour(delay_s=2.5, times=6), "timeout"),
        (ProxyBehaviour(body=b"<html>Please log in</html>", times=6), "bad_response"),
        (
            ProxyBehaviour(
                body=b'{"status":"success","data":{"resultType":"scalar","result":[1, "2"]}}',
                times=6,
            ),
            "bad_response",
        ),
    ],
    ids=["503", "slow", "html", "scalar"],
)
def test_a_failed_query_is_counted_and_the_retry_annotates(
    fake_kube: FakeKube,
    cluster: PromNodeData,
    prom_proxy: PromProxy,
    behaviour: ProxyBehaviour,
    reason: str,
) -> None:
    the_annotator = asyncio.run(recover_after(fake_kube, prom_proxy, behaviour, reason))
    assert the_annotator.metric_loop.states[CPU].last_error is None
    assert errors(the_annotator, reason) == 1


def test_an_unreachable_prometheus_is_reported_and_retried(
    fake_kube: FakeKube, cluster: PromNodeData
) -> None:
    dead_url = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, dead_url, first_retry_s=0.1)
            async with running(the_annotator):
                assert await eventually(lambda: errors(the_annotator, "connection") >= 2, 10)
            return the_annotator

    the_annotator = asyncio.run(scenario())
    last_error = the_annotator.metric_loop.states[CPU].last_error
    assert "cannot connect to Prometheus" in (last_error or "")
    assert not fake_kube.requests("PATCH", "/api/v1/nodes/*")


async def first_tick(fake_kube: FakeKube, prometheus_url: str) -> Annotator:
    """Run an annotator until its first sync tick has finished, then stop it."""
    async with fake_kube.async_client() as client:
        the_annotator = annotator(fake_kube, client, prometheus_url)
        async with running(the_annotator):
            assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 10)
        return the_annotator


def test_nan_inf_and_negative_samples_are_dropped_counted_and_never_written(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    prom_proxy.behave(
        ProxyBehaviour(values={"10.0.0.1:9100": "NaN", "10.0.0.2": "+Inf", "node-memhot": "-3"})
    )

    the_annotator = asyncio.run(first_tick(fake_kube, prom_proxy.url))
    for node in ("node-busy", "node-peak", "node-memhot"):
        assert node_annotations(fake_kube, node)[CPU] == OLD_VALUE, node
    assert node_annotations(fake_kube, "node-cool")[CPU] != OLD_VALUE
    for reason in ("nan", "infinite", "negative"):
        for metric in DEFAULT_METRICS:
            dropped = metric_value(
                the_annotator,
                "loadaware_annotator_invalid_samples_dropped_total",
                {"metric": metric, "reason": reason},
            )
            assert dropped == 1, (reason, metric)
    assert (
        metric_value(the_annotator, "loadaware_annotator_nodes_without_data", {"metric": CPU}) == 4
    )  # three invalid, one without series


def test_a_409_on_patch_is_retried_and_written(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    fake_kube.fail_next("PATCH", "/api/v1/nodes/node-busy", 409)

    the_annotator = asyncio.run(first_tick(fake_kube, prom_proxy.url))
    assert node_annotations(fake_kube, "node-busy")[CPU] != OLD_VALUE
    assert len(fake_kube.requests("PATCH", "/api/v1/nodes/node-busy")) == 2
    assert (
        metric_value(
            the_annotator, "loadaware_annotator_patch_retries_total", {"reason": "conflict"}
        )
        == 1
    )
    assert (
        metric_value(
            the_annotator,
            "loadaware_annotator_patch_errors_total",
            {"kind": "metrics", "reason": "conflict"},
        )
        == 0
    )


def test_a_node_that_keeps_answering_500_is_counted_skipped_and_written_next_tick(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    fake_kube.fail_next("PATCH", "/api/v1/nodes/node-busy", 500, times=3)
    fast = policy({CPU: "1s"})

    async def scenario() -> Annotator:
        async with fake_kube.async_client() as client:
            the_annotator = annotator(fake_kube, client, prom_proxy.url, the_policy=fast)
            async with running(the_annotator):
                assert await eventually(lambda: the_annotator.metric_loop.ticks >= 1, 10)
                assert node_annotations(fake_kube, "node-busy")[CPU] == OLD_VALUE
                assert node_annotations(fake_kube, "node-cool")[CPU] != OLD_VALUE
                assert await eventually(
                    lambda: node_annotations(fake_kube, "node-busy")[CPU] != OLD_VALUE, 5
                )
            return the_annotator

    the_annotator = asyncio.run(scenario())
    assert (
        metric_value(
            the_annotator,
            "loadaware_annotator_patch_errors_total",
            {"kind": "metrics", "reason": "server_error"},
        )
        == 1
    )
    assert (
        metric_value(
            the_annotator, "loadaware_annotator_patch_retries_total", {"reason": "server_error"}
        )
        == 2
    )


def test_a_deleted_node_answers_404_and_is_not_an_error(
    fake_kube: FakeKube, cluster: PromNodeData, prom_proxy: PromProxy
) -> None:
    nodes = {
        spec.name: NodeInfo(spec.name, MappingProxyType({}), spec.internal_ip)
        for spec in cluster.nodes
    }
    fake_kube.store.delete(NODES, "node-cool")  # gone after the node list was taken
    telemetry = AnnotatorMetrics()

    async def scenario() -> dict[str, PatchOutcome]:
        async with fake_kube.async_client() as client:
            sync = MetricSync(
                source(prom_proxy.url), AnnotationPatcher(client), telemetry=telemetry
            )
            report = await sync.run_tick([CPU], nodes)
            return report.patches.outcomes

    outcomes = asyncio.run(scenario())
    assert outcomes["node-cool"] is PatchOutcome.NODE_GONE
    assert outcomes["node-busy"] is PatchOutcome.WRITTEN
    assert len(fake_kube.requests("PATCH", "/api/v1/nodes/node-cool")) == 1  # not retried
    assert (
        telemetry.registry.get_sample_value(
            "loadaware_annotator_patches_total", {"kind": "metrics", "outcome": "node_gone"}
        )
        == 1
    )
    assert not any(
        sample.value
        for family in telemetry.registry.collect()
        if family.name == "loadaware_annotator_patch_errors"
        for sample in family.samples
    )

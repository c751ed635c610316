"""Prometheus faults, injected for real: the real Prometheus process is stopped and
started again (same port, same data), or a proxy in front of it answers late or with
garbage. The annotator counts the errors, says so on /readyz and /metrics, writes no
annotation from a bad answer and recovers by itself; the extender fails open once the
annotations written before the outage have aged out; the descheduler evicts nothing
and says why, then plans again once Prometheus is back."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest
from lightkube import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

from app.annotator.annotator import Annotator, AnnotatorConfig
from app.descheduler.descheduler import Descheduler, LoopSettings, RunReport, RunResult
from app.extender.extender import Extender
from app.extender.http import ExtenderApp
from app.kube.client import client_for_server
from app.kube.nodes import NodeCache
from app.load.model import MAX_FUTURE_SKEW_S
from app.load.samples import format_usage, parse_usage
from app.policy import default_policy
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig
from tests.annotator.helpers import node_annotations, policy, running
from tests.annotator.promproxy import PromProxy, ProxyBehaviour, running_proxy
from tests.descheduler import cluster
from tests.extender.nodes import fixture
from tests.support.asgi_server import serve
from tests.support.cadvisor import cadvisor_prometheus_server
from tests.support.fakekube import NODES
from tests.support.fakekube_fixtures import FakeKube
from tests.support.ports import free_port
from tests.support.promdata import DEFAULT_METRICS
from tests.support.promserver import PrometheusServer

pytestmark = pytest.mark.prometheus

TIMEOUT_S = 20.0
EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"
WATCHED = "cpu_usage_avg_5m"
# The annotator's nodes: address and CPU percent in Prometheus (memory is 30 % on both).
ANNOTATED = {"n1": ("10.0.0.1", 20.0), "n2": ("10.0.0.2", 90.0)}


def node_gauges() -> list[tuple[str, Mapping[str, str], str]]:
    """Recorded load metrics for the annotator's nodes, as the shipped rules record them."""
    return [
        (metric, {"instance": f"{ip}:9100"}, repr(cpu if metric.startswith("cpu") else 30.0))
        for ip, cpu in ANNOTATED.values()
        for metric in DEFAULT_METRICS
    ]


@pytest.fixture(scope="module")
def module_prometheus() -> Iterator[PrometheusServer]:
    with cadvisor_prometheus_server(cluster.series(), node_gauges()) as server:
        yield server


@pytest.fixture
def prometheus(module_prometheus: PrometheusServer) -> Iterator[PrometheusServer]:
    """The module's Prometheus, running at the start and again at the end of each test."""
    module_prometheus.start()
    yield module_prometheus
    module_prometheus.start()


@contextlib.contextmanager
def stopped(server: PrometheusServer) -> Iterator[None]:
    """Prometheus is down for the block, then back on the same port with the same data."""
    server.stop()
    try:
        yield
    finally:
        server.start()


# -- reading the components from outside ------------------------------------------------


def metric_sample(text: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The value of one sample in a /metrics exposition, or None if it is absent."""
    wanted = dict(labels or {})
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in wanted.items()):
                return float(sample.value)
    return None


async def scrape(http: httpx.AsyncClient, port: int) -> str:
    return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


async def poll(condition: Callable[[], Any], what: str, timeout_s: float = TIMEOUT_S) -> None:
    """Await until ``condition()`` (sync, or returning an awaitable) is truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g}s: {what}")
        await asyncio.sleep(0.05)


def stamped_at(fake_kube: FakeKube, node: str, metric: str = WATCHED) -> float | None:
    raw = node_annotations(fake_kube, node).get(metric)
    sample = parse_usage(raw) if raw is not None else None
    return sample.timestamp_s if sample else None


def seed_annotated(fake_kube: FakeKube) -> None:
    for name, (ip, _) in ANNOTATED.items():
        fake_kube.store.add_node(name, internal_ip=ip)


# -- the annotator ----------------------------------------------------------------------


def make_annotator(client: AsyncClient, url: str, *, health_port: int | None = None,
                   query_timeout_s: float = 5.0) -> tuple[Annotator, PrometheusSource]:
    """An annotator syncing every metric every 2 s, retrying a failed sync after 50 ms."""
    config = AnnotatorConfig(
        policy=policy(dict.fromkeys(DEFAULT_METRICS, "2s")),
        health_host="127.0.0.1",
        health_port=health_port,
        first_retry_s=0.05,
    )
    source = PrometheusSource(PrometheusSettings(url=url, timeout_s=query_timeout_s))
    return Annotator(config, client, source), source


@contextlib.asynccontextmanager
async def annotating(
    fake_kube: FakeKube, url: str, **kwargs: Any
) -> AsyncIterator[tuple[Annotator, asyncio.Task[None]]]:
    async with fake_kube.async_client() as client:
        annotator, source = make_annotator(client, url, **kwargs)
        try:
            async with running(annotator) as task:
                yield annotator, task
        finally:
            source.close()


def test_annotator_prometheus_down_is_counted_and_reported_then_recovers_by_itself(
    fake_kube: FakeKube, prometheus: PrometheusServer
) -> None:
    seed_annotated(fake_kube)
    port = free_port()
    errors = {"metric": WATCHED, "reason": "connection"}

    async def scenario() -> None:
        async with annotating(fake_kube, prometheus.url, health_port=port) as (annotator, task), \
                httpx.AsyncClient(timeout=5.0) as http:
            await poll(lambda: stamped_at(fake_kube, "n2") is not None, "first annotations")
            text = await scrape(http, port)
            success_before = metric_sample(
                text, "loadaware_annotator_last_success_timestamp_seconds", {"metric": WATCHED})
            assert success_before is not None

            with stopped(prometheus):
                async def errors_counted() -> bool:
                    value = metric_sample(await scrape(http, port),
                                          "loadaware_annotator_query_errors_total", errors)
                    return (value or 0) >= 2  # failed, and failed again on the retry

                await poll(errors_counted, "query errors counted while Prometheus is down")
                readyz = await http.get(f"http://127.0.0.1:{port}/readyz")
                # Ready all the same (documented): the caches are fine, and a replica that
                # cannot reach Prometheus is no better replaced; the body says what is wrong.
                assert readyz.status_code == 200
                watched = readyz.json()["metrics"][WATCHED]
                assert "cannot connect to Prometheus" in watched["last_error"]
                text = await scrape(http, port)
                assert metric_sample(text, "loadaware_annotator_last_success_timestamp_seconds",
                                     {"metric": WATCHED}) == success_before
                assert (metric_sample(text, "loadaware_annotator_syncs_total",
                                      {"metric": WATCHED, "result": "error"}) or 0) >= 2
                stale_stamp = stamped_at(fake_kube, "n2")
                assert stale_stamp is not None
                assert not task.done()

            # Back, without a restart of the annotator: new values are written again.
            await poll(lambda: (stamped_at(fake_kube, "n2") or 0) > stale_stamp,
                       "annotations written again once Prometheus is back")

            async def recovered() -> bool:
                body = (await http.get(f"http://127.0.0.1:{port}/readyz")).json()
                return body["metrics"][WATCHED]["last_error"] is None

            await poll(recovered, "readyz clears the error")
            text = await scrape(http, port)
            success_after = metric_sample(
                text, "loadaware_annotator_last_success_timestamp_seconds", {"metric": WATCHED})
            assert success_after is not None
            assert success_after > success_before
            assert not task.done()
            assert annotator.metric_loop.states[WATCHED].last_error is None

    asyncio.run(scenario())


def test_the_filter_fails_open_once_annotations_age_out_during_an_outage(
    fake_kube: FakeKube, prometheus: PrometheusServer
) -> None:
    """End to end: the annotator writes n2's hot CPU from Prometheus, and the extender
    filters n2 out. Prometheus goes down, so nothing refreshes the values; once they are
    past their freshness window (the extender's clock is moved on by that much) n2 passes
    again: missing data never blocks scheduling."""
    seed_annotated(fake_kube)
    windows = default_policy().freshness_windows_s
    offset_s = [0.0]
    body = fixture("filter-nodecache.json")
    body["NodeNames"] = list(ANNOTATED)

    cache = NodeCache(client_for_server(fake_kube.url), retry_delay_s=0.05,
                      max_retry_delay_s=0.05)
    extender = ExtenderApp(Extender(default_policy(), node_cache=cache,
                                    clock=lambda: time.time() + offset_s[0]))

    async def filtered(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
        answer: dict[str, Any] = (await http.post(f"{url}/filter", json=body)).json()
        return answer

    async def scenario(url: str) -> None:
        async with annotating(fake_kube, prometheus.url) as (annotator, task), \
                httpx.AsyncClient(timeout=5.0) as http:

            async def n2_rejected() -> bool:
                return "n2" in (await filtered(http, url))["FailedAndUnresolvableNodes"]

            await poll(n2_rejected, "n2 filtered out on the values the annotator wrote")
            with stopped(prometheus):
                await poll(lambda: annotator.metric_loop.states[WATCHED].last_error is not None,
                           "the annotator sees the outage")
                stale_stamp = stamped_at(fake_kube, "n2")
                assert stale_stamp is not None
                offset_s[0] = max(windows.values()) + 10.0  # the outage outlasts every window
                answer = await filtered(http, url)
                assert answer["NodeNames"] == ["n1", "n2"], answer
                assert answer["FailedAndUnresolvableNodes"] == {}
                assert answer["Error"] == ""
                assert not task.done()
            offset_s[0] = 0.0
            await poll(lambda: (stamped_at(fake_kube, "n2") or 0) > stale_stamp,
                       "fresh annotations once Prometheus is back")
            await poll(n2_rejected, "n2 filtered out again on the fresh values")

    with serve(extender) as url:
        asyncio.run(scenario(url))


@pytest.mark.parametrize(
    ("case", "behaviour", "reason"),
    [
        ("slow: answers after the query timeout", ProxyBehaviour(delay_s=3.0), "timeout"),
        ("not JSON (a login page)", ProxyBehaviour(body=b"<html>Sign in</html>"),
         "bad_response"),
        ("JSON that is no query answer", ProxyBehaviour(body=b'["data"]'), "bad_response"),
        ("a matrix instead of a vector", ProxyBehaviour(body=json.dumps({
            "status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"instance": "10.0.0.2:9100"}, "values": [[1, "90"]]}]}}).encode()),
         "bad_response"),
        ("a scalar instead of a vector", ProxyBehaviour(body=json.dumps({
            "status": "success", "data": {"resultType": "scalar", "result": [1, "90"]}
        }).encode()), "bad_response"),
        ("a null result", ProxyBehaviour(body=json.dumps({
            "status": "success", "data": {"resultType": "vector", "result": None}
        }).encode()), "bad_response"),
    ],
)
def test_annotator_writes_nothing_from_a_slow_or_garbage_answer_and_recovers(
    fake_kube: FakeKube, prometheus: PrometheusServer, case: str, behaviour: ProxyBehaviour,
    reason: str,
) -> None:
    seed_annotated(fake_kube)

    async def scenario(proxy: PromProxy) -> None:
        proxy.behave(behaviour)  # every answer, until reset
        async with annotating(fake_kube, proxy.url, query_timeout_s=1.0) as (annotator, task):
            errors = annotator.telemetry.query_errors.labels(WATCHED, reason)
            await poll(lambda: errors._value.get() >= 2, f"{case}: errors counted, retried")
            assert all(stamped_at(fake_kube, n, m) is None
                       for n in ANNOTATED for m in DEFAULT_METRICS), case
            assert annotator.metric_loop.states[WATCHED].last_error is not None
            assert not task.done()
            proxy.reset()
            await poll(lambda: all(stamped_at(fake_kube, n) is not None for n in ANNOTATED),
                       f"{case}: annotations once the answers are good again")
            assert not task.done()

    with running_proxy(prometheus.url) as proxy:
        asyncio.run(scenario(proxy))


# -- the descheduler --------------------------------------------------------------------


def evicted_pods(fake_kube: FakeKube) -> list[str]:
    return [r.path.split("/")[-2] for r in fake_kube.requests("POST", EVICTIONS)]


def test_descheduler_evicts_nothing_while_prometheus_is_down_and_plans_again_once_back(
    fake_kube: FakeKube, prometheus: PrometheusServer
) -> None:
    cluster.seed(fake_kube.store)
    port = free_port()

    async def scenario() -> None:
        source = PrometheusSource(PrometheusSettings(url=prometheus.url, timeout_s=5.0))
        async with fake_kube.async_client() as client, httpx.AsyncClient(timeout=5.0) as http:
            descheduler = Descheduler(
                cluster.config(interval="1s"), default_policy(), client, source,
                LoopSettings(health_host="127.0.0.1", health_port=port, sync_timeout_s=10.0),
            )

            async def last_run() -> dict[str, Any] | None:
                with contextlib.suppress(httpx.TransportError):
                    answer = await http.get(f"http://127.0.0.1:{port}/readyz")
                    found: dict[str, Any] | None = answer.json().get("last_run")
                    return found
                return None

            async def down_runs() -> float:
                with contextlib.suppress(httpx.TransportError):
                    return metric_sample(await scrape(http, port),
                                         "loadaware_descheduler_runs_total",
                                         {"result": "prometheus_down"}) or 0.0
                return 0.0

            loop = asyncio.create_task(descheduler.run())
            try:
                with stopped(prometheus):
                    await poll(_at_least(down_runs, 2), "runs that found Prometheus down")
                    run = await last_run()
                    assert run is not None
                    assert run["result"] == "prometheus_down", run
                    assert "Prometheus is down: evicting nothing" in run["message"]
                    assert "cannot connect" in run["message"]
                    assert evicted_pods(fake_kube) == []
                    assert (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
                    assert not loop.done()
                # Back: the same process plans and evicts again, no restart needed.
                await poll(lambda: bool(evicted_pods(fake_kube)), "evictions once it is back")
                await poll(lambda: descheduler.last_report is not None
                           and descheduler.last_report.result is RunResult.OK, "an ok run")
                assert set(evicted_pods(fake_kube)) <= set(cluster.WEB_PODS)
                assert not loop.done()
            finally:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
                source.close()

    asyncio.run(scenario())


def _at_least(read: Callable[[], Any], minimum: float) -> Callable[[], Any]:
    async def check() -> bool:
        return bool(await read() >= minimum)

    return check


def run_once(fake_kube: FakeKube, url: str, config: DeschedulerConfig | None = None,
             timeout_s: float = 5.0) -> tuple[RunReport, Descheduler]:
    async def scenario() -> tuple[RunReport, Descheduler]:
        source = PrometheusSource(PrometheusSettings(url=url, timeout_s=timeout_s))
        try:
            async with fake_kube.async_client() as client:
                descheduler = Descheduler(config or cluster.config(), default_policy(), client,
                                          source, LoopSettings(sync_timeout_s=10.0))
                return await descheduler.run_once(), descheduler
        finally:
            source.close()

    return asyncio.run(scenario())


def pod_usage_body(value: str) -> bytes:
    """A well-formed answer in which every pod's usage is ``value``."""
    result = [{"metric": {"namespace": "shop", "pod": pod}, "value": [time.time(), value]}
              for pod in cluster.WEB_PODS]
    return json.dumps({"status": "success",
                       "data": {"resultType": "vector", "result": result}}).encode()


@pytest.mark.parametrize(
    ("case", "behaviour", "result", "says"),
    [
        ("slow: answers after the query timeout", ProxyBehaviour(delay_s=3.0),
         RunResult.PROMETHEUS_DOWN, "timed out"),
        ("not JSON", ProxyBehaviour(body=b"<html>Sign in</html>"),
         RunResult.PROMETHEUS_DOWN, "not a query result"),
        ("a matrix instead of a vector", ProxyBehaviour(body=json.dumps({
            "status": "success", "data": {"resultType": "matrix", "result": [
                {"metric": {"namespace": "shop", "pod": "web-0"}, "values": [[1, "1"]]}]}
        }).encode()), RunResult.PROMETHEUS_DOWN, "not an instant-vector sample"),
        ("every pod NaN", ProxyBehaviour(body=pod_usage_body("NaN")),
         RunResult.NO_POD_USAGE, "no per-pod usage for any pod"),
        ("every pod negative", ProxyBehaviour(body=pod_usage_body("-0.5")),
         RunResult.NO_POD_USAGE, "no per-pod usage for any pod"),
    ],
)
def test_descheduler_evicts_nothing_on_a_slow_or_garbage_pod_usage_answer(
    fake_kube: FakeKube, prometheus: PrometheusServer, case: str, behaviour: ProxyBehaviour,
    result: RunResult, says: str,
) -> None:
    cluster.seed(fake_kube.store)
    with running_proxy(prometheus.url) as proxy:
        proxy.behave(behaviour)
        report, descheduler = run_once(fake_kube, proxy.url, timeout_s=1.0)
    assert report.result is result, (case, report.message)
    assert says in report.message, (case, report.message)
    assert "evicting nothing" in report.message
    assert report.plan is None
    assert evicted_pods(fake_kube) == []
    runs = descheduler.telemetry.registry.get_sample_value(
        "loadaware_descheduler_runs_total", {"result": result.value})
    assert runs == 1.0
    if result is RunResult.NO_POD_USAGE:
        dropped = descheduler.telemetry.registry.get_sample_value(
            "loadaware_descheduler_invalid_pod_usage_samples_total",
            {"kind": "cpu:nan" if "NaN" in case else "cpu:negative"})
        assert dropped == len(cluster.WEB_PODS)


# -- clock skew through the descheduler -------------------------------------------------

LOAD_METRICS = ("cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "mem_usage_avg_5m",
                "mem_usage_max_avg_1h")
INSIDE_S = 30.0  # margin inside a bound, for a run that takes a moment
OUTSIDE_S = 10.0  # margin outside it


def restamp(annotations: Mapping[str, str], node: dict[str, Any]) -> None:
    node["metadata"]["annotations"].update(annotations)


def stamped(cpu: float, at: Callable[[str], float], mem: float = 0.3) -> dict[str, str]:
    return {m: format_usage(cpu if m.startswith("cpu") else mem, at(m)) for m in LOAD_METRICS}


def skew(kind: str) -> Callable[[str], float]:
    """When each metric's value is stamped, by the reader's clock."""
    windows = default_policy().freshness_windows_s
    now = time.time()
    stamps: dict[str, Callable[[str], float]] = {
        "future, inside the allowance": lambda _m: now + MAX_FUTURE_SKEW_S - INSIDE_S,
        "future, beyond the allowance": lambda _m: now + MAX_FUTURE_SKEW_S + OUTSIDE_S + 50,
        "past, just inside the window": lambda m: now - windows[m] + INSIDE_S,
        "past, just past the window": lambda m: now - windows[m] - OUTSIDE_S,
    }
    return stamps[kind]


@pytest.mark.parametrize("role", ["source", "destinations"])
@pytest.mark.parametrize(
    ("kind", "evicts"),
    [
        ("future, inside the allowance", True),
        ("future, beyond the allowance", False),
        ("past, just inside the window", True),
        ("past, just past the window", False),
    ],
)
def test_clock_skew_a_node_with_untrusted_or_stale_annotations_is_neither_source_nor_destination(
    fake_kube: FakeKube, prometheus: PrometheusServer, role: str, kind: str, evicts: bool
) -> None:
    cluster.seed(fake_kube.store)
    skewed = ["hot"] if role == "source" else ["cool-1", "cool-2"]
    for name in skewed:
        annotations = stamped(cluster.NODE_LOAD[name], skew(kind))
        fake_kube.store.modify(NODES, name, functools.partial(restamp, annotations))
    report, descheduler = run_once(fake_kube, prometheus.url)
    assert report.result is RunResult.OK, report.message
    assert report.plan is not None
    planned = len(report.plan.evictions)
    if evicts:
        assert planned == 2, (role, kind, report.message)
        assert len(evicted_pods(fake_kube)) == 2
        return
    assert planned == 0, (role, kind, report.message)
    assert evicted_pods(fake_kube) == []
    no_data = descheduler.telemetry.registry.get_sample_value(
        "loadaware_descheduler_nodes", {"class": "no-data"})
    assert no_data is not None
    assert no_data >= len(skewed)

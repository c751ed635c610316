"""A full annotator sync at 5,000 nodes, against crane's query pattern on the same stack.

A real Prometheus holds the six final metrics for N nodes (written directly by the
test harness's generator, ``promdata.write_bench_openmetrics``; instance labels are
``IP:9100``). The API server is the project's fake (``tests/support/fakekube.py``),
holding the N nodes in a process of its own (so that it does not share the
annotator's GIL); its request log counts patches. Queries are counted by the
production ``PrometheusSource`` itself (it makes exactly one HTTP request per query:
no transport retries), talking straight to Prometheus so that no proxy adds latency
to either pattern. Both runs use the production Prometheus client and lightkube.

* loadaware: one ``MetricSync.run_tick`` over all six metrics, measured whole.
* crane: one worker, for each node and metric: an instant query per label candidate
  (``instance="IP"``, then ``instance=~"IP:.+"``, then ``instance="name"``) until one
  answers, then two JSON patches. Run for a sample of nodes and extrapolated
  linearly to N (it is a serial loop, so time and counts scale with nodes).

    python bench/annotator.py                  # 5,000 nodes, crane sample of 100
    python bench/annotator.py --nodes 1000 --crane-sample 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

if __package__ in (None, ""):
    # `python bench/annotator.py`: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.annotator.bindings import BindingWindows
from app.annotator.sync import MetricSync
from app.kube.nodes import NodeCache
from app.kube.patching import AnnotationPatcher
from app.load.samples import HOT_VALUE_KEY, format_hot_value, format_usage, parse_usage
from app.policy import default_policy
from app.prom.client import PrometheusSource, PromSample
from app.prom.settings import PrometheusSettings
from tests.support import promdata
from tests.support.fakekube import FakeKubeServer
from tests.support.fakekube_fixtures import kubeconfig_for
from tests.support.promserver import import_openmetrics, temporary_prometheus

METRICS = promdata.DEFAULT_METRICS


class FakeKubeProcess:
    """The fake API server in a child process, driven over a pipe."""

    def __init__(self, nodes: list[promdata.BenchNode]) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_fake_kube, args=(child, nodes))
        self._process.start()
        self.url: str = self._conn.recv()

    def call(self, command: str, argument: Any = None) -> Any:
        self._conn.send((command, argument))
        return self._conn.recv()

    def patches(self) -> int:
        count: int = self.call("count", ("PATCH", "/api/v1/nodes/*"))
        return count

    def stop(self) -> None:
        self.call("stop")
        self._process.join(10)


def _serve_fake_kube(conn: Connection, nodes: list[promdata.BenchNode]) -> None:
    server = FakeKubeServer()
    server.start()
    for node in nodes:
        server.store.add_node(node.name, internal_ip=node.internal_ip)
    conn.send(server.url)
    while True:
        command, argument = conn.recv()
        if command == "clear":
            server.requests.clear()
            conn.send(None)
        elif command == "count":
            conn.send(len(server.requests.matching(*argument)))
        elif command == "annotations":
            found = {}
            for name in argument:
                stored = server.store.get_node(name)
                found[name] = None if stored is None else stored["metadata"]["annotations"]
            conn.send(found)
        elif command == "stop":
            server.stop()
            conn.send(None)
            return


class CountingSource(PrometheusSource):
    def __init__(self, settings: PrometheusSettings) -> None:
        super().__init__(settings)
        self.queries = 0
        self._lock = threading.Lock()

    def query(self, promql: str, at_s: float | None = None) -> list[PromSample]:
        with self._lock:
            self.queries += 1
        return super().query(promql, at_s)


@dataclass
class Run:
    name: str
    queries: float
    patches: float
    wall_s: float
    note: str = ""


def kube_client(url: str) -> AsyncClient:
    return AsyncClient(kubeconfig_for(url), trust_env=False, timeout=httpx2.Timeout(60.0))


async def loadaware_sync(
    kube: FakeKubeProcess, prometheus_url: str, nodes: list[promdata.BenchNode], concurrency: int
) -> tuple[Run, float]:
    source = CountingSource(PrometheusSettings(prometheus_url, timeout_s=60.0))
    async with kube_client(kube.url) as client:
        cache = NodeCache(client)
        cache_task = asyncio.create_task(cache.run())
        await cache.wait_synced()
        sync = MetricSync(
            source,
            AnnotationPatcher(client, concurrency=concurrency),
            windows=BindingWindows(default_policy().spec.hot_value),
        )
        # The query phase alone, for the breakdown (not part of the measured sync).
        started = time.perf_counter()
        await asyncio.gather(*(source.aquery(metric) for metric in METRICS))
        query_phase_s = time.perf_counter() - started

        source.queries = 0
        kube.call("clear")
        started = time.perf_counter()
        report = await sync.run_tick(METRICS, cache.nodes)
        wall_s = time.perf_counter() - started
        cache_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cache_task
    source.close()
    if report.patches.written != len(nodes):
        raise RuntimeError(f"not every node was written: {report.patches.summary()}")
    check_values(kube, nodes)
    run = Run(
        "loadaware: one query per metric, one merge patch per node",
        source.queries,
        kube.patches(),
        wall_s,
        f"measured; {concurrency} patches in flight",
    )
    return run, query_phase_s


def check_values(kube: FakeKubeProcess, nodes: list[promdata.BenchNode]) -> None:
    sample = [node.name for node in nodes[:: max(1, len(nodes) // 50)]]
    written = kube.call("annotations", sample)
    for name in sample:
        if written[name] is None:
            raise RuntimeError(f"node {name} vanished from the fake API server")
        for metric in METRICS:
            value = parse_usage(written[name][metric])
            want = promdata.bench_value(name, metric) / 100
            if value is None or abs(value.value - want) >= 1e-5:
                raise RuntimeError(f"{name} {metric}: wrote {value}, expected {want}")


async def crane_sample(
    kube: FakeKubeProcess, prometheus_url: str, sample: list[promdata.BenchNode], total: int
) -> Run:
    source = CountingSource(PrometheusSettings(prometheus_url, timeout_s=60.0))
    kube.call("clear")
    async with kube_client(kube.url) as client:
        started = time.perf_counter()
        for node in sample:
            for metric in METRICS:
                candidates = (
                    f'{metric}{{instance="{node.internal_ip}"}}',
                    f'{metric}{{instance=~"{node.internal_ip}:.+"}}',
                    f'{metric}{{instance="{node.name}"}}',
                )
                value = None
                for query in candidates:
                    found = await asyncio.to_thread(source.query, query)
                    if found:
                        value = found[0].value / 100
                        break
                if value is None:
                    continue
                now_s = time.time()
                for key, text in (
                    (metric, format_usage(value, now_s)),
                    (HOT_VALUE_KEY, format_hot_value(0, now_s)),
                ):
                    operation = [
                        {"op": "add", "path": f"/metadata/annotations/{key}", "value": text}
                    ]
                    await client.patch(Node, node.name, operation, patch_type=PatchType.JSON)
        elapsed_s = time.perf_counter() - started
    source.close()
    scale = total / len(sample)
    return Run(
        "crane: per node x metric x label candidate, 2 JSON patches each",
        source.queries * scale,
        kube.patches() * scale,
        elapsed_s * scale,
        f"{len(sample)} nodes measured, x{scale:g} extrapolated; one worker",
    )


def table(runs: list[Run], nodes: int) -> str:
    lines = [
        f"| full sync of {len(METRICS)} metrics, {nodes:,} nodes | Prometheus queries "
        "| API patches | wall time | how |",
        "|---|---:|---:|---:|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.name} | {run.queries:,.0f} | {run.patches:,.0f} "
            f"| {run.wall_s:,.1f} s | {run.note} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--crane-sample", type=int, default=100)
    parser.add_argument("--patch-concurrency", type=int, default=16)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    nodes = promdata.bench_nodes(args.nodes)
    now_s = time.time()
    with temporary_prometheus("loadaware-bench-annotator-") as prometheus:
        started = time.monotonic()
        data = prometheus.workdir / "bench.om"
        samples = promdata.write_bench_openmetrics(data, nodes, now_s - 1800, now_s + 1800)
        import_openmetrics(data, prometheus.tsdb_dir)
        data.unlink()
        prometheus.start()
        waited_s = prometheus.wait_for_compaction()
        print(
            f"prometheus: {samples:,} samples for {len(nodes):,} nodes ready in "
            f"{time.monotonic() - started:.1f}s (compaction wait {waited_s:.1f}s, untimed)",
            flush=True,
        )
        kube = FakeKubeProcess(nodes)
        try:
            loadaware, query_phase_s = asyncio.run(
                loadaware_sync(kube, prometheus.url, nodes, args.patch_concurrency)
            )
            crane = asyncio.run(
                crane_sample(kube, prometheus.url, nodes[: args.crane_sample], len(nodes))
            )
        finally:
            kube.stop()
    print()
    print(table([loadaware, crane], len(nodes)))
    print()
    print(
        f"loadaware breakdown: the {len(METRICS)} queries alone take {query_phase_s:.2f} s "
        f"(run concurrently); the rest is matching and {loadaware.patches:,.0f} patches."
    )
    print(
        f"speed-up: {crane.wall_s / loadaware.wall_s:,.0f}x wall time, "
        f"{crane.queries / loadaware.queries:,.0f}x fewer queries"
    )
    done = loadaware.queries == len(METRICS)
    print(
        f"done-when (a {len(nodes):,}-node sync takes {len(METRICS)} queries): "
        f"{'yes' if done else 'NO'}"
    )
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())

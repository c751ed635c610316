"""`loadaware capture` of a generated cluster against a real Prometheus: time, queries,
answer sizes and peak memory.

The cluster: NODES nodes, PODS pods in workloads of REPLICAS replicas spread over
NAMESPACES namespaces, each pod on a random node, with HOURS of cAdvisor history
(`container_cpu_usage_seconds_total` and `container_memory_working_set_bytes`, one
container per pod, with the `node` label) sampled every SAMPLE seconds, backfilled
with promtool into Debian's Prometheus. The API side is the catalog built from the
same generated objects (lightkube Pods and Deployments) in this process: the bench
measures the Prometheus side, which is what grows with the range.

    python bench/capture.py                            # 5,000 nodes, 100,000 pods, 24 h
    python bench/capture.py --nodes 500 --pods 10000         # a tenth of it

Heavy at full size: the history is ~58 M samples (~5 GB of OpenMetrics text before
promtool turns it into blocks). Not run in CI.
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Node, Pod

if __package__ in (None, ""):
    # `python bench/capture.py`: make the repository root importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.capture.catalog import Catalog, build_catalog
from app.capture.commands import capture, dump
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from tests.support.promserver import PrometheusServer, import_openmetrics


def _objects(nodes: int, pods: int, replicas: int, namespaces: int, seed: int) -> (
    tuple[list[Any], list[Any], dict[str, list[Any]], list[tuple[str, str, str]]]
):
    rng = random.Random(seed)
    node_objects = [Node.from_dict({
        "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi"}},
    }) for i in range(nodes)]  # fmt: skip
    deployments, replica_sets, pod_objects, placed = [], [], [], []
    for w in range(math.ceil(pods / replicas)):
        namespace, name = f"ns-{w % namespaces}", f"app-{w}"
        template: dict[str, Any] = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "main", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]}}
        deployments.append(Deployment.from_dict({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template}}))  # fmt: skip
        replica_sets.append(ReplicaSet.from_dict({
            "metadata": {"name": f"{name}-5d8f", "namespace": namespace, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": "u",
                 "controller": True}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template}}))  # fmt: skip
        for r in range(min(replicas, pods - w * replicas)):
            pod, node = f"{name}-5d8f-{r:05d}", f"node-{rng.randrange(nodes)}"
            pod_objects.append(Pod.from_dict({
                "metadata": {"name": pod, "namespace": namespace, "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-5d8f",
                     "uid": "u", "controller": True}]},
                "spec": {"nodeName": node, **template["spec"]},
                "status": {"phase": "Running"}}))  # fmt: skip
            placed.append((namespace, pod, node))
    controllers = {"Deployment": deployments, "ReplicaSet": replica_sets}
    return node_objects, pod_objects, controllers, placed


def _write_history(out: TextIO, placed: list[tuple[str, str, str]], start_s: float,
                   end_s: float, sample_s: float) -> int:  # fmt: skip
    """Diurnal CPU per pod (its own factor), a flat working set; returns samples written."""
    times = [start_s + i * sample_s for i in range(int((end_s - start_s) // sample_s) + 1)]
    written = 0
    out.write("# TYPE container_cpu_usage_seconds counter\n")
    for index, (namespace, pod, node) in enumerate(placed):
        factor = 0.5 + (index % 7) / 6
        labels = f'{{container="main",namespace="{namespace}",node="{node}",pod="{pod}"}}'
        total = 0.0
        lines = []
        for t in times:
            cores = 0.2 * factor * (1 + 0.5 * math.cos(2 * math.pi * t / 86400))
            total += cores * sample_s
            lines.append(f"container_cpu_usage_seconds_total{labels} {total:.1f} {int(t)}\n")
        out.writelines(lines)
        written += len(lines)
    out.write("# TYPE container_memory_working_set_bytes gauge\n")
    for index, (namespace, pod, node) in enumerate(placed):
        memory = 2**28 * (1 + index % 5)
        labels = f'{{container="main",namespace="{namespace}",node="{node}",pod="{pod}"}}'
        out.writelines(f"container_memory_working_set_bytes{labels} {memory} {int(t)}\n"
                       for t in times)  # fmt: skip
        written += len(times)
    out.write("# EOF\n")
    return written


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=20, help="pods per workload")
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--sample", type=float, default=150.0, help="seconds between samples")
    parser.add_argument("--step", type=float, default=300.0, help="the capture's --step")
    parser.add_argument("--keep", type=Path, help="write the scenario here")
    args = parser.parse_args()

    started = time.perf_counter()
    nodes, pods, controllers, placed = _objects(args.nodes, args.pods, args.replicas,
                                                args.namespaces, seed=1)  # fmt: skip
    end_s = float(int(time.time()) // 300 * 300)
    range_s = args.hours * 3600
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-bench-capture-"))
    try:
        history = workdir / "history.om"
        with history.open("w", encoding="utf-8") as out:
            samples = _write_history(out, placed, end_s - range_s - 600, end_s, args.sample)
        size_mib = history.stat().st_size / 2**20
        generated = time.perf_counter() - started
        server = PrometheusServer(workdir, extra_args=["--query.max-samples=50000000"])
        import_openmetrics(history, server.tsdb_dir)
        history.unlink()
        backfilled = time.perf_counter() - started - generated
        server.start(timeout=600)
        server.wait_for_compaction()  # merging the backfilled blocks costs CPU: not timed
        try:
            rss_before = _peak_rss_mib()
            t0 = time.perf_counter()
            catalog: Catalog = build_catalog(nodes, pods, controllers, [])
            catalog_s = time.perf_counter() - t0
            del nodes, pods, controllers
            source = PrometheusSource(PrometheusSettings(url=server.url, timeout_s=300.0))
            t0 = time.perf_counter()
            document, stats, summary = capture(catalog, source, server.url, end_s, range_s,
                                               args.step)  # fmt: skip
            capture_s = time.perf_counter() - t0
            source.close()
            t0 = time.perf_counter()
            target = args.keep or workdir / "scenario.yaml"
            with target.open("w", encoding="utf-8") as out:
                dump(document, out)
            dump_s = time.perf_counter() - t0
            scenario_mib = target.stat().st_size / 2**20
        finally:
            server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"cluster: {args.nodes:,} nodes, {args.pods:,} pods, {args.hours:g} h sampled every "
          f"{args.sample:g}s: {samples:,} samples ({size_mib:,.0f} MiB OpenMetrics), "
          f"generated in {generated:.0f}s, backfilled in {backfilled:.0f}s")
    print(summary)
    print(f"catalog {catalog_s:.1f}s; capture {capture_s:.1f}s ({stats.seconds:.1f}s waiting "
          f"on Prometheus); {stats.queries} queries, {stats.series:,} series, "
          f"{stats.samples:,} samples, largest answer {stats.largest_answer:,} samples; "
          f"scenario written in {dump_s:.1f}s, {scenario_mib:.1f} MiB")
    print(f"peak RSS: {rss_before:.0f} MiB before the capture (objects, catalog), "
          f"{_peak_rss_mib():.0f} MiB after")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Hours of per-pod cAdvisor history, varying over time, in a real Prometheus.

Each pod has a usage function of time (cores, working-set bytes); the file holds what
a kubelet exports, with the traps of tests/support/cadvisor.py (the pod cgroup
``container=""`` and the pause container ``container="POD"``), each series carrying
the ``node`` label the kubelet scrape adds. Optional kube-state-metrics gauges
(``kube_deployment_spec_replicas``) give replica counts over time.

    with usage_history_prometheus(pods, start_s, end_s, step_s) as url: ...
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tests.support.promserver import PrometheusServer, import_openmetrics

PAUSE_CPU_CORES = 0.001
PAUSE_MEMORY_BYTES = 512 * 1024.0

UsageAt = Callable[[float], tuple[float, float]]  # seconds since the start -> cores, bytes


@dataclass(frozen=True)
class PodHistory:
    namespace: str
    pod: str
    node: str
    usage: UsageAt
    since_s: float = -1e18  # seconds after the origin when the pod starts reporting
    until_s: float | None = None


@dataclass(frozen=True)
class ReplicaGauge:
    namespace: str
    deployment: str
    replicas: Callable[[float], int]


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def write_history(
    out: TextIO,
    pods: Iterable[PodHistory],
    start_s: float,
    end_s: float,
    step_s: float,
    gauges: Iterable[ReplicaGauge] = (),
    origin_s: float | None = None,
) -> None:
    """Samples every ``step_s`` from ``start_s`` to ``end_s``; the usage functions'
    (and ``since_s``') time 0 is ``origin_s`` (default ``start_s``)."""
    pods = list(pods)
    origin = start_s if origin_s is None else origin_s
    times = [start_s + i * step_s for i in range(int((end_s - start_s) // step_s) + 1)]
    out.write("# TYPE container_cpu_usage_seconds counter\n")
    for pod in pods:
        live = [t for t in times if pod.since_s <= t - origin <= (pod.until_s or 1e18)]
        for container, share, extra in (("main", 1.0, 0.0), ("", 1.0, PAUSE_CPU_CORES),
                                        ("POD", 0.0, PAUSE_CPU_CORES)):  # fmt: skip
            labels = _labels(namespace=pod.namespace, pod=pod.pod, container=container,
                             node=pod.node, job="kubelet")  # fmt: skip
            total = 1000.0
            previous = None
            for t in live:
                if previous is not None:
                    cores = pod.usage(previous - origin)[0] * share + extra
                    total += cores * (t - previous)
                previous = t
                out.write(f"container_cpu_usage_seconds_total{labels} {total!r} {int(t)}\n")
    out.write("# TYPE container_memory_working_set_bytes gauge\n")
    for pod in pods:
        live = [t for t in times if pod.since_s <= t - origin <= (pod.until_s or 1e18)]
        for container, share, extra in (("main", 1.0, 0.0), ("", 1.0, PAUSE_MEMORY_BYTES),
                                        ("POD", 0.0, PAUSE_MEMORY_BYTES)):  # fmt: skip
            labels = _labels(namespace=pod.namespace, pod=pod.pod, container=container,
                             node=pod.node, job="kubelet")  # fmt: skip
            for t in live:
                value = pod.usage(t - origin)[1] * share + extra
                out.write(f"container_memory_working_set_bytes{labels} {value!r} {int(t)}\n")
    gauges = list(gauges)
    if gauges:
        out.write("# TYPE kube_deployment_spec_replicas gauge\n")
        for gauge in gauges:
            labels = _labels(namespace=gauge.namespace, deployment=gauge.deployment,
                             job="kube-state-metrics")  # fmt: skip
            for t in times:
                replicas = gauge.replicas(t - origin)
                out.write(f"kube_deployment_spec_replicas{labels} {replicas} {int(t)}\n")
    out.write("# EOF\n")


@contextlib.contextmanager
def usage_history_prometheus(
    pods: Iterable[PodHistory],
    start_s: float,
    end_s: float,
    step_s: float,
    gauges: Iterable[ReplicaGauge] = (),
    origin_s: float | None = None,
) -> Iterator[str]:
    """A running Prometheus holding the history; yields its URL."""
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-history-"))
    server = PrometheusServer(workdir)
    try:
        path = workdir / "history.om"
        with path.open("w", encoding="utf-8") as out:
            write_history(out, pods, start_s, end_s, step_s, gauges, origin_s)
        import_openmetrics(path, server.tsdb_dir)
        server.start()
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

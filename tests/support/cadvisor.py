"""Synthetic cAdvisor series in a real Prometheus, with per-pod usage known in advance.

Each pod's containers use a constant CPU (cores) and working set (bytes). The file
holds what a kubelet exports, traps included:

* per container: ``container_cpu_usage_seconds_total`` (a counter growing by exactly
  ``cores * step`` per sample) and ``container_memory_working_set_bytes``;
* per pod, ``container=""``: the pod cgroup, already the sum of its containers;
* per pod, ``container="POD"``: the pause container, with a little usage of its own.

A query that sums everything counts a pod about twice; the right one gives exactly
``PodSeries.cpu_cores`` and ``memory_bytes``. Any other counter (throttled periods,
OOM events) can be added with its value over time (``Counter``). Data runs from 30
minutes before the fixture's start to two hours after it, so queries at the real
"now" work.

    with cadvisor_prometheus([PodSeries("default", "web-1", {"main": (0.5, 2**28)})]) as url:
        ...
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tests.support.promserver import PrometheusServer, import_openmetrics

CPU_COUNTER = "container_cpu_usage_seconds"  # samples are named ..._total
WORKING_SET = "container_memory_working_set_bytes"
PAUSE_CPU_CORES = 0.001
PAUSE_MEMORY_BYTES = 512 * 1024.0
STEP_S = 15.0
HISTORY_S = 30 * 60.0
FUTURE_S = 2 * 3600.0


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    pod: str
    containers: Mapping[str, tuple[float, float]]  # name -> (cpu cores, working set bytes)
    node: str = "node-1"
    pause_container: bool = True  # also export container="POD" (older runtimes)

    @property
    def cpu_cores(self) -> float:
        return sum(cpu for cpu, _ in self.containers.values())

    @property
    def memory_bytes(self) -> float:
        return sum(memory for _, memory in self.containers.values())


@dataclass(frozen=True)
class Counter:
    """A counter series: ``name`` without its ``_total``, its labels, its value at t."""

    name: str
    labels: Mapping[str, str]
    value: Callable[[float], float]


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _series(pod: PodSeries) -> list[tuple[str, float, float]]:
    """(container label, cores, bytes) for every series the kubelet would export."""
    rows = [(name, cpu, memory) for name, (cpu, memory) in pod.containers.items()]
    rows.append(("", pod.cpu_cores + PAUSE_CPU_CORES, pod.memory_bytes + PAUSE_MEMORY_BYTES))
    if pod.pause_container:
        rows.append(("POD", PAUSE_CPU_CORES, PAUSE_MEMORY_BYTES))
    return rows


def _times(start: float, end: float, step: float) -> list[float]:
    first = int(start // step + 1) * step
    return [first + i * step for i in range(int((end - first) // step) + 1)]


def write_cadvisor_openmetrics(
    out: TextIO,
    pods: Iterable[PodSeries],
    start: float,
    end: float,
    step: float = STEP_S,
    raw_gauges: Iterable[tuple[str, Mapping[str, str], str]] = (),
    counters: Iterable[Counter] = (),
) -> None:
    """The pods' series, then gauges with literal values (``NaN``, ``-1``) for garbage,
    then counters whose value at each time ``counters`` give (``Counter``)."""
    pods = list(pods)
    times = _times(start, end, step)
    first = times[0]
    out.write(f"# TYPE {CPU_COUNTER} counter\n")
    for pod in pods:
        for container, cores, _ in _series(pod):
            labels = _labels(namespace=pod.namespace, pod=pod.pod, container=container,
                             node=pod.node, job="kubelet")
            out.writelines(
                f"{CPU_COUNTER}_total{labels} {1000.0 + cores * (t - first)!r} {int(t)}\n"
                for t in times
            )
    out.write(f"# TYPE {WORKING_SET} gauge\n")
    for pod in pods:
        for container, _, memory in _series(pod):
            labels = _labels(namespace=pod.namespace, pod=pod.pod, container=container,
                             node=pod.node, job="kubelet")
            out.writelines(f"{WORKING_SET}{labels} {memory!r} {int(t)}\n" for t in times)
    rows = list(raw_gauges)
    for name in sorted({name for name, _, _ in rows}):
        out.write(f"# TYPE {name} gauge\n")
        for row_name, matchers, value in rows:
            if row_name == name:
                text = _labels(**matchers)
                out.writelines(f"{name}{text} {value} {int(t)}\n" for t in times)
    kept = list(counters)
    for name in sorted({c.name for c in kept}):
        out.write(f"# TYPE {name} counter\n")
        for counter in kept:
            if counter.name == name:
                text = _labels(**counter.labels)
                out.writelines(
                    f"{name}_total{text} {counter.value(t)!r} {int(t)}\n" for t in times
                )
    out.write("# EOF\n")


@contextlib.contextmanager
def cadvisor_prometheus(
    pods: Iterable[PodSeries],
    raw_gauges: Iterable[tuple[str, Mapping[str, str], str]] = (),
    counters: Iterable[Counter] = (),
) -> Iterator[str]:
    """A running Prometheus holding the pods' cAdvisor series; yields its URL."""
    with cadvisor_prometheus_server(pods, raw_gauges, counters) as server:
        yield server.url


@contextlib.contextmanager
def cadvisor_prometheus_server(
    pods: Iterable[PodSeries],
    raw_gauges: Iterable[tuple[str, Mapping[str, str], str]] = (),
    counters: Iterable[Counter] = (),
) -> Iterator[PrometheusServer]:
    """Like ``cadvisor_prometheus``, but yields the server itself, so that a test can
    stop it and start it again (same port, same data) to inject an outage."""
    now = time.time()
    start, end = now - HISTORY_S, now + FUTURE_S
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-cadvisor-"))
    server = PrometheusServer(workdir)
    try:
        path = workdir / "cadvisor.om"
        with path.open("w", encoding="utf-8") as out:
            write_cadvisor_openmetrics(
                out, pods, start, end, raw_gauges=raw_gauges, counters=counters
            )
        import_openmetrics(path, server.tsdb_dir)
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

"""pytest fixtures that serve a real Prometheus (registered in tests/conftest.py).

- `prometheus_node_data` (session): a Prometheus holding a day of synthetic
  node-exporter data for `promdata.default_nodes` plus everything the shipped
  recording rules (deploy/prometheus/loadaware-rules.yaml) record from it.
  The data runs until two hours past the fixture's start, so instant queries
  at the real "now" work for the whole session. The data is built once per session,
  by whichever worker asks first (about 4 CPU-seconds of promtool and Prometheus);
  every worker serves a copy of it with a Prometheus of its own.
- `empty_prometheus` (function): a fresh server with no data at all.

Tests that use either are marked `prometheus` automatically (and should say
so with `@pytest.mark.prometheus` too).

Usage::

    @pytest.mark.prometheus
    def test_x(prometheus_node_data):
        t = prometheus_node_data.query_time()
        want = prometheus_node_data.expected("node-peak", "cpu_usage_max_avg_1d", t)  # 90.0
        ...  # query prometheus_node_data.url at time=t
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.support import promdata
from tests.support.locks import exclusive
from tests.support.promdata import NodeSpec
from tests.support.promserver import (
    PrometheusServer,
    backfill_recording_rules,
    import_openmetrics,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES_PATH = REPO_ROOT / "deploy" / "prometheus" / "loadaware-rules.yaml"

SAMPLE_STEP = 15.0  # seconds between raw samples, like a 15s scrape interval
HISTORY = promdata.DAY + 30 * promdata.MINUTE  # enough for the 1d maxima at the anchor
FUTURE = 2 * promdata.HOUR  # data past the anchor, so "now" always has samples


@dataclass(frozen=True)
class PromNodeData:
    """Handle on the session's Prometheus and the truth behind its data.

    Times are Unix seconds.  `anchor` is the (minute-aligned) time the node
    shapes are defined relative to; raw samples cover [start, end].  The
    expected values equal what the rules record at any time t in
    [anchor, valid_until] (about 40 minutes): after that a shape breakpoint
    reaches the edge of a 1-hour window.
    """

    url: str
    nodes: tuple[NodeSpec, ...]
    anchor: float
    start: float
    end: float
    valid_until: float
    server: PrometheusServer = field(repr=False)
    timings: dict[str, float] = field(default_factory=dict)

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def nodes_with_series(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.has_series)

    def query_time(self) -> float:
        """The real now, after checking the expected values still hold at it."""
        t = time.time()
        if not self.anchor <= t <= self.valid_until:
            raise AssertionError(
                f"the test session outlived its synthetic data: now={t:.0f} is past "
                f"valid_until={self.valid_until:.0f} (anchor {self.anchor:.0f})"
            )
        return t

    def expected(self, node: str | NodeSpec, metric: str, t: float) -> float | None:
        """Percent (0-100) `metric` must have for `node` at t; None if it has no series."""
        spec = self.node(node) if isinstance(node, str) else node
        return promdata.expected_value(spec, metric, t)

    def expected_by_instance(self, metric: str, t: float) -> dict[str, float]:
        """{instance label: expected percent} for all nodes with series."""
        return promdata.expected_values(self.nodes, metric, t)


@contextlib.contextmanager
def node_data_prometheus(
    nodes: tuple[NodeSpec, ...] | None = None,
    rules_path: Path = RULES_PATH,
    anchor: float | None = None,
) -> Iterator[PromNodeData]:
    """Build and run the node-data Prometheus; everything is removed on exit."""
    t0 = time.monotonic()
    anchor = anchor if anchor is not None else float(int(time.time() // 60) * 60)
    nodes = nodes if nodes is not None else promdata.default_nodes(anchor)
    start, end = anchor - HISTORY, anchor + FUTURE
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-promdata-"))
    server = PrometheusServer(workdir)
    timings: dict[str, float] = {}
    try:
        om_path = workdir / "nodes.om"
        with om_path.open("w", encoding="utf-8") as out:
            promdata.write_node_openmetrics(out, nodes, start, end, SAMPLE_STEP)
        timings["generate"] = time.monotonic() - t0
        import_openmetrics(om_path, server.tsdb_dir)
        om_path.unlink()
        timings["import"] = time.monotonic() - t0 - timings["generate"]
        rules_doc = yaml.safe_load(rules_path.read_text())
        # Each stage starts a few minutes after the previous one so its first
        # windows are already filled (irate 90s, then 5m averages).
        report = backfill_recording_rules(
            server, rules_doc, start + 2 * 60, end, stage_delay=8 * 60
        )
        for names, secs in zip(report.stages, report.seconds, strict=True):
            timings["rules:" + ",".join(names)] = secs
        timings["total"] = time.monotonic() - t0
        valid_until = promdata.settled_until(nodes, anchor, end - 10 * promdata.MINUTE)
        yield PromNodeData(
            url=server.url, nodes=nodes, anchor=anchor, start=start, end=end,
            valid_until=valid_until, server=server, timings=timings,
        )
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def shared_node_data_prometheus(folder: Path) -> Iterator[PromNodeData]:
    """`node_data_prometheus`'s data, built once into `folder` by whichever process asks
    first (the others wait on its lock), served by a Prometheus of this process' own
    from a copy of that TSDB: the same data, anchor and truth in every worker."""
    folder.mkdir(parents=True, exist_ok=True)
    built = folder / "built.json"
    with exclusive(folder / "build.lock"):
        if not built.exists():
            with node_data_prometheus() as data:
                data.server.stop()  # a closed TSDB, whole on disk
                shutil.copytree(data.server.tsdb_dir, folder / "tsdb")
                built.write_text(json.dumps({"anchor": data.anchor, "timings": data.timings}))
    record = json.loads(built.read_text())
    anchor = float(record["anchor"])
    nodes = promdata.default_nodes(anchor)
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-promdata-"))
    server = PrometheusServer(workdir)
    try:
        shutil.copytree(folder / "tsdb", server.tsdb_dir)
        server.start()
        end = anchor + FUTURE
        yield PromNodeData(
            url=server.url, nodes=nodes, anchor=anchor, start=anchor - HISTORY, end=end,
            valid_until=promdata.settled_until(nodes, anchor, end - 10 * promdata.MINUTE),
            server=server, timings=record["timings"],
        )  # fmt: skip
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def prometheus_node_data(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[PromNodeData]:
    """Beside the workers' own temporary folders (an xdist worker's is
    ``<session>/popen-gwN``), or in the session's when run alone."""
    own = tmp_path_factory.getbasetemp()
    session = own if worker_id == "master" else own.parent
    with shared_node_data_prometheus(session / "prometheus-node-data") as data:
        yield data


@pytest.fixture
def empty_prometheus() -> Iterator[PrometheusServer]:
    """A running Prometheus with an empty TSDB (`.url`); about 0.2 s to start."""
    workdir = Path(tempfile.mkdtemp(prefix="loadaware-promempty-"))
    server = PrometheusServer(workdir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


_PROM_FIXTURES = {"prometheus_node_data", "empty_prometheus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # So `-m "not prometheus"` skips every test that would start a server.
    for item in items:
        if _PROM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.prometheus)

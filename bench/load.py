"""The extender under a busy cluster's load, for a bounded time.

Three processes, so that each one's CPU and memory are its own:

- **the extender**: ``loadaware extender`` as a subprocess, in node-cache mode with the
  pod cache on and a policy with ``estimation: {enabled: true}``, reading nodes and
  pods from the fake API server through the real lightkube client (``--kubeconfig``);
- **the cluster** (this process): the project's fake API server
  (``tests/support/fakekube.py``) holding 5,000 nodes and a standing set of bound pods,
  and a churn thread that changes it at fixed rates: node annotation updates (fresh
  ``format_usage`` values, 50/s) and pod bindings (a new Pending pod, then the store's
  binding subresource, 100/s), deleting the oldest pod for each one bound so that the
  pod count stays constant, as a real cluster's churn does. The churn writes to the
  store directly, not over HTTP, so the fake server's CPU goes to the extender's
  watches; the extender sees the same watch events either way. The RSS sampler reads
  the extender's ``/proc/<pid>/status`` here;
- **the load generator**: 16 concurrent keep-alive clients (kube-scheduler's
  ``parallelism`` default) over raw asyncio streams, each alternating ``/filter`` and
  ``/prioritize`` over 500 of the 5,000 cached node names. Every request is a new pod
  (new UID) with requests and limits, built from the captured kube-scheduler body in
  ``tests/fixtures/kube-scheduler/``, so every ``prioritize`` can reserve.

An answer is an error unless it is HTTP 200 with the verb's shape: filter accounts for
every name (passed or failed, no ``Error``), prioritize scores every name 0-10.

Memory that grows legitimately: reservations live for ``--reservation-ttl`` (15 s, the
extender's default) unless their pod is bound, and these request pods never are, so the
reserve fills for one TTL and then holds steady. The second half of the run must come
after that (``--duration`` > 2 x TTL); growth is measured from the middle to the end.

    python bench/load.py                  # 60 s
    python bench/load.py --duration 6 --reservation-ttl 2 --json    # the CI smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    # `python bench/load.py`: make the repository root importable for `app` and `tests`.
    sys.path.insert(0, str(ROOT))

from app.load.samples import format_usage  # noqa: E402
from app.policy import DEFAULT_POLICY_YAML, default_policy  # noqa: E402
from tests.support.fakekube import NODES, PODS, FakeKubeServer, FakeKubeStore  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "kube-scheduler" / "prioritize-nodecache.json"
METRICS = default_policy().metrics
VERBS = ("filter", "prioritize")
#: Stands in for each request's pod UID in the pre-encoded bodies (same length as a UUID).
UID_MARK = b"00000000-feed-face-0000-000000000000"
NAME_SETS = 500  # distinct name samples the clients cycle through, each with one cool node
RSS_PERIOD_S = 0.25
ERROR_EXAMPLES = 5
REPORTED_METRICS = (
    "loadaware_extender_reservation",
    "loadaware_extender_pods_cached",
    "loadaware_extender_nodes ",
)


@dataclass(frozen=True)
class LoadConfig:
    duration_s: float = 60.0
    clients: int = 16
    nodes: int = 5_000
    names: int = 500
    standing_pods: int = 5_000
    annotation_updates_per_s: float = 50.0
    bindings_per_s: float = 100.0
    reservation_ttl_s: float = 15.0
    seed: int = 1


@dataclass
class VerbStats:
    verb: str
    requests: int
    per_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    errors: int


@dataclass
class RssStats:
    at_start_mib: float
    at_middle_mib: float
    at_end_mib: float
    max_mib: float
    second_half_growth_pct: float
    samples: int


@dataclass
class LoadReport:
    config: LoadConfig
    verbs: list[VerbStats]
    errors: int
    error_examples: list[str]
    rss: RssStats
    annotation_updates: int
    bindings: int
    deletions: int
    pods_at_end: int
    extender_cpu_cores: float
    generator_cpu_cores: float
    extender_metrics: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------- the cluster


def node_name(index: int) -> str:
    return f"node-{index:05d}"


def is_cool(index: int) -> bool:
    """The first NAME_SETS nodes: each name sample holds one, the clear best score."""
    return index < NAME_SETS


def usage(rng: random.Random, index: int) -> dict[str, str]:
    """Fresh annotations: a cool node near idle, the others at CPU 0.3-0.6, one in ten
    over crane's 0.65 limit (so that filter answers carry failures)."""
    if is_cool(index):
        cpu, mem = 0.02, 0.05
    else:
        hot = rng.random() < 0.1
        cpu, mem = (
            rng.uniform(0.70, 0.95) if hot else rng.uniform(0.30, 0.60),
            rng.uniform(0.3, 0.6),
        )
    now = time.time()
    return {m: format_usage(cpu if m.startswith("cpu") else mem, now) for m in METRICS}


def pod_object(name: str) -> dict[str, Any]:
    """A pod bound by the churn: a burstable workload."""
    resources = {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "load"}},
        "spec": {"containers": [{"name": "c", "image": "app", "resources": resources}]},
        "status": {"phase": "Pending"},
    }


def seed_cluster(store: FakeKubeStore, config: LoadConfig, rng: random.Random) -> deque[str]:
    """The nodes and the standing bound pods; returns the pod names, oldest first."""
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    for i in range(config.nodes):
        store.add_node(node_name(i), annotations=usage(rng, i), allocatable=allocatable)
    pods: deque[str] = deque()
    for i in range(config.standing_pods):
        name = f"standing-{i:06d}"
        store.add(PODS, pod_object(name))
        store.bind("default", name, node_name(rng.randrange(config.nodes)))
        pods.append(name)
    return pods


class Churn:
    """Node annotation updates and pod bindings at fixed rates, on a thread."""

    def __init__(
        self, store: FakeKubeStore, config: LoadConfig, pods: deque[str], rng: random.Random
    ) -> None:
        self.store, self.config, self.pods, self.rng = store, config, pods, rng
        self.annotation_updates = self.bindings = self.deletions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            elapsed = time.monotonic() - start
            while self.annotation_updates < elapsed * self.config.annotation_updates_per_s:
                self._update_annotations()
            while self.bindings < elapsed * self.config.bindings_per_s:
                self._bind_one()
            self._stop.wait(0.005)

    def _update_annotations(self) -> None:
        index = self.rng.randrange(self.config.nodes)
        fresh = usage(self.rng, index)

        def annotate(node: dict[str, Any]) -> None:
            node["metadata"].setdefault("annotations", {}).update(fresh)

        self.store.modify(NODES, node_name(index), annotate)
        self.annotation_updates += 1

    def _bind_one(self) -> None:
        name = f"churn-{self.bindings:07d}"
        self.store.add(PODS, pod_object(name))
        self.store.bind("default", name, node_name(self.rng.randrange(self.config.nodes)))
        self.pods.append(name)
        self.bindings += 1
        self.store.delete(PODS, self.pods.popleft(), "default")
        self.deletions += 1


# ---------------------------------------------------------------- the extender


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_kubeconfig(path: Path, server: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "anonymous", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "anonymous"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))  # JSON is YAML


@contextmanager
def extender_process(
    workdir: Path, kube_url: str, config: LoadConfig
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``loadaware extender`` on a free loopback port; yields it and its base URL once ready."""
    kubeconfig, policy = workdir / "kubeconfig", workdir / "policy.yaml"
    write_kubeconfig(kubeconfig, kube_url)
    policy.write_text(DEFAULT_POLICY_YAML + "  estimation: {enabled: true}\n")
    port = free_port()
    command = [
        sys.executable, "-m", "app.cli", "--log-level", "warning", "extender",
        "--kubeconfig", str(kubeconfig), "--policy", str(policy),
        "--host", "127.0.0.1", "--port", str(port),
        "--reservation-ttl", str(config.reservation_ttl_s),
    ]  # fmt: skip
    log = (workdir / "extender.log").open("wb")
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(process, url, workdir / "extender.log")
        yield process, url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the extender exited ({process.returncode}):\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the extender was not ready after 60 s:\n{log.read_text()}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class RssSampler:
    """The extender's RSS every RSS_PERIOD_S, as (seconds since start, bytes)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - start, rss_bytes(self.pid)))
            self._stop.wait(RSS_PERIOD_S)


def rss_stats(samples: list[tuple[float, int]], duration_s: float) -> RssStats:
    """Growth in the second half: the median of the last tenth against the median
    around the middle (medians, so that one sample's noise does not decide)."""

    def median_between(lo: float, hi: float) -> float:
        window = [b for t, b in samples if lo * duration_s <= t <= hi * duration_s]
        return statistics.median(window or [samples[-1][1]])

    middle, end = median_between(0.45, 0.55), median_between(0.9, 1.0)
    mib = 2.0**20
    return RssStats(
        at_start_mib=samples[0][1] / mib,
        at_middle_mib=middle / mib,
        at_end_mib=end / mib,
        max_mib=max(b for _, b in samples) / mib,
        second_half_growth_pct=(end - middle) / middle * 100,
        samples=len(samples),
    )


def extender_metrics(url: str) -> dict[str, float]:
    """The extender's reservation counters and cache sizes, for the report."""
    found: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith(REPORTED_METRICS):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


# ---------------------------------------------------------------- the load generator


def body_templates(config: LoadConfig, rng: random.Random) -> list[list[bytes]]:
    """One body per 500-name sample, split where the pod's UID goes (its name has it too)."""
    body = json.loads(FIXTURE.read_text())
    pod = body["Pod"]
    pod["metadata"]["uid"] = UID_MARK.decode()
    pod["metadata"]["name"] = "load-" + UID_MARK.decode()
    # Small, so that a cool node stays the clear best under a TTL's worth of reservations.
    pod["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "5m", "memory": "16Mi"},
        "limits": {"cpu": "10m", "memory": "32Mi"},
    }
    others = [node_name(i) for i in range(config.nodes) if not is_cool(i)]
    templates = []
    for cool in range(NAME_SETS):
        names = [node_name(cool), *rng.sample(others, config.names - 1)]
        rng.shuffle(names)
        body["NodeNames"] = names
        templates.append(orjson.dumps(body).split(UID_MARK))
    return templates


def check_answer(verb: str, status: int, payload: bytes, names: int) -> str | None:
    """None for a good answer, else what was wrong."""
    if status != 200:
        return f"{verb}: HTTP {status}: {payload[:200]!r}"
    try:
        answer = orjson.loads(payload)
    except orjson.JSONDecodeError as error:
        return f"{verb}: malformed JSON: {error}"
    if verb == "filter":
        if not isinstance(answer, dict) or answer.get("Error"):
            return f"filter: not a clean ExtenderFilterResult: {payload[:200]!r}"
        passed = answer.get("NodeNames") or []
        failed = {
            **(answer.get("FailedNodes") or {}),
            **(answer.get("FailedAndUnresolvableNodes") or {}),
        }
        if len(passed) + len(failed) != names:
            return f"filter: {len(passed)} passed + {len(failed)} failed != {names} names"
        return None
    if not isinstance(answer, list) or len(answer) != names:
        return f"prioritize: not a list of {names} HostPriority: {payload[:200]!r}"
    for item in answer:
        if not isinstance(item, dict) or not 0 <= item.get("Score", -1) <= 10:
            return f"prioritize: bad HostPriority {item!r}"
    return None


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


@dataclass
class ClientResult:
    latencies_s: dict[str, array[float]]
    errors: list[str]


async def one_client(
    index: int,
    port: int,
    templates: list[list[bytes]],
    names: int,
    deadline: float,
    result: ClientResult,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    heads = {
        verb: (
            f"POST /{verb} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "User-Agent: Go-http-client/1.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n"
        ).encode()
        for verb in VERBS
    }
    turn = index
    while time.perf_counter() < deadline:
        verb = VERBS[turn % 2]
        parts = templates[turn % len(templates)]
        turn += 1
        body = str(uuid.uuid4()).encode().join(parts)
        request = heads[verb] % len(body) + body
        started = time.perf_counter()
        try:
            writer.write(request)
            status, payload = await read_answer(reader)
        except (OSError, asyncio.IncompleteReadError) as error:
            result.errors.append(f"{verb}: connection failed: {error!r}")
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            continue
        result.latencies_s[verb].append(time.perf_counter() - started)
        problem = check_answer(verb, status, payload, names)
        if problem is not None:
            result.errors.append(problem)
    writer.close()


def generate(port: int, config: LoadConfig, start_at: float, out: Connection) -> None:
    """The generator process: all clients on one event loop; results down ``out``."""
    templates = body_templates(config, random.Random(config.seed))
    result = ClientResult({verb: array("d") for verb in VERBS}, [])

    async def main() -> None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        deadline = time.perf_counter() + config.duration_s
        await asyncio.gather(
            *(
                one_client(i, port, templates, config.names, deadline, result)
                for i in range(config.clients)
            )
        )

    asyncio.run(main())
    out.send(({v: a.tobytes() for v, a in result.latencies_s.items()}, result.errors))
    out.close()


def nearest_rank(ordered: list[float], fraction: float) -> float:
    return ordered[max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.5) - 1))]


def verb_stats(verb: str, latencies: array[float], errors: int, duration_s: float) -> VerbStats:
    ordered = sorted(latencies)
    return VerbStats(
        verb=verb,
        requests=len(ordered),
        per_s=len(ordered) / duration_s,
        p50_ms=nearest_rank(ordered, 0.50) * 1e3,
        p99_ms=nearest_rank(ordered, 0.99) * 1e3,
        p999_ms=nearest_rank(ordered, 0.999) * 1e3,
        max_ms=ordered[-1] * 1e3,
        errors=errors,
    )


# ---------------------------------------------------------------- the run


def run(config: LoadConfig, progress: Callable[[str], None] = print) -> LoadReport:
    rng = random.Random(config.seed)
    store = FakeKubeStore()
    progress(f"seeding {config.nodes:,} nodes and {config.standing_pods:,} bound pods")
    pods = seed_cluster(store, config, rng)
    server = FakeKubeServer(store)
    server.start()
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            extender_process(Path(tmp), server.url, config) as (extender, url),
        ):
            progress(f"extender ready (pid {extender.pid}); {config.duration_s:g} s of load")
            churn, sampler = Churn(store, config, pods, rng), RssSampler(extender.pid)
            receive, send = multiprocessing.get_context("spawn").Pipe(duplex=False)
            start_at = time.time() + 2.0  # the generator's start-up is not load
            generator = multiprocessing.get_context("spawn").Process(
                target=generate, args=(int(url.rsplit(":", 1)[1]), config, start_at, send)
            )
            generator.start()
            time.sleep(max(0.0, start_at - time.time()))
            churn.start()
            sampler.start()
            assert generator.pid is not None
            cpu_before = cpu_seconds(extender.pid), cpu_seconds(generator.pid)
            latencies, errors = receive.recv()
            cpu_used = cpu_seconds(extender.pid) - cpu_before[0]
            generator_cpu_used = cpu_seconds(generator.pid) - cpu_before[1]
            sampler.stop()
            churn.stop()
            generator.join()
            metrics = extender_metrics(url)
    finally:
        server.stop()
    arrays: dict[str, array[float]] = {}
    for verb, raw in latencies.items():
        arrays[verb] = array("d")
        arrays[verb].frombytes(raw)
    return LoadReport(
        config=config,
        verbs=[
            verb_stats(v, arrays[v], sum(e.startswith(v) for e in errors), config.duration_s)
            for v in VERBS
        ],
        errors=len(errors),
        error_examples=errors[:ERROR_EXAMPLES],
        rss=rss_stats(sampler.samples, config.duration_s),
        annotation_updates=churn.annotation_updates,
        bindings=churn.bindings,
        deletions=churn.deletions,
        pods_at_end=len(store.pods()),
        extender_cpu_cores=cpu_used / config.duration_s,
        generator_cpu_cores=generator_cpu_used / config.duration_s,
        extender_metrics=metrics,
    )


def table(report: LoadReport) -> str:
    c = report.config
    lines = [
        f"{c.clients} clients, {c.names} of {c.nodes:,} cached nodes, {c.duration_s:g} s; "
        f"churn: {report.annotation_updates / c.duration_s:.0f} annotation updates/s, "
        f"{report.bindings / c.duration_s:.0f} bindings/s and as many deletions "
        f"({report.pods_at_end:,} pods throughout); "
        f"the extender used {report.extender_cpu_cores:.2f} CPU cores, "
        f"the load generator {report.generator_cpu_cores:.2f}",
        "",
        "| verb | requests | req/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in report.verbs:
        lines.append(
            f"| {s.verb} | {s.requests:,} | {s.per_s:,.0f} | {s.p50_ms:.2f} | {s.p99_ms:.2f} "
            f"| {s.p999_ms:.2f} | {s.max_ms:.2f} | {s.errors} |"
        )
    total = sum(s.requests for s in report.verbs)
    lines.append(f"| both | {total:,} | {total / c.duration_s:,.0f} | | | | | {report.errors} |")
    r = report.rss
    lines += [
        "",
        "| extender RSS | MiB |",
        "|---|---:|",
        f"| when the load starts | {r.at_start_mib:.1f} |",
        f"| middle of the run (median of 45-55 %) | {r.at_middle_mib:.1f} |",
        f"| end of the run (median of the last 10 %) | {r.at_end_mib:.1f} |",
        f"| highest sample | {r.max_mib:.1f} |",
        f"| growth in the second half | {r.second_half_growth_pct:+.2f} % |",
    ]
    for name, value in sorted(report.extender_metrics.items()):
        lines.append(f"\n{name} {value:,.0f}")
    for example in report.error_examples:
        lines.append(f"\nerror: {example}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--names", type=int, default=500, help="node names per request")
    parser.add_argument("--pods", type=int, default=5_000, help="bound pods, kept constant")
    parser.add_argument("--reservation-ttl", type=float, default=15.0, metavar="SECONDS")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    config = LoadConfig(
        duration_s=args.duration,
        clients=args.clients,
        nodes=args.nodes,
        names=args.names,
        standing_pods=args.pods,
        reservation_ttl_s=args.reservation_ttl,
    )
    report = run(config, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(asdict(report)) if args.json else table(report))
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())

"""Scheduling throughput of the real kube-scheduler v1.36, with and without the extender.

A real control plane (tests/e2e/harness.py; binaries from LOADAWARE_KUBE_ASSETS) holds
1,000 Nodes (8 CPU, 32 GiB) with fresh usage annotations spread over 0.10-0.60 CPU, a
tenth of them over the 0.65 limit. Each round creates a backlog of pods (request 100m,
limit 500m: small enough that the cluster takes them all, so every pod must be bound),
then starts kube-scheduler and times it from the first binding to the last (seen by a
watch, so kube-scheduler's start-up is not counted). Rounds:

* ``without``: kube-scheduler alone;
* ``estimation off``: kube-scheduler calling ``loadaware extender`` (node cache, pod
  cache, NodeNames mode, weight 2) with the policy's estimation off: no reservations;
* ``estimation on``: the same with estimation on (the default), so every pod's
  prioritize answer names a preferred node and reserves there.

The three run one after the other in each pass, the order rotating between passes;
pods/s is bound pods over the time from the first binding to the last, and ratios are
taken between rounds of the same pass. ``on / off`` is the cost of the reservation
scheme itself; ``on / without`` the cost of the extender as a whole.
The extender's answers never hold a node for a pod that will not go there, so the
scheme costs no spurious rejections: the table counts FailedScheduling events too.

    LOADAWARE_KUBE_ASSETS=/path/to/binaries python bench/scheduling.py [--pods 500]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

from app.policy import DEFAULT_POLICY_YAML
from tests.e2e.burst import annotations_at, extender_entry
from tests.e2e.harness import (
    ControlPlane,
    assets_dir,
    pod_object,
    scheduler_config,
    start_control_plane,
    wait_until,
)

NAMESPACE = "bench"


def make_nodes(cluster: ControlPlane, count: int, seed: int) -> None:
    # One at a time: lightkube's from_dict (msgspec) is not safe to call from threads.
    rng = random.Random(seed)
    for i in range(count):
        usage = 0.70 if i % 10 == 0 else rng.uniform(0.10, 0.60)
        cluster.make_node(
            f"node-{i:04d}", cpu="8", memory="32Gi", annotations=annotations_at(usage)
        )


def create_backlog(client: Client, count: int, round_: str) -> None:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m"}}
    for i in range(count):
        client.create(
            pod_object(
                {
                    "metadata": {"name": f"{round_}-{i:05d}", "namespace": NAMESPACE},
                    "spec": {
                        "containers": [{"name": "c", "image": "x", "resources": resources}],
                        "terminationGracePeriodSeconds": 0,
                    },
                }
            )
        )


def bound(client: Client, prefix: str) -> int:
    return sum(
        1
        for pod in client.list(Pod, namespace=NAMESPACE)
        if pod.metadata is not None
        and (pod.metadata.name or "").startswith(prefix)
        and pod.spec is not None
        and pod.spec.nodeName
    )


def failed_scheduling(client: Client, prefix: str) -> int:
    return sum(
        int(event.count or 1)
        for event in client.list(Event, namespace=NAMESPACE)
        if event.reason == "FailedScheduling"
        and (event.involvedObject.name or "").startswith(prefix)
    )


SETUPS = ("without", "estimation off", "estimation on")


def run_round(
    cluster: ControlPlane, pods: int, name: str, setup: str, qps: int | None, policies: Path
) -> tuple[float, int]:
    """Seconds kube-scheduler took to bind the backlog; FailedScheduling count."""
    client = cluster.client()
    create_backlog(client, pods, name)
    connection = {} if qps is None else {"clientConnection": {"qps": qps, "burst": 2 * qps}}
    if setup == "without":
        seconds = _time_scheduler(cluster, client, scheduler_config() | connection, name, pods)
    else:
        enabled = setup == "estimation on"
        policy = policies / f"estimation-{'on' if enabled else 'off'}.yaml"
        policy.write_text(DEFAULT_POLICY_YAML + f"  estimation: {{enabled: {enabled}}}\n")
        with cluster.extender("--policy", str(policy)) as extender:
            config = scheduler_config([extender_entry(extender.url, node_cache_capable=True)])
            seconds = _time_scheduler(cluster, client, config | connection, name, pods)
    failures = failed_scheduling(client, name)
    client.deletecollection(Pod, namespace=NAMESPACE, grace_period=0)
    wait_until(lambda: not list(client.list(Pod, namespace=NAMESPACE)), 120, "pods deleted")
    return seconds, failures


def _time_scheduler(
    cluster: ControlPlane, client: Client, config: dict[str, object], name: str, pods: int
) -> float:
    """Seconds between the first and the last binding, seen by a watch opened before
    kube-scheduler starts (its start-up is not part of the throughput)."""
    times: list[float] = []
    seen: set[str] = set()
    ready = threading.Event()

    def watch() -> None:
        watcher = cluster.client()  # one client per thread
        stream = watcher.watch(Pod, namespace=NAMESPACE, resource_version=None)
        ready.set()
        for _, pod in stream:
            pod_name = pod.metadata.name if pod.metadata else None
            if pod_name and pod_name.startswith(name) and pod.spec and pod.spec.nodeName:
                if pod_name not in seen:
                    seen.add(pod_name)
                    times.append(time.monotonic())
                if len(seen) == pods:
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    ready.wait(30)
    with cluster.scheduler(config):
        wait_until(lambda: bound(client, name) == pods, 600, f"{pods} pods bound")
        thread.join(60)
    assert len(times) == pods, f"the watch saw {len(times)} of {pods} bindings"
    return (times[-1] - times[0]) * pods / (pods - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--qps",
        type=int,
        default=None,
        help="kube-scheduler's API client QPS (burst twice that); default: its own, 50",
    )
    flags = parser.parse_args()
    assets = assets_dir()
    if assets is None:
        print("set LOADAWARE_KUBE_ASSETS to a folder with the control-plane binaries")
        return 2
    with tempfile.TemporaryDirectory(prefix="loadaware-bench-") as workdir:
        cluster = start_control_plane(assets, Path(workdir))
        try:
            cluster.namespace(NAMESPACE)
            print(f"creating {flags.nodes:,} nodes ...", file=sys.stderr)
            make_nodes(cluster, flags.nodes, flags.seed)
            rows = []
            for number in range(flags.passes):
                order = SETUPS[number % 3 :] + SETUPS[: number % 3]  # rotate who goes first
                results = {}
                for setup in order:
                    print(f"pass {number + 1}: {setup} ...", file=sys.stderr)
                    label = setup.replace(" ", "-")
                    results[setup] = run_round(
                        cluster, flags.pods, f"p{number}-{label}", setup, flags.qps, Path(workdir)
                    )
                rows.append(results)
        finally:
            cluster.stop()
    print(
        f"\nkube-scheduler v1.36 throughput, {flags.nodes:,} nodes, a backlog of "
        f"{flags.pods:,} pods per round, kube-scheduler client QPS {flags.qps or '50 (default)'} "
        "(bound pods / time from the first binding to the last)\n"
    )
    print("| pass | without extender: pods/s | estimation off: pods/s | estimation on: pods/s "
          "| on / without | on / off | FailedScheduling (without, off, on) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---|")
    ratios: dict[str, list[float]] = {"on / without": [], "on / off": []}
    for number, results in enumerate(rows, start=1):
        rate = {setup: flags.pods / results[setup][0] for setup in SETUPS}
        failed = ", ".join(str(results[setup][1]) for setup in SETUPS)
        on_without = rate["estimation on"] / rate["without"]
        on_off = rate["estimation on"] / rate["estimation off"]
        ratios["on / without"].append(on_without)
        ratios["on / off"].append(on_off)
        print(
            f"| {number} | {rate['without']:,.0f} | {rate['estimation off']:,.0f} "
            f"| {rate['estimation on']:,.0f} | {on_without:.2f} | {on_off:.2f} | {failed} |"
        )
    for name, values in ratios.items():
        print(f"median {name}: {statistics.median(values):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

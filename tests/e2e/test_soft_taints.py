"""Soft taints on a real control plane, with the STOCK kube-scheduler and no extender.

The annotator runs as its own identity with the shipped RBAC and ``--soft-taints``,
leader-elected on its Lease, on short settings (a round every second, a hold of a few
seconds). A node is made hot either by a real sync from the session's Prometheus
(node-busy: cpu 70 % against the default policy's 65 % limit) or, where a test needs
the load to change over time, by annotations the test writes itself on nodes
Prometheus has no series for (the annotator leaves those alone). kube-scheduler runs
with its default profile: what keeps pods off the tainted node is TaintToleration's
score, nothing of loadaware's.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod

from app.descheduler.descheduler import RunResult
from app.kube import state
from app.load import format_usage
from app.load.taints import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY
from app.rebalance import NodeKind, SkipCode, render_plan
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from tests.descheduler.cluster import load_annotations
from tests.e2e.descheduler import deployment, descheduler_allowed, pinned_deployment, run_once
from tests.e2e.harness import REPO, ControlPlane, Process, pod_object, scheduler_config, wait_until
from tests.support.cadvisor import PodSeries, cadvisor_prometheus
from tests.support.prom_fixtures import PromNodeData

HOLD_S = 8.0
SOFT_TAINT_FLAGS = (
    "--soft-taints",
    "--soft-taint-interval", "1s",
    "--soft-taint-hold", f"{HOLD_S:g}s",
    "--soft-taint-max-share", "0.5",
    # The descheduler's state, read for its evictions (drained nodes keep their taint),
    # where the shipped Role lets the annotator read it.
    "--descheduler-state-namespace", "loadaware",
    # Leader-elected as deployed (its Lease in loadaware, by the shipped Role), on
    # short timings: only the leader writes.
    "--lease-namespace", "loadaware",
    "--leader-elect-lease-duration", "3s",
    "--leader-elect-renew-deadline", "2s",
    "--leader-elect-retry-period", "500ms",
)  # fmt: skip


def soft_tainted(client: Client, name: str) -> bool:
    node = client.get(Node, name)
    taints = (node.spec.taints if node.spec is not None else None) or []
    return any(t.key == SOFT_TAINT_KEY and t.effect == SOFT_TAINT_EFFECT for t in taints)


def set_cpu(client: Client, name: str, usage: float, at_s: float | None = None) -> None:
    stamp = time.time() if at_s is None else at_s
    annotations = {"cpu_usage_avg_5m": format_usage(usage, stamp)}
    client.patch(Node, name, {"metadata": {"annotations": annotations}})


@contextlib.contextmanager
def annotator(cluster: ControlPlane, prometheus_url: str) -> Iterator[Process]:
    """The annotator with soft taints on; ready once every metric has synced once."""
    cluster.grant(REPO / "deploy" / "base" / "annotator-rbac.yaml", "loadaware-annotator")
    kubeconfig = cluster.kubeconfig_for("loadaware-annotator")
    flags = ("--prometheus-url", prometheus_url, *SOFT_TAINT_FLAGS)
    with cluster.loadaware("annotator", *flags, kubeconfig=kubeconfig) as process:
        yield process


def bare_pod(namespace: str, name: str, cpu: str) -> Pod:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "example.invalid/app",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }
    return pod_object(body)


def placement(client: Client, namespace: str) -> dict[str, str | None]:
    return {
        pod.metadata.name or "": pod.spec.nodeName if pod.spec else None
        for pod in client.list(Pod, namespace=namespace)
        if pod.metadata is not None and pod.metadata.deletionTimestamp is None
    }


@pytest.mark.prometheus
def test_a_hot_node_is_tainted_within_one_sync_and_a_backlog_goes_there_last(
    cluster: ControlPlane, namespace: str, prometheus_node_data: PromNodeData
) -> None:
    data = prometheus_node_data
    for name in ("node-busy", "node-cool"):  # cpu 70 % and 5 %, 4 cores each
        spec = data.node(name)
        cluster.make_node(name, cpu="4", internal_ip=spec.internal_ip)
    cluster.make_node("spare", cpu="4", internal_ip="192.0.2.9")  # no series: never hot
    client = cluster.client()
    with annotator(cluster, data.url) as process:
        # Ready means every metric synced once; the taint follows within a round.
        wait_until(lambda: soft_tainted(client, "node-busy"), 5, "node-busy tainted")
        assert not soft_tainted(client, "node-cool")
        assert not soft_tainted(client, "spare")
        # 10 pods of 1 core: the two untainted nodes hold 8, so exactly 2 must go to
        # node-busy. Without the taint the request-based plugins spread them evenly.
        for i in range(10):
            client.create(bare_pod(namespace, f"p-{i}", "1"))
        with cluster.scheduler(scheduler_config()):
            wait_until(lambda: all(placement(client, namespace).values()), 60, "10 pods bound")
        log = process.log_path.read_text()
    placed = list(placement(client, namespace).values())
    assert placed.count("node-busy") == 2, placed
    assert placed.count("node-cool") == placed.count("spare") == 4, placed
    assert "soft taint put on node node-busy: hot: cpu_usage_avg_5m 0.70 > 0.65" in log
    # node-busy stays hot (70 %) throughout. Its taint may still go once the backlog's
    # estimate makes the other nodes hot too (a round between the 8th bind and the
    # last: the taints are bounded by the nodes that are not hot), and only so.
    taken_off = [line for line in log.splitlines() if "soft taint taken off node node-busy" in line]
    assert all("over the share" in line for line in taken_off), taken_off


@pytest.mark.prometheus
def test_the_taint_stays_through_a_dip_goes_when_cool_and_at_once_when_stale(
    cluster: ControlPlane, prometheus_node_data: PromNodeData
) -> None:
    client = cluster.client()
    for name in ("a", "b", "c"):
        cluster.make_node(name, internal_ip=f"192.0.2.{ord(name)}")  # no series: ours
        set_cpu(client, name, 0.90 if name == "a" else 0.20)
    with annotator(cluster, prometheus_node_data.url):
        wait_until(lambda: soft_tainted(client, "a"), 5, "a tainted")
        set_cpu(client, "a", 0.60)  # a dip below the limit, above the lower line (0.55)
        time.sleep(2.5)
        assert soft_tainted(client, "a")
        cool_at = time.monotonic()
        set_cpu(client, "a", 0.20)  # cool: the hold starts from the last warm reading
        time.sleep(HOLD_S / 2)
        assert soft_tainted(client, "a")
        wait_until(lambda: not soft_tainted(client, "a"), HOLD_S + 10, "a untainted")
        assert time.monotonic() - cool_at >= HOLD_S - 1.0
        set_cpu(client, "a", 0.90)
        wait_until(lambda: soft_tainted(client, "a"), 5, "a tainted again")
        stale_at = time.monotonic()
        set_cpu(client, "a", 0.90, at_s=time.time() - 3 * 3600)  # stale: fail open
        wait_until(
            lambda: not soft_tainted(client, "a"), HOLD_S - 3, "a untainted at once",
            interval_s=0.2,  # timed just below: polled as often as ever
        )  # fmt: skip
        assert time.monotonic() - stale_at < HOLD_S - 3
        assert not soft_tainted(client, "b")
        assert not soft_tainted(client, "c")


@contextlib.contextmanager
def eviction_recorded(client: Client, workload: str | None) -> Iterator[None]:
    """The descheduler's state ConfigMap recording 2 cores of ``shop/web-1`` evicted
    from ``a`` to ``b`` just now (of ``workload``), as the descheduler writes it;
    deleted after."""
    record = {
        "pod": "shop/web-1", "uid": "uid-web-1", "node": "a", "destination": "b",
        "cpuCores": 2.0, "memoryBytes": 2**28, "at": time.time(), "workload": workload,
    }  # fmt: skip
    document = {"version": 1, "evictions": [record], "hotRounds": {}}
    memory = ConfigMap(
        metadata=ObjectMeta(name=state.DEFAULT_NAME, namespace="loadaware"),
        data={state.STATE_KEY: json.dumps(document)},
    )
    with contextlib.suppress(ApiError):  # its namespace, if no test made it yet
        client.create(Namespace(metadata=ObjectMeta(name="loadaware")))
    client.create(memory)
    try:
        yield
    finally:
        client.delete(ConfigMap, state.DEFAULT_NAME, namespace="loadaware")


@pytest.mark.prometheus
def test_a_drained_node_keeps_its_taint_while_the_largest_pod_evicted_from_it_would_not_fit(
    cluster: ControlPlane, prometheus_node_data: PromNodeData
) -> None:
    """The descheduler's state records 2 cores evicted from ``a`` (8 cores): cool at
    0.50, ``a`` would be back at 0.75 with that pod, over the 0.65 limit, so it keeps
    its taint past the hold; at 0.25 (0.50 with it, under the lower line, so the guard
    ahead of the replacements leaves it too: app/load/landing_guard.py) the taint goes.
    Read through the shipped Role, from the ConfigMap only the descheduler may write."""
    client = cluster.client()
    for name in ("a", "b", "c"):
        cluster.make_node(name, internal_ip=f"192.0.2.{ord(name)}")  # no series: ours
        set_cpu(client, name, 0.90 if name == "a" else 0.20)
    with (
        eviction_recorded(client, workload=None),
        annotator(cluster, prometheus_node_data.url) as process,
    ):
        wait_until(lambda: soft_tainted(client, "a"), 5, "a tainted")
        set_cpu(client, "a", 0.50)  # cool: below the lower line (0.55)
        time.sleep(HOLD_S + 4)
        assert soft_tainted(client, "a")
        set_cpu(client, "a", 0.25)
        wait_until(lambda: not soft_tainted(client, "a"), HOLD_S + 10, "a untainted")
        log = process.log_path.read_text()
    assert "cannot read the descheduler's evictions" not in log
    assert "soft taint kept on node a, drained by the descheduler" in log


def test_the_guard_taints_a_node_the_moved_pod_would_warm_until_another_pod_arrives(
    cluster: ControlPlane, namespace: str, prometheus_node_data: PromNodeData
) -> None:
    """The descheduler's state records 2 cores of ``shop/web`` evicted from ``a`` just
    now: ``b`` at 0.45 would read 0.70 with that pod, above the lower line, while ``c``
    (0.20) stays cool, so the guard ahead of the replacements taints ``b``
    (app/load/landing_guard.py). A bare pod bound on ``c`` is no replacement: the guard
    stands down and ``b`` loses its taint at the next round."""
    client = cluster.client()
    for name, cpu in (("a", 0.90), ("b", 0.45), ("c", 0.20)):
        cluster.make_node(name, internal_ip=f"192.0.2.{ord(name)}")  # no series: ours
        set_cpu(client, name, cpu)
    with (
        eviction_recorded(client, workload="shop/Deployment/web"),
        annotator(cluster, prometheus_node_data.url),
    ):
        wait_until(lambda: soft_tainted(client, "a"), 5, "a tainted")
        wait_until(lambda: soft_tainted(client, "b"), 10, "b tainted by the guard")
        assert not soft_tainted(client, "c")
        newcomer = bare_pod(namespace, "newcomer", "100m")
        assert newcomer.spec is not None
        newcomer.spec.nodeName = "c"
        client.create(newcomer)
        wait_until(lambda: not soft_tainted(client, "b"), 10, "b untainted")
        assert soft_tainted(client, "a")


@pytest.mark.prometheus
def test_a_pod_evicted_from_a_tainted_node_is_replaced_elsewhere(
    cluster: ControlPlane, namespace: str, prometheus_node_data: PromNodeData
) -> None:
    """The descheduler with ``scheduler: soft-taints`` (the soft-taints overlay's):
    the hot node is no source until the annotator taints it; then pods leave it and
    the stock scheduler places their replacements on the cool nodes (here hot is the
    fullest by requests; the next test has it the emptiest)."""
    client = cluster.client()
    web_on_hot(cluster, namespace, hot_cpu=0.85, hot_fill="2", cool_fill="1", web=4, web_cpu="250m")
    before = set(web_pods(client, namespace))
    series = pod_series(client, namespace, web_cores=0.3)
    config = soft_taints_config()
    with descheduler_allowed(cluster), cadvisor_prometheus(series) as prometheus_url:
        untainted = run_once(cluster, prometheus_url, config)
        assert untainted.result is RunResult.OK, untainted.message
        assert untainted.plan is not None
        assert untainted.plan.node_classes["hot"].kind is NodeKind.UNTAINTED
        assert untainted.evicted == []
        with annotator(cluster, prometheus_node_data.url):
            wait_until(lambda: soft_tainted(client, "hot"), 5, "hot tainted")
            report = run_once(cluster, prometheus_url, config)
            assert report.result is RunResult.OK, report.message
            assert report.plan is not None
            text = render_plan(report.plan)
            assert report.plan.scheduler == "soft-taints"
            assert "Scheduler: soft-taints: " in text, text
            assert report.evicted, text
            assert {e.source for e in report.plan.evictions} == {"hot"}, text
            cluster.kubelet_reap(namespace)
            with cluster.scheduler(scheduler_config()):
                wait_until(
                    lambda: len(web_pods(client, namespace)) == 4, 60, "the replacements bound"
                )
            assert soft_tainted(client, "hot")
    after = web_pods(client, namespace)
    replacements = set(after) - before
    assert len(replacements) == len(report.evicted), after
    assert {after[name] for name in replacements} <= {"cool-1", "cool-2"}, after


def ran_an_hour(client: Client, namespace: str) -> None:
    """Date every pod's binding an hour back, as the kubelet would have reported it:
    the planner counts a pod bound after its node's sample as usage still to come."""
    an_hour_ago = datetime.fromtimestamp(time.time() - 3600, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for pod in client.list(Pod, namespace=namespace):
        if pod.metadata is None or pod.status is None:
            continue
        conditions = [
            {"type": c.type, "status": c.status, "lastTransitionTime": an_hour_ago}
            for c in pod.status.conditions or []
        ]
        client.patch(
            Pod.Status,
            pod.metadata.name or "",
            {"status": {"conditions": conditions}},
            namespace=namespace,
        )


def web_pods(client: Client, namespace: str) -> dict[str, str]:
    """The bound web pods not being deleted, and their nodes."""
    return {
        name: node
        for name, node in placement(client, namespace).items()
        if name.startswith("web") and node is not None
    }


# The autoscalers' opt-outs, as pod annotations (issue 40): never evicted, by any path.
OPT_OUTS = (
    {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    {"karpenter.sh/do-not-disrupt": "true"},
    {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
)


@pytest.mark.prometheus
@pytest.mark.parametrize("opted_out", [0, len(OPT_OUTS)])
def test_many_small_pods_grown_hot_after_placement_are_cooled_beside_the_stock_scheduler(
    cluster: ControlPlane, namespace: str, prometheus_node_data: PromNodeData, opted_out: int
) -> None:
    """Issue 40: a node whose many small pods grow hot after placement, beside the stock
    kube-scheduler (default profile, no extender). The annotator taints it; the
    descheduler (``scheduler: soft-taints``) then cools it below targetThresholds within
    3 rounds; every replacement lands on an untainted node; no pod is evicted twice.
    The same run with ``opted_out`` of the pods carrying an autoscaler's opt-out
    (``safe-to-evict: "false"``, ``do-not-disrupt: "true"``) cools it from the others
    and never evicts those.

    By requests "hot" is the emptiest node (eight pods of 100m against 1.5 cores on each
    cool node): kube-scheduler would put a replacement back there but for the taint.
    The rule that kept such pods ("once its soft taint goes, kube-scheduler would refill
    it") evicted nothing here."""
    client = cluster.client()
    web_on_hot(cluster, namespace, hot_cpu=0.3, hot_fill=None, cool_fill="1500m", web=8,
               web_cpu="100m")  # fmt: skip
    # 3 of the 8 (1.2 cores) opted out: the 5 others (2 cores) still shed the 1 core
    # above 65 %, two a round.
    kept = sorted(web_pods(client, namespace))[:opted_out]
    for name, opt_out in zip(kept, OPT_OUTS[:opted_out], strict=True):
        client.patch(Pod, name, {"metadata": {"annotations": opt_out}}, namespace=namespace)
    # After placement, the web pods grow: 0.4 core each, hot at 90 % of its 4 cores.
    client.patch(Node, "hot", {"metadata": {"annotations": load_annotations(0.9)}})
    series = pod_series(client, namespace, web_cores=0.4)
    config = soft_taints_config(
        maxNoOfPodsToEvictPerNode=2,  # so that cooling takes more than one round
        workloadCooldown="0s",
        returnCooldown="0s",
    )
    evicted: list[str] = []
    replaced: dict[str, str] = {}
    seen_opted: set[str] = set()  # skipped as opted out (code opted_out)
    rounds_to_cool: int | None = None
    with (
        descheduler_allowed(cluster),
        cadvisor_prometheus(series) as prometheus_url,
        annotator(cluster, prometheus_node_data.url),
    ):
        wait_until(lambda: soft_tainted(client, "hot"), 5, "hot tainted")
        for round_ in range(4):  # up to 3 rounds that evict, and one to see it cool
            before = set(web_pods(client, namespace))
            report = run_once(cluster, prometheus_url, config)
            assert report.result is RunResult.OK, report.message
            assert report.plan is not None
            text = render_plan(report.plan)
            hot = report.plan.node_classes["hot"]
            if hot.kind is not NodeKind.SOURCE:
                assert hot.usage_fraction["cpu"] <= 0.65, text
                rounds_to_cool = round_
                break
            assert report.evicted, text
            assert {e.source for e in report.plan.evictions} == {"hot"}, text
            opted = {s.pod_key.split("/")[1] for s in report.plan.skipped
                     if s.code is SkipCode.OPTED_OUT}  # fmt: skip
            assert opted <= set(kept), text
            seen_opted |= opted
            evicted += report.evicted
            cluster.kubelet_reap(namespace)
            with cluster.scheduler(scheduler_config()):
                wait_until(lambda: len(web_pods(client, namespace)) == 8, 60, "replaced")
            cluster.kubelet_mark_ready(namespace)
            after = web_pods(client, namespace)
            landed = {name: after[name] for name in set(after) - before}
            # Every replacement on a node without the soft taint as it landed.
            assert not any(soft_tainted(client, node) for node in set(landed.values())), landed
            replaced.update(landed)
            assert soft_tainted(client, "hot")
    assert rounds_to_cool is not None, (evicted, replaced)
    assert 2 <= rounds_to_cool <= 3  # two pods a run: more than one round, at most three
    assert len(evicted) == len(set(evicted)) == len(replaced) >= 3, (evicted, replaced)
    evicted_names = {key.split("/")[1] for key in evicted}  # the report's keys: ns/name
    assert not evicted_names & set(replaced)  # no replacement was evicted in turn
    assert set(replaced.values()) <= {"cool-1", "cool-2"}, replaced  # the untainted ones
    assert not evicted_names & set(kept), evicted  # the opt-outs: skipped, never evicted
    assert seen_opted == set(kept)
    assert all(web_pods(client, namespace).get(name) == "hot" for name in kept)


def web_on_hot(
    cluster: ControlPlane,
    namespace: str,
    *,
    hot_cpu: float,
    hot_fill: str | None,
    cool_fill: str,
    web: int,
    web_cpu: str,
) -> None:
    """Nodes "hot" (at ``hot_cpu`` of its 4 cores, with a pod requesting ``hot_fill``)
    and "cool-1", "cool-2" (at 20 %, each with a pod requesting ``cool_fill``); ``web``
    pods of ``web_cpu`` all bound on hot by the stock scheduler (the cool nodes cordoned
    meanwhile), every pod Ready and bound an hour ago (so its usage is in the samples)."""
    client = cluster.client()
    annotations = load_annotations(hot_cpu)
    cluster.make_node("hot", cpu="4", annotations=annotations, internal_ip="192.0.2.1")
    if hot_fill is not None:
        client.create(pinned_deployment(namespace, "fill-hot", 1, hot_fill, "1Gi", node="hot"))
    for name in ("cool-1", "cool-2"):
        cluster.make_node(name, cpu="4", annotations=load_annotations(0.2), internal_ip="192.0.2.2")
        client.create(pinned_deployment(namespace, f"fill-{name}", 1, cool_fill, "1Gi", node=name))
        client.patch(Node, name, {"spec": {"unschedulable": True}})  # web lands on hot
    client.create(deployment(namespace, "web", web, cpu=web_cpu))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: len(web_pods(client, namespace)) == web, 60, "web pods bound")
    assert set(web_pods(client, namespace).values()) == {"hot"}
    for name in ("cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == web + 2 + (hot_fill is not None)
    ran_an_hour(client, namespace)


def pod_series(client: Client, namespace: str, *, web_cores: float) -> list[PodSeries]:
    """Each bound pod's usage series: ``web_cores`` for a web pod, 0.1 for the others."""
    series = []
    for pod, node in placement(client, namespace).items():
        if node is not None:
            cores = web_cores if pod.startswith("web") else 0.1
            series.append(PodSeries(namespace, pod, {"app": (cores, 2**27)}, node=node))
    return series


def soft_taints_config(**fields: Any) -> DeschedulerConfig:
    """The descheduler beside the stock scheduler and its soft taints, as the
    soft-taints overlay configures it, every round acting at once and the per-workload
    limits open (the run may move as many web pods as it sees fit); ``fields`` added."""
    return config_from_mapping(
        {
            "scheduler": "soft-taints",
            "consecutiveHotRounds": 1,
            "evictionsPerSecond": 50,
            "maxMigratingPerWorkload": 10,
            "maxUnavailablePerWorkload": "100%",
            **fields,
        }
    )

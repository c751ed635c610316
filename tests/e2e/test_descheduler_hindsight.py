"""On a real control plane: an eviction that helped and one that could not (its
replacement, pinned to its node, came straight back) are told apart settleTime later,
in an Event on each workload, in the outcome metric and in ``loadaware report``; and
the node where it did not help is backed off at once. The report, run as the
read-only explain user against the same real Prometheus, also counts node-minutes
above the limits before the evictions and the workloads' restarts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube.resources.core_v1 import Event, Node

from app.cli import main
from app.descheduler.descheduler import RunResult
from app.descheduler.telemetry import DeschedulerMetrics
from app.kube.events import OUTCOME_REASON
from app.rebalance.config import config_from_mapping
from app.rebalance.outcome import SkipCode
from tests.descheduler.cluster import load_annotations
from tests.e2e.burst import scheduler_with_shared_extender
from tests.e2e.descheduler import deployment, descheduler_allowed, pinned_deployment, run_once
from tests.e2e.harness import ControlPlane, scheduler_config, wait_until
from tests.e2e.test_descheduler_placement import all_bound, live_pods, make_nodes, usage_series
from tests.e2e.test_explain import USER as EXPLAIN_USER
from tests.e2e.test_explain import explain_allowed
from tests.support.cadvisor import Counter, cadvisor_prometheus

OUTCOMES = "loadaware_descheduler_eviction_outcomes_total"


@pytest.fixture
def descheduler_state(cluster: ControlPlane) -> Iterator[None]:
    with descheduler_allowed(cluster):
        yield


def test_an_eviction_that_helped_and_one_that_could_not_are_told_apart(
    cluster: ControlPlane,
    namespace: str,
    descheduler_state: None,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nodes = {"hot": (0.85, "a"), "hot-b": (0.85, "a"), "cool-1": (0.2, "a"), "cool-2": (0.2, "a")}
    make_nodes(cluster, nodes)
    client = cluster.client()
    # web is placed on hot by the real scheduler while the others are cordoned; api is
    # pinned to hot-b (spec.nodeName): its replacement can only come back there.
    for name in ("hot-b", "cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": True}})
    client.create(deployment(namespace, "web", 4))
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: all_bound(client, namespace, 4), 120, "4 web pods on hot")
    for name in ("hot-b", "cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": False}})
    client.create(pinned_deployment(namespace, "api", 4, "250m", "128Mi", node="hot-b"))
    wait_until(lambda: all_bound(client, namespace, 8), 60, "4 api pods on hot-b")
    assert cluster.kubelet_mark_ready(namespace) == 8
    config = config_from_mapping(
        {"consecutiveHotRounds": 1, "evictionsPerSecond": 50, "settleTime": "1s"}
    )
    with cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url:
        first = run_once(cluster, prometheus_url, config)
    assert first.result is RunResult.OK, first.message
    assert first.plan is not None
    sources = {e.source: e for e in first.plan.evictions if e.pod.key in first.evicted}
    assert sorted(sources) == ["hot", "hot-b"], first.outcomes

    # web's replacement goes where the plan sent it (the other cool node cordoned);
    # api's, pinned, comes back to hot-b.
    other = ({"cool-1", "cool-2"} - {sources["hot"].destination}).pop()
    client.patch(Node, other, {"spec": {"unschedulable": True}})
    cluster.kubelet_reap(namespace)
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        wait_until(lambda: all_bound(client, namespace, 8), 120, "the replacements bound")
    placed = sorted(node or "" for node in live_pods(client, namespace).values())
    assert placed.count("hot-b") == 4
    assert placed.count(sources["hot"].destination) == 1
    client.patch(Node, other, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == 2

    # settleTime later hot is cooler by what left it (0.3 of 4 cores); hot-b is not.
    time.sleep(2.0)
    after = {"hot": 0.85 - 0.3 / 4, "hot-b": 0.85, "cool-1": 0.2, "cool-2": 0.2}
    after[sources["hot"].destination] += 0.3 / 4
    for name, cpu in after.items():
        fresh = load_annotations(cpu, at_s=time.time())
        client.patch(Node, name, {"metadata": {"annotations": fresh}})
    telemetry = DeschedulerMetrics()
    # Beside cAdvisor: the policy's metrics, the hot nodes above cpu_usage_avg_5m's 65 %
    # limit the whole time and below every other limit; and kube-state-metrics'
    # restarts, one api pod restarted twice 10 minutes ago.
    hot_now = [("cpu_usage_avg_5m", {"instance": name}, "85" if name.startswith("hot") else "20")
               for name in nodes]  # fmt: skip
    calm = ("mem_usage_avg_5m", "cpu_usage_max_avg_1h", "mem_usage_max_avg_1h")
    hot_now += [(metric, {"instance": name}, "30") for name in nodes for metric in calm]
    api_pod = sorted(n for n, node in live_pods(client, namespace).items() if node == "hot-b")[0]
    restarted_s = time.time() - 600.0
    restarts = Counter(
        "kube_pod_container_status_restarts",
        {"namespace": namespace, "pod": api_pod, "container": "app"},
        lambda t: 0.0 if t < restarted_s else 2.0,
    )
    with cadvisor_prometheus(
        usage_series(client, namespace), raw_gauges=hot_now, counters=[restarts]
    ) as prometheus_url:
        second = run_once(cluster, prometheus_url, config, telemetry)
        summary = report_as_explain_user(cluster, capsys, "--prometheus-url", prometheus_url)
    assert second.result is RunResult.OK, second.message
    value = telemetry.registry.get_sample_value
    assert value(OUTCOMES, {"outcome": "helped"}) == 1.0
    assert value(OUTCOMES, {"outcome": "no_effect"}) == 1.0
    assert value(OUTCOMES, {"outcome": "backfired"}) == 0.0

    # One Event on each workload, naming the outcome and why.
    events = {
        e.involvedObject.name or "": e.message or ""
        for e in client.list(Event, namespace=namespace)
        if e.reason == OUTCOME_REASON and e.involvedObject.kind == "Deployment"
    }
    assert sorted(events) == ["api", "web"]
    assert "1 helped" in events["web"]
    assert "1 no effect" in events["api"]
    assert "came back to the source" in events["api"]

    # hot-b is backed off in the run that judged it: its pods skipped with the code.
    assert second.plan is not None
    codes = {s.code for s in second.plan.skipped if s.node == "hot-b"}
    assert codes == {SkipCode.BACKED_OFF}, second.plan.skipped

    # loadaware report, as the read-only explain user, says the same (read after the
    # second run, above, while Prometheus still ran).
    assert summary["nodes"]["hot"]["evictions"]["helped"] == 1
    assert summary["nodes"]["hot-b"]["evictions"]["no effect"] == 1
    # Both sources were above the CPU limit before their eviction, as far back as the
    # data goes (30 minutes, the --window); cool ones never.
    for name in ("hot", "hot-b"):
        above = summary["nodes"][name]["minutesAboveLimits"]
        assert above["before"] >= 25, above
    assert summary["workloads"][f"{namespace}/Deployment/api"]["restarts"] == 2
    assert summary["nodes"]["hot-b"]["restarts"] == 2
    assert summary["nodes"]["hot"]["restarts"] == 0
    assert summary["notes"] == []


def report_as_explain_user(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], *flags: str
) -> dict[str, Any]:
    """``loadaware report -o json`` with the read-only roles of explain-rbac.yaml."""
    capsys.readouterr()
    with explain_allowed(cluster):
        kubeconfig = str(cluster.kubeconfig_for(EXPLAIN_USER))
        argv = ["report", "--kubeconfig", kubeconfig, "--install-namespace", "loadaware"]
        assert main([*argv, *flags, "-o", "json"]) == 0
    summary: dict[str, Any] = json.loads(capsys.readouterr().out)
    return summary

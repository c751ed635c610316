"""``loadaware explain`` on a real control plane, run as a user holding only the shipped
read-only roles (deploy/base/explain-rbac.yaml), checked against the real components:

* a pod refused by load: explain's verdicts, reasons and scores are the running
  extender's answers to filter and prioritize for the same pod and nodes, the
  extender's estimate of a just-bound pod included;
* a pod kube-scheduler placed (with the extender) runs on the node explain prefers;
* a Pending pod: explain gives kube-scheduler's FailedScheduling message;
* a hot node: explain's descheduler view is the descheduler's own dry-run plan, with
  per-pod usage from a real Prometheus, and what changes without Prometheus.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, RoleBinding

from app import cli
from app.descheduler.descheduler import Descheduler, LoopSettings, RunResult
from app.policy import DEFAULT_POLICY_YAML, policy_from_yaml
from app.prom.client import PrometheusSource
from app.prom.settings import PrometheusSettings
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from tests.e2e.burst import (
    annotations_at,
    burst_pod,
    extender_entry,
    outcome_of,
    scheduler_with_shared_extender,
    shared_extender,
)
from tests.e2e.descheduler import STATE_NAMESPACE, deployment, descheduler_allowed
from tests.e2e.harness import (
    REPO,
    TEST_LABEL,
    ControlPlane,
    pod_object,
    scheduler_config,
    wait_until,
)
from tests.e2e.test_descheduler_placement import all_bound, usage_series
from tests.support.cadvisor import cadvisor_prometheus

USER = "loadaware-explain"
INSTALL = "loadaware"
# The shipped default policy with a stricter cpu_usage_avg_5m limit (0.5, not 0.65):
# a verdict that used the built-in default instead of the ConfigMap would differ.
POLICY_YAML = DEFAULT_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0.5", 1)


@contextlib.contextmanager
def explain_allowed(cluster: ControlPlane) -> Iterator[None]:
    """Create the shipped explain roles and bind them to USER, as an operator would; put
    the policy in force in its ConfigMap."""
    cluster.grant(REPO / "deploy" / "base" / "explain-rbac.yaml", USER)
    admin = cluster.client()
    subject = [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]
    meta = {"name": "explain-e2e", "labels": {TEST_LABEL: "true"}}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "name": "loadaware-explain"}
    cluster_binding = {
        "metadata": meta,
        "roleRef": {**role_ref, "kind": "ClusterRole"},
        "subjects": subject,
    }
    admin.create(cast(ClusterRoleBinding, ClusterRoleBinding.from_dict(cluster_binding)))
    binding = {
        "metadata": {**meta, "namespace": INSTALL},
        "roleRef": {**role_ref, "kind": "Role"},
        "subjects": subject,
    }
    admin.create(cast(RoleBinding, RoleBinding.from_dict(binding)))
    policy = ConfigMap(
        metadata=ObjectMeta(name="loadaware-policy", namespace=INSTALL),
        data={"policy.yaml": POLICY_YAML},
    )
    admin.create(policy)
    try:
        yield
    finally:
        admin.delete(ConfigMap, "loadaware-policy", namespace=INSTALL)


def explain(cluster: ControlPlane, *args: str, process: bool = False) -> str:
    """``loadaware explain ARGS`` as USER: its stdout, after checking it succeeded
    without a traceback. In this process (the CLI's own ``main``: the same parsing,
    client and output, without a second interpreter's start-up), or with ``process``
    as a user runs it."""
    argv = ["explain", *args, "--kubeconfig", str(cluster.kubeconfig_for(USER))]
    if process:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", *argv],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        out_buffer, err_buffer = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_buffer), contextlib.redirect_stderr(err_buffer):
            code = cli.main(argv)
        out, err = out_buffer.getvalue(), err_buffer.getvalue()
    assert code == 0, err
    assert "Traceback" not in err, err
    return out


def explain_json(cluster: ControlPlane, *args: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(explain(cluster, *args, "-o", "json"))
    return answer


def by_node(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["node"]: entry for entry in answer["nodes"]}


def make_node(cluster: ControlPlane, name: str, cpu: float, **extra: Any) -> None:
    cluster.make_node(
        name, cpu="8", memory="32Gi", annotations=annotations_at(cpu),
        labels={"kubernetes.io/hostname": name}, **extra,
    )  # fmt: skip


@pytest.fixture
def allowed(cluster: ControlPlane) -> Iterator[None]:
    with explain_allowed(cluster):
        yield


def test_a_pod_refused_by_load_gets_the_running_extenders_verdicts_and_scores(
    cluster: ControlPlane, namespace: str, allowed: None, tmp_path: Path
) -> None:
    make_node(cluster, "hot", 0.55)  # over the ConfigMap's 0.5, under the default 0.65
    make_node(cluster, "busy", 0.30)  # under it, until the pod just bound there counts
    make_node(cluster, "warm", 0.35)
    make_node(cluster, "cool", 0.10)
    client = cluster.client()
    # Just placed on busy with spec.nodeName, requesting 4 cpu: the estimate adds
    # 4 x 0.85 / 8 = 0.425 to its 0.30 (a pod first seen on its node counts its requests).
    just_bound = burst_pod("just-bound", namespace)
    assert just_bound.spec is not None
    just_bound.spec.nodeName = "busy"
    resources = just_bound.spec.containers[0].resources
    assert resources is not None
    assert resources.requests is not None
    resources.requests["cpu"] = "4"
    client.create(just_bound)
    client.create(burst_pod("asks", namespace))  # no scheduler runs: it stays Pending

    answer = explain_json(cluster, "pod", f"{namespace}/asks")
    nodes = by_node(answer)
    assert answer["policy"] == f"ConfigMap {INSTALL}/loadaware-policy (key policy.yaml)"
    assert answer["pending"] is True
    assert nodes["hot"]["refusedBy"] == {
        "metric": "cpu_usage_avg_5m", "measured": pytest.approx(0.55), "recent": 0.0,
        "used": pytest.approx(0.55), "limit": 0.5,
    }  # fmt: skip
    assert nodes["busy"]["refusedBy"]["measured"] == pytest.approx(0.30)
    assert nodes["busy"]["refusedBy"]["recent"] == pytest.approx(0.425)
    assert nodes["busy"]["recentPods"] == 1
    assert nodes["warm"]["passes"]
    assert nodes["cool"]["passes"]
    assert answer["preferred"] == "cool"
    parts = nodes["cool"]["scoreParts"]
    assert int(sum(p["points"] for p in parts)) == nodes["cool"]["loadScore"]

    # The same pod and nodes, asked of the real extender (the same policy file).
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY_YAML)
    pod = client.get(Pod, "asks", namespace=namespace).to_dict()
    names = sorted(nodes)
    request = {"Pod": pod, "NodeNames": names, "Nodes": None}
    with (
        cluster.extender("--policy", str(policy_file)) as extender,
        httpx.Client(base_url=extender.url, timeout=10) as http,
    ):
        filtered = http.post("/filter", json=request).json()
        # kube-scheduler asks prioritize about the nodes that passed, in its order.
        passed = sorted(filtered["NodeNames"])
        prioritized = http.post("/prioritize", json={**request, "NodeNames": passed}).json()
    refused = {name: entry["reason"] for name, entry in nodes.items() if not entry["passes"]}
    assert filtered["FailedAndUnresolvableNodes"] == refused
    assert set(refused) == {"hot", "busy"}
    assert passed == sorted(set(names) - set(refused))
    scores = {entry["Host"]: entry["Score"] for entry in prioritized}
    assert max(scores, key=lambda host: scores[host]) == answer["preferred"]
    # The extender's whole answer (app/load/prioritize.py) is explain's, and no other node is.
    assert scores == {name: entry["answered"] for name, entry in nodes.items() if name in passed}
    assert all(nodes[name]["answered"] is None for name in refused)
    # The pod's estimate, 0.425 of 8 cpus, fits under the 0.5 limit of no passing node:
    # the best-scored one is lifted all the same, and says so.
    assert not nodes["cool"]["hasRoom"]

    text = explain(cluster, "pod", f"{namespace}/asks", process=True)
    assert "the extender would prefer: cool" in text
    assert "load filter: 2 of 4 nodes refused" in text
    line = next(row for row in text.splitlines() if row.startswith("busy "))
    assert "refused: cpu_usage_avg_5m" in line
    assert "0.300" in line
    assert "+0.425" in line
    assert "0.725" in line
    assert "0.5" in line


def test_kube_scheduler_with_the_extender_binds_a_pod_where_explain_prefers(
    cluster: ControlPlane, namespace: str, allowed: None, request: pytest.FixtureRequest
) -> None:
    # cool scores 8 of 10, mild and warm 7: at 0.3 mild would score 8 too, and the
    # extender would lift whichever of the two kube-scheduler happened to list first.
    for name, cpu in {"hot": 0.8, "warm": 0.45, "cool": 0.15, "mild": 0.4}.items():
        make_node(cluster, name, cpu)
    client = cluster.client()
    container = {"name": "c", "image": "example.invalid/app"}
    manifest = {"metadata": {"name": "web", "namespace": namespace},
                "spec": {"containers": [container]}}  # fmt: skip
    before = explain_json(cluster, "pod", "-f", _write(cluster, manifest))
    assert (before["preferred"], before["tied"]) == ("cool", [])
    client.create(pod_object(manifest))
    # The shared extender: the policy ConfigMap is not mounted, it runs the default.
    extender = shared_extender(request, node_cache=True)
    # A generous timeout: a prioritize answered late is ignored, and the placement
    # would then be kube-scheduler's alone.
    entry = {**extender_entry(extender.url, node_cache_capable=True), "httpTimeout": "10s"}
    with cluster.scheduler(scheduler_config([entry])):
        wait_until(lambda: outcome_of(client, namespace).bound == 1, 120, "web bound")
    answer = explain_json(cluster, "pod", f"{namespace}/web", "--policy", _default_policy(cluster))
    assert answer["node"] == "cool"
    assert answer["preferred"] == "cool"
    assert answer["failedScheduling"] is None
    text = explain(cluster, "pod", f"{namespace}/web", "--top", "2")
    assert text.splitlines()[0] == f"pod {namespace}/web: bound to cool"
    assert "cool  passes (runs here; preferred)" in text
    assert "... 2 more nodes (--all shows every node)" in text


def test_a_pending_pod_is_explained_with_kube_schedulers_failed_scheduling_message(
    cluster: ControlPlane, namespace: str, allowed: None, request: pytest.FixtureRequest
) -> None:
    for name in ("hot-1", "hot-2", "hot-3"):
        make_node(cluster, name, 0.9)
    client = cluster.client()
    client.create(burst_pod("waits", namespace))
    with scheduler_with_shared_extender(request, node_cache_capable=True):
        wait_until(
            lambda: outcome_of(client, namespace).pending.get("waits"), 120, "FailedScheduling"
        )
    message = outcome_of(client, namespace).pending["waits"]
    answer = explain_json(cluster, "pod", f"{namespace}/waits")
    assert answer["pending"] is True
    assert answer["failedScheduling"] == message
    assert "3 Load[cpu_usage_avg_5m] is too high" in message
    assert answer["preferred"] is None
    assert all(not entry["passes"] for entry in answer["nodes"])
    text = explain(cluster, "pod", f"{namespace}/waits")
    assert f"kube-scheduler's last FailedScheduling: {message}" in text
    assert "the extender would prefer: none" in text


def test_a_hot_nodes_descheduler_view_is_the_descheduler_dry_run_plan(
    cluster: ControlPlane, namespace: str, allowed: None
) -> None:
    for name, cpu in {"hot": 0.85, "cool-1": 0.2, "cool-2": 0.2}.items():
        cluster.make_node(name, cpu="4", memory="16Gi", annotations=annotations_at(cpu))
    client = cluster.client()
    for name in ("cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": True}})
    client.create(deployment(namespace, "web", 3))
    client.create(
        pod_object({"metadata": {"name": "bare", "namespace": namespace},
                    "spec": {"nodeName": "hot",
                             "containers": [{"name": "c", "image": "example.invalid/app"}]}})
    )  # fmt: skip
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: all_bound(client, namespace, 4), 120, "4 pods on hot")
    for name in ("cool-1", "cool-2"):
        client.patch(Node, name, {"spec": {"unschedulable": False}})
    assert cluster.kubelet_mark_ready(namespace) == 4
    settings = {"consecutiveHotRounds": 1}
    config = config_from_mapping(settings)
    with (
        descheduler_allowed(cluster),
        _descheduler_config(cluster, settings),
        cadvisor_prometheus(usage_series(client, namespace)) as prometheus_url,
    ):
        answer = explain_json(cluster, "node", "hot", "--prometheus-url", prometheus_url)
        plan = _dry_run_plan(cluster, prometheus_url, config)
        text = explain(cluster, "node", "hot", "--prometheus-url", prometheus_url)
        blind = explain_json(cluster, "node", "hot")
    assert answer["class"] == "source"
    assert answer["role"] == "a source: the descheduler moves pods off it"
    assert answer["hotRounds"] == 1
    assert answer["consecutiveHotRounds"] == 1
    assert [(m["pod"], m["to"], m["usageFrom"]) for m in answer["wouldMove"]] == [
        (e.pod.key, e.destination, e.usage_from) for e in plan.evictions if e.source == "hot"
    ]
    assert {(s["pod"], s["code"]) for s in answer["wouldSkip"]} == {
        (s.pod_key, s.code.value) for s in plan.skipped if s.node == "hot"
    }
    # maxUnavailablePerWorkload (10% of 3, at least 1): one web pod per run
    assert len(answer["wouldMove"]) == 1
    codes = {s["pod"].split("/")[1].split("-")[0]: s["code"] for s in answer["wouldSkip"]}
    assert codes == {"bare": "protected", "web": "workload_unavailable"}
    assert f"ConfigMap {INSTALL}/loadaware-descheduler-config" in answer["sources"][0]
    assert "prometheus" in {m["usageFrom"] for m in answer["wouldMove"]}
    assert "node hot: a source: the descheduler moves pods off it" in text
    assert "workload_unavailable" in text
    assert "protected" in text
    # Without Prometheus: the same class, every usage an estimate, and it says what the
    # descheduler itself would do.
    assert blind["class"] == "source"
    assert {m["usageFrom"] for m in blind["wouldMove"]} <= {"estimate"}
    assert any("no --prometheus-url" in line and "evicts nothing" in line
               for line in blind["sources"])  # fmt: skip


def _write(cluster: ControlPlane, manifest: dict[str, Any]) -> str:
    path = cluster.workdir / f"manifest-{manifest['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return str(path)


def _default_policy(cluster: ControlPlane) -> str:
    """The extender above ran without --policy: explain with the same built-in default."""
    path = cluster.workdir / "default-policy.yaml"
    path.write_text(DEFAULT_POLICY_YAML)
    return str(path)


@contextlib.contextmanager
def _descheduler_config(cluster: ControlPlane, settings: dict[str, Any]) -> Iterator[None]:
    admin = cluster.client()
    document = {"apiVersion": "loadaware.io/v1alpha1", "kind": "DeschedulerConfiguration",
                **settings}  # fmt: skip
    admin.create(
        ConfigMap(
            metadata=ObjectMeta(name="loadaware-descheduler-config", namespace=STATE_NAMESPACE),
            data={"descheduler.yaml": yaml.safe_dump(document)},
        )
    )
    try:
        yield
    finally:
        admin.delete(ConfigMap, "loadaware-descheduler-config", namespace=STATE_NAMESPACE)


def _dry_run_plan(cluster: ControlPlane, prometheus_url: str, config: DeschedulerConfig) -> Any:
    """The real descheduler's dry-run plan, one run, with the policy explain read."""

    async def scenario() -> Any:
        source = PrometheusSource(PrometheusSettings(url=prometheus_url, timeout_s=5.0))
        client = AsyncClient(config=KubeConfig.from_file(str(cluster.kubeconfig)))
        try:
            descheduler = Descheduler(
                config,
                policy_from_yaml(POLICY_YAML),
                client,
                source,
                LoopSettings(dry_run=True, sync_timeout_s=30.0, state_namespace=STATE_NAMESPACE),
            )
            report = await descheduler.run_once()
        finally:
            await client.close()
            source.close()
        assert report.result is RunResult.OK, report.message
        return report.plan

    return asyncio.run(scenario())

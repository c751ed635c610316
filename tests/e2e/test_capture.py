"""`loadaware capture` on the real control plane, against a real Prometheus with 6 h of
backfilled per-pod history; then `loadaware simulate` replays the capture.

The lab: four nodes; a Deployment pinned to one node by the real scheduler (`hot`,
uneven on purpose), a spread Deployment with a PDB whose replicas use unevenly and
whose kube-state-metrics replica count went up for half an hour (two pods that are
gone now), a StatefulSet, a DaemonSet, a Job and a bare pod. In the history, `hot`
turns its node hot for two hours. The capture validates, its replay reproduces the
recorded per-node usage within FIDELITY_BOUND points, every policy runs, and the
descheduler (beside loadaware) cools the node `default` leaves hot.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any, cast

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import DaemonSet, Deployment, StatefulSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget

from app.cli import build_parser
from app.simulate.scenario import HistoryUsage, load_scenario
from tests.e2e.harness import ControlPlane, scheduler_config, wait_until
from tests.support.usage_history import PodHistory, ReplicaGauge, usage_history_prometheus

REPO = Path(__file__).resolve().parents[2]
GI = 2.0**30
HOUR = 3600.0
RANGE_S = 6 * HOUR
STEP_S = 60.0
NODES = ("cap-a", "cap-b", "cap-c", "cap-d")
# The replay starts from the real placement with the recorded demand; only the two
# pods gone now (placed by the replay's scheduler, not where they ran) may differ.
FIDELITY_BOUND = 2.0  # points, per resource


def _template(app: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **spec,
        },
    }  # fmt: skip


def selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _create(client: Client, kind: Any, body: dict[str, Any]) -> None:
    client.create(cast(Any, kind.from_dict(body)))


def _make_lab(cluster: ControlPlane, namespace: str) -> None:
    for name in NODES:
        cluster.make_node(name, cpu="8", memory="32Gi")
    client = cluster.client()
    on_a = {"nodeSelector": {"kubernetes.io/hostname": "cap-a"}}
    _create(client, Deployment, {
        "metadata": {"name": "hot", "namespace": namespace},
        "spec": {"replicas": 6, "selector": selector("hot"),
                 "template": _template("hot", "500m", "1Gi", **on_a)},
    })  # fmt: skip
    _create(client, Deployment, {
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 4, "selector": selector("web"),
                 "template": _template("web", "1", "2Gi")},
    })  # fmt: skip
    _create(client, PodDisruptionBudget, {
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"maxUnavailable": 1, "selector": selector("web")},
    })  # fmt: skip
    _create(client, StatefulSet, {
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {"replicas": 1, "serviceName": "db", "selector": selector("db"),
                 "template": _template("db", "2", "8Gi")},
    })  # fmt: skip
    _create(client, DaemonSet, {
        "metadata": {"name": "agent", "namespace": namespace},
        "spec": {"selector": selector("agent"),
                 "template": _template("agent", "100m", "128Mi")},
    })  # fmt: skip
    _create(client, Job, {
        "metadata": {"name": "batch", "namespace": namespace},
        "spec": {"parallelism": 1, "completions": 1,
                 "template": _template("batch", "1", "1Gi", restartPolicy="Never")},
    })  # fmt: skip
    # The cluster's own loadaware configuration (here in the lab's namespace).
    _create(client, ConfigMap, {
        "metadata": {"name": "loadaware-policy", "namespace": namespace},
        "data": {"policy.yaml": (REPO / "deploy" / "base" / "policy.yaml").read_text()},
    })  # fmt: skip
    _create(client, ConfigMap, {
        "metadata": {"name": "loadaware-descheduler-config", "namespace": namespace},
        "data": {"descheduler.yaml": DESCHEDULER_CONFIG},
    })  # fmt: skip
    bare = _template("debug", "100m", "64Mi", nodeName="cap-d")
    bare["metadata"].update(name="debug", namespace=namespace)
    _create(client, Pod, bare)


def _placed(cluster: ControlPlane, namespace: str) -> dict[str, str]:
    return {
        pod.metadata.name or "": pod.spec.nodeName
        for pod in cluster.client().list(Pod, namespace=namespace)
        if pod.metadata and pod.spec and pod.spec.nodeName
    }


WEB_SPREAD = (0.6, 0.8, 1.2, 1.4)
DESCHEDULER_CONFIG = """\
apiVersion: loadaware.io/v1alpha1
kind: DeschedulerConfiguration
interval: 2m
consecutiveHotRounds: 2
"""


def _usage(app: str, index: int) -> Any:
    """Each pod's usage over time (seconds since the start): cores, bytes."""
    if app == "hot":  # the node turns hot from 2 h to 4 h
        return lambda t: (1.0 if 2 * HOUR <= t < 4 * HOUR else 0.3, 1 * GI)
    if app == "web":
        factor = WEB_SPREAD[index % 4]
        return lambda t: (0.8 * factor, 1.5 * GI * factor)
    cores, memory = {"db": (1.5, 6 * GI), "agent": (0.05, 0.1 * GI),
                     "batch": (0.9, 0.8 * GI), "debug": (0.1, 0.05 * GI)}[app]  # fmt: skip
    return lambda t: (cores, memory)


def _history(placed: dict[str, str], namespace: str) -> list[PodHistory]:
    pods = []
    by_app: dict[str, int] = {}
    for name, node in sorted(placed.items()):
        app = name.split("-")[0]
        index = by_app.get(app, 0)
        by_app[app] = index + 1
        pods.append(PodHistory(namespace, name, node, _usage(app, index)))
    # Two web pods of the scale-up that are gone now.
    replica_set = next(n for n in placed if n.startswith("web-")).rsplit("-", 1)[0]
    for i in range(2):
        pods.append(PodHistory(namespace, f"{replica_set}-gone{i}", "cap-b",
                               _usage("web", 1), since_s=1 * HOUR, until_s=1.5 * HOUR))  # fmt: skip
    return pods


def _cli(*argv: str) -> tuple[int, str, str]:
    """``loadaware ARGV`` in this process, its output kept."""
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(argv)
    code = args.run(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_capture_replays_a_lab_cluster_faithfully_and_shows_the_hot_node_cooled(
    cluster: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    _make_lab(cluster, namespace)
    with cluster.scheduler(scheduler_config()):
        wait_until(lambda: len(_placed(cluster, namespace)) == 17, 120, "17 lab pods bound")
    cluster.kubelet_mark_ready(namespace)
    placed = _placed(cluster, namespace)
    assert {node for name, node in placed.items() if name.startswith("hot-")} == {"cap-a"}

    end_s = float(int(time.time()) // 60 * 60)
    start_s = end_s - RANGE_S
    web_replicas = ReplicaGauge(namespace, "web", lambda t: 6 if HOUR <= t < 1.5 * HOUR else 4)
    with usage_history_prometheus(
        _history(placed, namespace), start_s - 600, end_s, STEP_S, [web_replicas], start_s
    ) as url:
        common = ("capture", "--kubeconfig", str(cluster.kubeconfig), "--prometheus-url", url,
                  "--step", "1m", "--end", f"{end_s:.0f}",
                  "--install-namespace", namespace)  # fmt: skip
        output = tmp_path / "lab.yaml"
        code, _, err = _cli(*common, "--range", "6h", "--output", str(output))
        assert code == 0, err
        # A range longer than the data: one line, what to do.
        too_long, _, err_long = _cli(*common, "--range", "12h", "--output", str(tmp_path / "x"))
        anonymous = tmp_path / "anonymous.yaml"
        shared = ("--range", "6h", "--anonymize", "--progress", "--output", str(anonymous))
        code_anonymous, _, err_anonymous = _cli(*common, *shared)
    assert too_long == 1
    assert "holds data only from" in err_long, err_long
    assert "--range 6h" in err_long
    assert len(err_long.strip().splitlines()) == 1

    scenario = load_scenario(str(output))  # validates
    workloads = {w.name.removeprefix(f"{namespace}-"): w for w in scenario.workloads}
    assert {w.kind for w in workloads.values()} == {
        "Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"
    }
    assert workloads["hot"].placement == ("cap-a",) * 6
    assert workloads["web"].pdb is not None
    assert workloads["web"].pdb.max_unavailable == 1
    # Template demand by the one pod-demand rule; the replicas' spread is kept.
    assert workloads["db"].requests.cpu == 2
    assert workloads["db"].requests.memory == 8 * GI
    usage = workloads["web"].usage
    assert isinstance(usage, HistoryUsage)
    # (against the mean of every pod at each point, the gone ones included)
    assert sorted(usage.spread.cpu) == pytest.approx(WEB_SPREAD, rel=0.02)
    assert [(r.at_s, r.replicas) for r in workloads["web"].replica_history] == [
        (HOUR, 6), (1.5 * HOUR, 4)
    ]
    # The cluster's policy and descheduler configuration come with it.
    assert scenario.descheduler_config().interval == 120
    assert scenario.descheduler_config().consecutive_hot_rounds == 2
    assert scenario.policy is not None
    assert scenario.scheduling_policy().spec.predicate[0].max_limit_fraction == 0.65
    assert scenario.observed is not None
    assert len(scenario.observed.nodes) == 4
    # the node count over time (issue 43): the lab's four nodes at every point
    assert set(scenario.observed.node_count) == {4.0}

    code, text, err = _cli("simulate", str(output), "--jobs", "1", "--json")
    assert code == 0, err
    report = json.loads(text)
    assert report["observedNodeHours"] == pytest.approx(4 * RANGE_S / 3600, rel=0.01)
    fidelity = report["fidelity"]
    assert fidelity["cpuPoints"] <= FIDELITY_BOUND, fidelity
    assert fidelity["memoryPoints"] <= FIDELITY_BOUND, fidelity
    assert fidelity["faithful"], fidelity
    rows = {row["policy"]: row for row in report["policies"]}
    assert set(rows) == {"default", "crane", "loadaware", "default+desched",
                         "crane+desched", "loadaware+desched", "default+taints",
                         "default+taints+desched"}  # fmt: skip
    # default leaves cap-a above the CPU limit for the two hot hours; the descheduler
    # beside loadaware moves hot pods off it and loadaware places them on cool nodes.
    hot_minutes = rows["default"]["cpu_node_minutes_above"]
    assert hot_minutes >= 100, rows["default"]
    cooled = rows["loadaware+desched"]
    assert cooled["evictions"] >= 1
    assert cooled["pdb_violations"] == 0
    assert cooled["cpu_node_minutes_above"] <= hot_minutes / 2, cooled

    # --anonymize: no name of the lab is left in the file; the replay runs the same.
    assert code_anonymous == 0
    # --progress: a bar on stderr, to the last query (one namespace: 2 usage and 2
    # replica queries, then 2 per-node queries and the node count), then the summary.
    assert "querying Prometheus" in err_anonymous
    assert "] 7/7\n" in err_anonymous
    assert "7 queries" in err_anonymous
    text = anonymous.read_text()
    for name in (namespace, "cap-a", "cap-d", "agent", "debug"):
        assert name not in text
    assert load_scenario(str(anonymous)).node_names != scenario.node_names


def test_capture_says_which_resource_it_may_not_read_and_the_documented_role_suffices(
    cluster: ControlPlane, namespace: str
) -> None:
    kubeconfig = str(cluster.kubeconfig_for("tenant"))
    args = ("capture", "--kubeconfig", kubeconfig, "--prometheus-url", "http://127.0.0.1:9")
    code, _, err = _cli(*args)
    assert code == 1
    assert err.startswith("loadaware capture: error: cannot list "), err
    assert "forbidden" in err
    assert len(err.strip().splitlines()) == 1
    cluster.grant(REPO / "docs" / "capture-rbac.yaml", "tenant")
    # With the role, the API server is read and the capture gets as far as Prometheus.
    code, _, err = _cli(*args)
    assert code == 1
    assert "Prometheus" in err, err
    assert "forbidden" not in err

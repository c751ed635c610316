"""A small cluster for the descheduler's end-to-end tests: the fake API server holds the
Nodes (with fresh load annotations) and Pods, a real Prometheus their cAdvisor series.

Every node has 4 cores and 16 GiB. ``hot`` runs at 85 % CPU with eight ``web`` pods of
one Deployment (250m requested, 0.45 cores really used each) and a DaemonSet pod;
``hot-2`` runs at 80 % with nothing movable (a DaemonSet pod and a single-replica
Deployment); ``cool-1`` and ``cool-2`` idle at 20 %; ``warm`` sits at 55 % (neither
source nor destination); ``blind`` has no load data. With targetThresholds cpu 65 %,
moving two web pods (2 x 0.45 / 4 = 22.5 %) brings ``hot`` to 62.5 %.
"""

from __future__ import annotations

import json
import time
from typing import Any

from app.kube import state
from app.load.samples import format_usage
from app.rebalance.config import DeschedulerConfig, config_from_mapping
from tests.rebalance.builders import OPEN_WORKLOAD_LIMITS
from tests.support.cadvisor import PodSeries
from tests.support.fakekube import CONFIGMAPS, PODS, FakeKubeStore

MIB = 2.0**20
WEB_CORES = 0.45
AN_HOUR_AGO = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
NODE_LOAD = {"hot": 0.85, "hot-2": 0.80, "cool-1": 0.20, "cool-2": 0.20, "warm": 0.55}
WEB_PODS = tuple(f"web-{i}" for i in range(8))


def load_annotations(cpu: float, mem: float = 0.3, at_s: float | None = None) -> dict[str, str]:
    at = (time.time() - 30.0) if at_s is None else at_s
    return {
        "cpu_usage_avg_5m": format_usage(cpu, at),
        "cpu_usage_max_avg_1h": format_usage(cpu, at),
        "mem_usage_avg_5m": format_usage(mem, at),
        "mem_usage_max_avg_1h": format_usage(mem, at),
    }


def add_pod(store: FakeKubeStore, name: str, node: str, *, namespace: str = "shop",
            owner: tuple[str, str] | None = ("ReplicaSet", "web-5d8f9"),
            labels: dict[str, str] | None = None, cpu: str = "250m") -> None:
    # The pods have run a while: an hour before the descheduler looks at them.
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "creationTimestamp": AN_HOUR_AGO,
                            "labels": labels if labels is not None else
                            {"app": "web", "pod-template-hash": "5d8f9"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    store.add(PODS, {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{
            "name": "app", "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Running", "qosClass": "Burstable",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })


def seed(store: FakeKubeStore, *, memory: bool = True) -> None:
    """The cluster; with ``memory``, also the empty state ConfigMap of a descheduler
    that has run before (without it, the first run makes it)."""
    if memory:
        store.add(CONFIGMAPS, empty_memory())
    for name, cpu in NODE_LOAD.items():
        store.add_node(name, annotations=load_annotations(cpu),
                       allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"})
    store.add_node("blind", allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"})
    for name in WEB_PODS:
        add_pod(store, name, "hot")
    for node in ("hot", "hot-2"):
        add_pod(store, f"agent-{node}", node, namespace="kube-agents",
                owner=("DaemonSet", "agent"), labels={"app": "agent"})
    add_pod(store, "solo-0", "hot-2", owner=("ReplicaSet", "solo-7c6b5"),
            labels={"app": "solo", "pod-template-hash": "7c6b5"})
    for node in ("cool-1", "cool-2", "warm"):
        add_pod(store, f"api-{node}", node, owner=("ReplicaSet", "api-6f7d8"),
                labels={"app": "api", "pod-template-hash": "6f7d8"})


def empty_memory(namespace: str = "default") -> dict[str, Any]:
    return {
        "metadata": {"name": state.DEFAULT_NAME, "namespace": namespace},
        "data": {state.STATE_KEY: json.dumps({"version": 1, "evictions": [], "hotRounds": {}})},
    }


def series() -> list[PodSeries]:
    pods = [PodSeries("shop", name, {"app": (WEB_CORES, 300 * MIB)}, node="hot")
            for name in WEB_PODS]
    pods += [PodSeries("kube-agents", f"agent-{node}", {"agent": (1.5, 500 * MIB)}, node=node)
             for node in ("hot", "hot-2")]
    pods.append(PodSeries("shop", "solo-0", {"app": (2.0, 1024 * MIB)}, node="hot-2"))
    pods += [PodSeries("shop", f"api-{node}", {"app": (0.1, 200 * MIB)}, node=node)
             for node in ("cool-1", "cool-2", "warm")]
    return pods


def config(**fields: Any) -> DeschedulerConfig:
    """Debounce off, fast, and the per-workload limits open (tests of them set them)."""
    document: dict[str, Any] = {
        "consecutiveHotRounds": 1,
        "evictionsPerSecond": 50,
        **OPEN_WORKLOAD_LIMITS,
        **fields,
    }
    return config_from_mapping(document)

"""Over random clusters: nothing protected moves, no limit or PDB is exceeded, and every
victim's destination passes the load filter with the plan's reservations."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from app.load.model import evaluate_node
from app.objects.budgets import PodDisruptionBudgetView
from app.objects.pods import workload_of
from app.objects.resources import RESOURCES, Resources
from app.objects.selectors import LabelSelector
from app.rebalance import plan
from app.rebalance.convergence import as_fractions
from app.rebalance.measure import allocatable_of
from app.rebalance.run_guards import workload_pods
from app.rebalance.victims import owned_pod_counts, protection
from tests.rebalance.builders import NOW, POLICY, cluster, config, node, pod

flags = st.fixed_dictionaries({
    "local_storage": st.booleans(), "uses_pvc": st.booleans(), "is_mirror": st.booleans(),
    "terminating": st.booleans(), "priority": st.sampled_from([0, 100, 2_000_000_000]),
    "owner": st.sampled_from(["a", "b", "c", None]),
    "owner_kind": st.sampled_from(["ReplicaSet", "ReplicaSet", "DaemonSet"]),
    "cpu": st.floats(0.05, 3.0), "labels": st.sampled_from([{"app": "x"}, {}]),
})


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=6),
    specs=st.lists(st.tuples(st.integers(0, 5), flags), max_size=30),
    per_node=st.sampled_from([None, 1, 2]),
    total=st.sampled_from([None, 3]),
    pdb_allowed=st.integers(0, 2),
)
def test_plans_respect_every_guard(loads: list[float], specs: list[tuple[int, dict]],  # type: ignore[type-arg]
                                   per_node: int | None, total: int | None,
                                   pdb_allowed: int) -> None:
    nodes = [node(f"n{i}", load) for i, load in enumerate(loads)]
    pods = [pod(f"p{k}", f"n{index % len(nodes)}", **fields)
            for k, (index, fields) in enumerate(specs)]
    pdb = PodDisruptionBudgetView("default", "x", LabelSelector({"app": "x"}), pdb_allowed)
    settings_ = config(maxNoOfPodsToEvictPerNode=per_node, maxNoOfPodsToEvictTotal=total)
    result = plan(cluster(nodes, pods, budgets=[pdb]), settings_, POLICY, NOW, {})
    owned = owned_pod_counts(pods)
    for eviction in result.evictions:
        assert protection(eviction.pod, settings_, NOW, owned) is None
    per_source = Counter(e.source for e in result.evictions)
    assert per_node is None or max(per_source.values(), default=0) <= per_node
    assert total is None or len(result.evictions) <= total
    assert sum(1 for e in result.evictions if e.pod.labels.get("app") == "x") <= pdb_allowed
    reserved: dict[str, Resources] = {}
    by_name = {n.name: n for n in nodes}
    for eviction in result.evictions:
        target = by_name[eviction.destination]
        reserved[target.name] = reserved.get(target.name, Resources()) + eviction.usage
        amounts = {r: reserved[target.name].get(r) for r in RESOURCES}
        load = evaluate_node(target.annotations, POLICY, NOW,
                             as_fractions(amounts, allocatable_of(target)))
        assert not load.overloaded


pod_shapes = st.fixed_dictionaries({
    "namespace": st.sampled_from(["a", "b"]),
    "owner": st.sampled_from(["web-h1", "web-h2", "web", "db", None]),
    "owner_kind": st.sampled_from(["ReplicaSet", "StatefulSet"]),
    "labels": st.sampled_from([{}, {"pod-template-hash": "h1"}, {"pod-template-hash": "h2"},
                               {"pod-template-hash": ""}]),
    "ready": st.booleans(), "terminating": st.booleans(),
    "phase": st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
})


@settings(max_examples=200, deadline=None)
@given(shapes=st.lists(pod_shapes, max_size=25))
def test_workload_pods_counts_each_pod_under_its_workload(shapes: list[dict]) -> None:  # type: ignore[type-arg]
    """Counted per controller, then per workload: the same counts as naming every pod's
    workload, with ReplicaSets of one Deployment (hashes h1, h2) summed together."""
    pods = [pod(f"p{i}", "n1", **shape) for i, shape in enumerate(shapes)]
    replicas: Counter[str] = Counter()
    not_ready: Counter[str] = Counter()
    for p in pods:
        workload = workload_of(p)
        if workload is None or p.terminating or p.phase in ("Succeeded", "Failed"):
            continue
        replicas[workload] += 1
        not_ready[workload] += 0 if p.ready else 1
    assert workload_pods(pods) == (+replicas, +not_ready)

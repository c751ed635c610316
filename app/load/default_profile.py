"""kube-scheduler's default profile where it places by requests: pure rules over nodes.

REFERENCE §6 and §8, over arrays with one entry per node:

* **NodeResourcesFit** (filter): the pod's requests fit in what the node's bound pods
  do not request;
* **NodeResourcesFit/LeastAllocated** and **NodeResourcesBalancedAllocation** (score,
  each 0..100 at weight 1): on "non-zero" requests, where a pod that requests nothing
  counts 100m CPU and 200Mi memory (kube-scheduler applies that per container; a pod's
  total is all the planner and the simulator see, so it is applied per pod);
* **TaintToleration** (score, weight 3): the ``PreferNoSchedule`` taints a pod does not
  tolerate, normalized in reverse over the feasible nodes, so that a tainted node is
  the last choice without ever being filtered out;
* **PodTopologySpread** (score, weight 2): per constraint, the pods its selector matches
  in the node's domain, times ``log(domains + 2)``, plus ``maxSkew - 1``; summed, rounded,
  then normalized so that the node with the fewest gets 100 (``topology_spread_scores``).
  A pod with no constraint of its own, owned by a ReplicaSet, StatefulSet or
  ReplicationController, spreads by the system default: its owner's pods over
  ``kubernetes.io/hostname`` (maxSkew 3) and ``topology.kubernetes.io/zone`` (maxSkew 5);
* **InterPodAffinity** (score, weight 2): the weights of the preferred terms the pods in
  a node's domain satisfy (anti-affinity subtracts), normalized between the lowest and
  the highest node (``inter_pod_affinity_scores``);
* **NodeAffinity** (score, weight 2): the weights of the preferred terms a node matches,
  normalized so that the best node gets 100 (``node_affinity_scores``).

``profile_scores`` adds them at the default profile's weights.

The simulator's kube-scheduler (``app/simulate/scheduling.py``) and the descheduler's
prediction of where a replacement lands (``app/rebalance/kube_scheduler.py``) both call
these; neither keeps a copy.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from app.load.model import MAX_NODE_SCORE

__all__ = [
    "HOSTNAME_KEY",
    "SPREAD_OWNER_KINDS",
    "SYSTEM_DEFAULT_SPREAD",
    "TAINT_TOLERATION_WEIGHT",
    "ZONE_KEY",
    "fits_request",
    "fits_requests",
    "inter_pod_affinity_scores",
    "node_affinity_scores",
    "non_zero_requests",
    "profile_scores",
    "resource_score",
    "resource_scores",
    "spread_term",
    "taint_toleration_scores",
    "topology_spread_scores",
]

NON_ZERO_CPU_CORES = 0.1
NON_ZERO_MEMORY_BYTES = 200 * 2.0**20
TAINT_TOLERATION_WEIGHT = 3  # the default profile's weight; the resource plugins weigh 1
TOPOLOGY_SPREAD_WEIGHT = 2
INTER_POD_AFFINITY_WEIGHT = 2
NODE_AFFINITY_WEIGHT = 2
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
# The system-default constraints (``ScheduleAnyway``): topology key and maxSkew.
SYSTEM_DEFAULT_SPREAD = ((HOSTNAME_KEY, 3), (ZONE_KEY, 5))
# The owners whose pods the system default spreads (kube-scheduler's DefaultSelector reads
# Services too, which neither the planner nor the simulator sees).
SPREAD_OWNER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def non_zero_requests(cpu_cores: float, memory_bytes: float) -> tuple[float, float]:
    """What the scoring plugins count for a pod's requests: a request of 0 counts as the
    non-zero default."""
    return cpu_cores or NON_ZERO_CPU_CORES, memory_bytes or NON_ZERO_MEMORY_BYTES


def fits_requests(
    allocatable_cpu: FloatArray,
    allocatable_memory: FloatArray,
    requested_cpu: FloatArray,
    requested_memory: FloatArray,
    pod_cpu_cores: float,
    pod_memory_bytes: float,
) -> BoolArray:
    """NodeResourcesFit's filter: the pod's requests fit in what is not requested."""
    slack = 1e-9
    cpu_ok = requested_cpu + pod_cpu_cores <= allocatable_cpu + slack
    memory_ok = requested_memory + pod_memory_bytes <= allocatable_memory + slack
    fits: BoolArray = cpu_ok & memory_ok
    return fits


def fits_request(
    allocatable_cpu: float,
    allocatable_memory: float,
    requested_cpu: float,
    requested_memory: float,
    pod_cpu_cores: float,
    pod_memory_bytes: float,
) -> bool:
    """``fits_requests`` of one node, in plain floats: the simulator re-checks the one node
    each binding changes. The same operations in the same order, so the same answer."""
    slack = 1e-9
    return (
        requested_cpu + pod_cpu_cores <= allocatable_cpu + slack
        and requested_memory + pod_memory_bytes <= allocatable_memory + slack
    )


def resource_scores(
    allocatable_cpu: FloatArray,
    allocatable_memory: FloatArray,
    scored_cpu: FloatArray,
    scored_memory: FloatArray,
    pod_score_cpu_cores: float,
    pod_score_memory_bytes: float,
) -> IntArray:
    """LeastAllocated + BalancedAllocation, each 0..100, with the pod placed.

    ``scored_*`` are the non-zero requests of the node's pods (``non_zero_requests``),
    ``pod_score_*`` the pod's own."""
    cpu_fraction = (scored_cpu + pod_score_cpu_cores) / allocatable_cpu
    memory_fraction = (scored_memory + pod_score_memory_bytes) / allocatable_memory
    # The free fractions clipped to 0..1: np.clip's value, without its wrapper (called
    # per binding on one node by the simulator); a zero's sign, all that could differ,
    # cannot show in the whole-number scores.
    cpu_free = np.minimum(np.maximum(1 - cpu_fraction, 0), 1)
    memory_free = np.minimum(np.maximum(1 - memory_fraction, 0), 1)
    least = (np.floor(cpu_free * MAX_NODE_SCORE) + np.floor(memory_free * MAX_NODE_SCORE)) // 2
    spread = np.abs(np.minimum(cpu_fraction, 1) - np.minimum(memory_fraction, 1)) / 2
    balanced = np.floor((1 - spread) * MAX_NODE_SCORE)
    total: IntArray = (least + balanced).astype(np.int64)
    return total


def resource_score(
    allocatable_cpu: float,
    allocatable_memory: float,
    scored_cpu: float,
    scored_memory: float,
    pod_score_cpu_cores: float,
    pod_score_memory_bytes: float,
) -> int:
    """``resource_scores`` of one node, in plain floats: the simulator rescores the one
    node each binding changes, where numpy's per-call cost is most of the work. The same
    operations in the same order, so the same number; a node whose fractions are not
    finite (no allocatable) is left to ``resource_scores`` itself."""
    if allocatable_cpu > 0 and allocatable_memory > 0:
        cpu_fraction = (scored_cpu + pod_score_cpu_cores) / allocatable_cpu
        memory_fraction = (scored_memory + pod_score_memory_bytes) / allocatable_memory
        if math.isfinite(cpu_fraction) and math.isfinite(memory_fraction):
            cpu_free = min(max(1 - cpu_fraction, 0.0), 1.0)
            memory_free = min(max(1 - memory_fraction, 0.0), 1.0)
            least = (
                math.floor(cpu_free * MAX_NODE_SCORE) + math.floor(memory_free * MAX_NODE_SCORE)
            ) // 2
            spread = abs(min(cpu_fraction, 1.0) - min(memory_fraction, 1.0)) / 2
            return least + math.floor((1 - spread) * MAX_NODE_SCORE)
    one = np.array
    return int(
        resource_scores(
            one([allocatable_cpu]), one([allocatable_memory]),
            one([scored_cpu]), one([scored_memory]),
            pod_score_cpu_cores, pod_score_memory_bytes,
        )[0]
    )  # fmt: skip


def taint_toleration_scores(untolerated: IntArray, feasible: BoolArray) -> IntArray:
    """TaintToleration's normalized score per node, 0..100 (0 where not feasible).

    ``untolerated`` counts, per node, the ``PreferNoSchedule`` taints the pod does not
    tolerate; kube-scheduler's ``DefaultNormalizeScore`` in reverse over the feasible
    nodes: ``100 - 100 * count // most``, or 100 for all when no feasible node has one.
    """
    counts = np.where(feasible, untolerated.astype(np.int64), 0)
    most = int(counts.max()) if len(counts) else 0
    if most == 0:
        normalized = np.full(len(counts), MAX_NODE_SCORE, dtype=np.int64)
    else:
        normalized = MAX_NODE_SCORE - MAX_NODE_SCORE * counts // most
    result: IntArray = np.where(feasible, normalized, 0).astype(np.int64)
    return result


def spread_term(
    domain: IntArray,
    matching: FloatArray,
    counted: BoolArray,
    scored: BoolArray,
    *,
    hostname: bool = False,
) -> tuple[FloatArray, BoolArray, int]:
    """One constraint's counts for ``topology_spread_scores``, per node.

    ``domain`` is each node's domain for the constraint's key as an index (-1: the node
    lacks the label); ``matching`` the pods the selector matches on each node;
    ``counted`` the nodes whose pods count (``nodeAffinityPolicy``); ``scored`` the
    feasible nodes, whose domains count as the constraint's. Returns the matching pods
    in each node's domain (0 for a node without the label), which nodes have the label,
    and the number of domains. For ``kubernetes.io/hostname`` (``hostname``) each node
    is its own domain, its own pods counted whatever ``counted`` says, as
    kube-scheduler does."""
    labelled = domain >= 0
    if hostname:
        return matching.astype(np.float64), labelled, int(np.count_nonzero(scored & labelled))
    if not labelled.any():
        return np.zeros(len(domain)), labelled, 0
    size = int(domain.max()) + 1
    domains = len(np.unique(domain[scored & labelled]))
    take = labelled & counted
    totals = np.bincount(domain[take], weights=matching[take], minlength=size)
    per_node = np.where(labelled, totals[np.maximum(domain, 0)], 0.0)
    return per_node, labelled, domains


def topology_spread_scores(
    terms: list[tuple[FloatArray, BoolArray, int, int]],
    scored: BoolArray,
    ignored: BoolArray | None = None,
) -> IntArray:
    """PodTopologySpread's normalized score per node, 0..100 (0 where not scored).

    ``terms`` holds, per ``ScheduleAnyway`` constraint, ``spread_term``'s counts, the
    nodes with the label, and then the constraint's maxSkew and its number of domains.
    kube-scheduler's Score: per constraint a node with the label adds
    ``count * log(domains + 2) + maxSkew - 1``, the sum rounded; NormalizeScore over the
    scored nodes that are not ``ignored`` (a pod's own constraints ignore nodes lacking
    any key; the system default ignores none): ``100 * (most + least - score) // most``,
    or 100 for all where the most is 0."""
    raw = np.zeros(len(scored))
    for per_node, labelled, max_skew, domains in terms:
        weight = math.log(domains + 2)
        raw += np.where(labelled, per_node * weight + (max_skew - 1), 0.0)
    rounded = np.floor(raw + 0.5).astype(np.int64)  # Go's math.Round, on scores >= 0
    valid = scored if ignored is None else scored & ~ignored
    if not valid.any():
        return np.zeros(len(scored), dtype=np.int64)
    most, least = int(rounded[valid].max()), int(rounded[valid].min())
    if most == 0:
        normalized = np.full(len(scored), MAX_NODE_SCORE, dtype=np.int64)
    else:
        normalized = MAX_NODE_SCORE * (most + least - rounded) // most
    result: IntArray = np.where(valid, normalized, 0).astype(np.int64)
    return result


def inter_pod_affinity_scores(raw: IntArray, scored: BoolArray) -> IntArray:
    """InterPodAffinity's normalized score per node, 0..100 (0 where not scored): each
    node's summed term weights placed between the lowest and the highest over the scored
    nodes, ``int(100 * (score - least) / (most - least))``; 0 for all where they are
    the same."""
    if not scored.any():
        return np.zeros(len(scored), dtype=np.int64)
    most, least = int(raw[scored].max()), int(raw[scored].min())
    if most == least:
        return np.zeros(len(scored), dtype=np.int64)
    normalized = (MAX_NODE_SCORE * (raw - least) / (most - least)).astype(np.int64)
    result: IntArray = np.where(scored, normalized, 0).astype(np.int64)
    return result


def node_affinity_scores(raw: IntArray, scored: BoolArray) -> IntArray:
    """NodeAffinity's normalized score per node, 0..100 (0 where not scored): the
    weights of the preferred terms each node matches, ``100 * score // most``
    (kube-scheduler's ``DefaultNormalizeScore``); 0 for all where no node matches."""
    most = int(raw[scored].max()) if scored.any() else 0
    if most <= 0:
        return np.zeros(len(scored), dtype=np.int64)
    result: IntArray = np.where(scored, MAX_NODE_SCORE * raw // most, 0).astype(np.int64)
    return result


def profile_scores(
    resources: IntArray,
    *,
    toleration: IntArray | None = None,
    spread: IntArray | None = None,
    inter_pod: IntArray | None = None,
    node_affinity: IntArray | None = None,
) -> IntArray:
    """The default profile's total: the resource plugins' sum (weight 1 each) and the
    normalized scores of the others at their weights. A score left out (None) is one
    that would give every feasible node the same, which changes no choice."""
    total = resources
    for scores, weight in (
        (toleration, TAINT_TOLERATION_WEIGHT),
        (spread, TOPOLOGY_SPREAD_WEIGHT),
        (inter_pod, INTER_POD_AFFINITY_WEIGHT),
        (node_affinity, NODE_AFFINITY_WEIGHT),
    ):
        if scores is not None:
            total = total + weight * scores
    return total

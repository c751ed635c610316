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
  the last choice without ever being filtered out.

The simulator's kube-scheduler (``app/simulate/scheduling.py``) and the descheduler's
prediction of where a replacement lands (``app/rebalance/kube_scheduler.py``) both call
these; neither keeps a copy.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from app.load.model import MAX_NODE_SCORE

NON_ZERO_CPU_CORES = 0.1
NON_ZERO_MEMORY_BYTES = 200 * 2.0**20
TAINT_TOLERATION_WEIGHT = 3  # the default profile's weight; the resource plugins weigh 1

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

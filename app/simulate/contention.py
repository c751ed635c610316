"""What one step's demand does to the nodes: each node's demand is the sum of its bound
pods' usage, and where a node is asked for more CPU than it has, every pod on it gets
the same share of what it asked (the CFS quota cuts all alike)."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def demand_per_node(node_of: IntArray, usage: FloatArray, nodes: int) -> FloatArray:
    """Per node, its bound pods' usage (``node_of``: each slot's node, -1 for none).
    Bin 0 takes the slots bound nowhere, so none has to be picked out first (each
    node's bin sums the same pods, in order)."""
    sums = np.bincount(node_of + 1, weights=usage, minlength=nodes + 1)
    return cast(FloatArray, sums[1:])  # weighted: float64, whatever the stubs say


def cpu_got(
    node_of: IntArray, cpu: FloatArray, cpu_demand: FloatArray, allocatable_cpu: FloatArray
) -> FloatArray:
    """What each bound pod got of the CPU it asked for (0 for a slot bound nowhere)."""
    bound = node_of >= 0
    share = np.minimum(1.0, allocatable_cpu / np.maximum(cpu_demand, 1e-12))
    got = np.zeros_like(cpu)
    got[bound] = cpu[bound] * share[node_of[bound]]
    return got

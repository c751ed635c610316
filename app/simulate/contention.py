"""What one step's demand does to the nodes: each node's demand is the sum of its bound
pods' usage, and where a node is asked for more CPU than it has, every pod on it gets
the same share of what it asked (the CFS quota cuts all alike)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Binding:
    """Where each slot's pod is bound, in the forms the sums below take (read-only)."""

    bound: BoolArray  # a pod is bound in the slot
    unbound: BoolArray
    bins: IntArray  # the slot's node + 1; 0 for a slot bound nowhere

    @staticmethod
    def of(node_of: IntArray) -> Binding:
        """``node_of``: each slot's node, -1 for none."""
        bound = node_of >= 0
        binding = Binding(bound, ~bound, node_of + 1)
        for array in (binding.bound, binding.unbound, binding.bins):
            array.flags.writeable = False
        return binding


def demand_per_node(binding: Binding, usage: FloatArray, nodes: int) -> FloatArray:
    """Per node, its bound pods' usage. Bin 0 takes the slots bound nowhere, so none
    has to be picked out first (each node's bin sums the same pods, in order)."""
    sums = np.bincount(binding.bins, weights=usage, minlength=nodes + 1)
    return cast(FloatArray, sums[1:])  # weighted: float64, whatever the stubs say


def cpu_got(
    node_of: IntArray,
    binding: Binding,
    cpu: FloatArray,
    cpu_demand: FloatArray,
    allocatable_cpu: FloatArray,
) -> FloatArray:
    """What each bound pod got of the CPU it asked for (0 for a slot bound nowhere)."""
    bound = binding.bound
    share = np.minimum(1.0, allocatable_cpu / np.maximum(cpu_demand, 1e-12))
    got = np.zeros_like(cpu)
    got[bound] = cpu[bound] * share[node_of[bound]]
    return got

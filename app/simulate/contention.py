"""What one step's demand does to the nodes: each node's demand is the sum of its bound
pods' usage, and where a node is asked for more CPU than it has, every pod on it gets
the same share of what it asked (the CFS quota cuts all alike).

A step's usage arrays are read-only and kept while no usage changes, and a ``Binding``
is kept while no placement changes, so a quiet step is the same ``NodeLoad`` as the
last: ``NodeLoad.holds`` tells, by identity, and the cluster works it out once."""

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

    node_of: IntArray  # each slot's node, -1 for none
    bound: BoolArray  # a pod is bound in the slot
    unbound: BoolArray
    bins: IntArray  # the slot's node + 1; 0 for a slot bound nowhere

    @staticmethod
    def of(node_of: IntArray) -> Binding:
        """``node_of``: each slot's node, -1 for none (copied)."""
        bound = node_of >= 0
        binding = Binding(node_of.copy(), bound, ~bound, node_of + 1)
        for array in (binding.node_of, binding.bound, binding.unbound, binding.bins):
            array.flags.writeable = False
        return binding


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What one step's usage, by where pods are bound, does to the nodes."""

    cpu: FloatArray  # the usage and the binding it was worked out from
    memory: FloatArray
    binding: Binding
    cpu_fraction: FloatArray  # demand / allocatable
    mem_fraction: FloatArray
    throttled_core_s: float  # demand above allocatable, over the step
    oom_events: int  # nodes asked for more memory than they have
    cpu_seen: FloatArray  # the fractions capped at capacity, as the node reports them
    mem_seen: FloatArray
    cpu_got: FloatArray | None  # what each slot's pod got of its CPU (if asked for)

    def holds(self, cpu: FloatArray, memory: FloatArray, binding: Binding) -> bool:
        """Whether this is the load of these (read-only, kept) arrays and binding."""
        return cpu is self.cpu and memory is self.memory and binding is self.binding


def node_load(
    binding: Binding,
    cpu: FloatArray,
    memory: FloatArray,
    allocatable: tuple[FloatArray, FloatArray],
    step_s: float,
    *,
    with_cpu_got: bool,
    last: NodeLoad | None = None,
) -> NodeLoad:
    """The load of one step's usage on the nodes; the arrays made are read-only (the
    pipeline and the workload usage keep what they make of them). What ``last`` (the
    last step's load) worked out from the same memory array and binding is taken again."""
    allocatable_cpu, allocatable_memory = allocatable
    nodes = len(allocatable_cpu)
    cpu_demand = demand_per_node(binding, cpu, nodes)
    cpu_fraction = cpu_demand / allocatable_cpu
    throttled_core_s = float(np.maximum(cpu_demand - allocatable_cpu, 0.0).sum() * step_s)
    cpu_seen = np.minimum(cpu_fraction, 1.0)
    got = cpu_got(binding, cpu, cpu_demand, allocatable_cpu) if with_cpu_got else None
    for array in (cpu_seen,) if got is None else (cpu_seen, got):
        array.flags.writeable = False
    if last is not None and last.memory is memory and last.binding is binding:
        mem_fraction, mem_seen, oom_events = last.mem_fraction, last.mem_seen, last.oom_events
    else:
        mem_demand = demand_per_node(binding, memory, nodes)
        mem_fraction = mem_demand / allocatable_memory
        mem_seen = np.minimum(mem_fraction, 1.0)
        mem_seen.flags.writeable = False
        oom_events = int(np.count_nonzero(mem_demand > allocatable_memory))
    return NodeLoad(
        cpu,
        memory,
        binding,
        cpu_fraction,
        mem_fraction,
        throttled_core_s,
        oom_events,
        cpu_seen,
        mem_seen,
        got,
    )


def demand_per_node(binding: Binding, usage: FloatArray, nodes: int) -> FloatArray:
    """Per node, its bound pods' usage. Bin 0 takes the slots bound nowhere, so none
    has to be picked out first (each node's bin sums the same pods, in order)."""
    sums = np.bincount(binding.bins, weights=usage, minlength=nodes + 1)
    return cast(FloatArray, sums[1:])  # weighted: float64, whatever the stubs say


def cpu_got(
    binding: Binding, cpu: FloatArray, cpu_demand: FloatArray, allocatable_cpu: FloatArray
) -> FloatArray:
    """What each bound pod got of the CPU it asked for (0 for a slot bound nowhere)."""
    share = np.minimum(1.0, allocatable_cpu / np.maximum(cpu_demand, 1e-12))
    # Every slot's product is made, a slot bound nowhere reading the last node's share
    # (``node_of`` -1) and then taking 0: the same numbers as picking the bound slots
    # out, multiplying and scattering them back, in three passes fewer.
    got: FloatArray = np.where(binding.bound, cpu * share[binding.node_of], 0.0)
    return got

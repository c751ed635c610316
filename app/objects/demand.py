"""A pod's demand: the one rule for its effective requests and limits.

kube-scheduler, the kubelet and the quota admission all count a pod the same way, and
so does every part of loadaware (the extender's estimate, in Python and in
``app/extender/_pod_demand.c``; the descheduler's pod view; the simulator):

* the running phase: the app containers plus every sidecar (an init container with
  ``restartPolicy: Always``);
* the init phase: each regular init container plus the sidecars listed before it, and
  each sidecar with those before it;
* the larger of the two, per resource, plus the pod's ``overhead``.

Limits follow the same rule as requests.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.objects.resources import Resources

__all__ = [
    "NO_DEMAND",
    "Demand",
    "container_demand",
    "effective_demand",
    "requests_and_limits",
]

Demand = tuple[float, float, float, float]
"""(cpu request, memory request, cpu limit, memory limit) in cores and bytes: plain
floats, which hash and compare fast, so an estimate can be looked up by its demand."""

NO_DEMAND: Demand = (0.0, 0.0, 0.0, 0.0)


def effective_demand(
    containers: Iterable[Demand],
    init_containers: Iterable[tuple[Demand, bool]],
    overhead: tuple[float, float] = (0.0, 0.0),
) -> Demand:
    """The pod's demand from its containers', its init containers' (each with whether it
    is a sidecar) and its (cpu, memory) overhead."""
    # Four plain locals, not a list and a loop over it: the extender's Python path
    # reads a pod on its only thread.
    cpu_request = memory_request = cpu_limit = memory_limit = 0.0
    for cpu_r, memory_r, cpu_l, memory_l in containers:
        cpu_request += cpu_r
        memory_request += memory_r
        cpu_limit += cpu_l
        memory_limit += memory_l
    side = peak = NO_DEMAND  # the sidecars started so far; the init phase's highest
    for (cpu_r, memory_r, cpu_l, memory_l), sidecar in init_containers:
        if sidecar:  # runs from here on, beside the app containers too
            side = (side[0] + cpu_r, side[1] + memory_r, side[2] + cpu_l, side[3] + memory_l)
            cpu_request += cpu_r
            memory_request += memory_r
            cpu_limit += cpu_l
            memory_limit += memory_l
            phase = side
        else:
            phase = (cpu_r + side[0], memory_r + side[1], cpu_l + side[2], memory_l + side[3])
        peak = (
            max(peak[0], phase[0]),
            max(peak[1], phase[1]),
            max(peak[2], phase[2]),
            max(peak[3], phase[3]),
        )
    cpu_extra, memory_extra = overhead
    return (
        max(cpu_request, peak[0]) + cpu_extra,
        max(memory_request, peak[1]) + memory_extra,
        max(cpu_limit, peak[2]) + cpu_extra,
        max(memory_limit, peak[3]) + memory_extra,
    )


def container_demand(requests: Resources, limits: Resources) -> Demand:
    """One container's (or one pod's) demand from its requests and limits."""
    return (requests.cpu_cores, requests.memory_bytes, limits.cpu_cores, limits.memory_bytes)


def requests_and_limits(demand: Demand) -> tuple[Resources, Resources]:
    cpu_request, memory_request, cpu_limit, memory_limit = demand
    return Resources(cpu_request, memory_request), Resources(cpu_limit, memory_limit)

"""Does a replay reproduce the past? The ``default`` run against what Prometheus recorded.

A captured scenario (``loadaware capture``) carries ``observed``: each node's usage as
Prometheus recorded it over the range (its pods' cAdvisor series summed by node).
The ``default`` run starts from the real placement with the observed demand, so, where
the replay is faithful, its per-node utilisation follows the recorded one. The check
is the mean absolute error, in points of allocatable (1 point = 1 % of the node), per
resource over every node and step, and per node: a node whose own error passes
``BOUND_POINTS`` is named, so a replay that does not match says where.

What makes a replay drift: pods that moved during the range (the replay keeps them
where they started unless its scheduler moves them), pods of workloads the capture
could not read, and usage outside the cAdvisor container series.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.simulate.cluster import Run
from app.simulate.scenario import Observed, Scenario

# A replay whose error passes this (on any resource, overall or on one node) does not
# reproduce the past well enough to compare policies on it.
BOUND_POINTS = 5.0


@dataclass(frozen=True, slots=True)
class NodeError:
    node: str
    cpu_points: float
    memory_points: float


@dataclass(frozen=True, slots=True)
class Fidelity:
    cpu_points: float  # mean absolute error over nodes and steps, in points
    memory_points: float
    nodes: int  # nodes compared (those Prometheus recorded)
    off: tuple[NodeError, ...]  # nodes above the bound, worst first
    bound_points: float = BOUND_POINTS

    @property
    def faithful(self) -> bool:
        return not self.off and max(self.cpu_points, self.memory_points) <= self.bound_points

    def line(self) -> str:
        """One line for above the table; the nodes that do not match, if any, after it."""
        head = (
            f"fidelity (default from the real placement vs Prometheus, {self.nodes} nodes): "
            f"mean absolute error CPU {self.cpu_points:.1f} points, memory "
            f"{self.memory_points:.1f} points"
        )
        if self.faithful:
            return f"{head}: reproduces the past (within {self.bound_points:g} points)"
        where = ", ".join(
            f"{e.node} (CPU {e.cpu_points:.1f}, memory {e.memory_points:.1f})"
            for e in self.off[:5]
        )
        more = f" and {len(self.off) - 5} more" if len(self.off) > 5 else ""
        return (
            f"{head}: DOES NOT reproduce the past (bound {self.bound_points:g} points); "
            f"off on {where or 'no single node'}{more}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "cpuPoints": round(self.cpu_points, 3),
            "memoryPoints": round(self.memory_points, 3),
            "nodes": self.nodes,
            "boundPoints": self.bound_points,
            "faithful": self.faithful,
            "off": [
                {"node": e.node, "cpuPoints": round(e.cpu_points, 3),
                 "memoryPoints": round(e.memory_points, 3)}
                for e in self.off
            ],
        }  # fmt: skip


def _recorded(values: tuple[float, ...], interval_s: float, times_s: npt.NDArray[np.float64]) -> (
    npt.NDArray[np.float64]
):
    points = np.arange(len(values), dtype=np.float64) * interval_s
    return np.interp(times_s, points, np.array(values, dtype=np.float64))


def fidelity(run: Run, scenario: Scenario) -> Fidelity | None:
    """The replay's error against ``scenario.observed``; None when there is none."""
    observed: Observed | None = scenario.observed
    if observed is None or not observed.nodes:
        return None
    index_of = {name: i for i, name in enumerate(run.node_names)}
    allocatable = {
        name: (group.cpu, group.memory)
        for group in scenario.nodes
        for name in group.node_names
    }
    # Compare only where the recording has data: up to its last point.
    last_s = (len(observed.nodes[0].cpu) - 1) * observed.interval_s
    steps = run.times_s <= last_s + 1e-9
    times = run.times_s[steps]
    errors = []
    for node in observed.nodes:
        cpu_alloc, memory_alloc = allocatable[node.name]
        column = index_of[node.name]
        cpu_real = _recorded(node.cpu, observed.interval_s, times) / cpu_alloc
        memory_real = _recorded(node.memory, observed.interval_s, times) / memory_alloc
        cpu_sim = run.cpu_utilisation[steps, column].astype(np.float64)
        memory_sim = run.memory_utilisation[steps, column].astype(np.float64)
        errors.append(
            NodeError(
                node.name,
                float(np.mean(np.abs(cpu_sim - cpu_real))) * 100,
                float(np.mean(np.abs(memory_sim - memory_real))) * 100,
            )
        )
    off = sorted(
        (e for e in errors if max(e.cpu_points, e.memory_points) > BOUND_POINTS),
        key=lambda e: -max(e.cpu_points, e.memory_points),
    )
    return Fidelity(
        cpu_points=float(np.mean([e.cpu_points for e in errors])),
        memory_points=float(np.mean([e.memory_points for e in errors])),
        nodes=len(errors),
        off=tuple(off),
    )

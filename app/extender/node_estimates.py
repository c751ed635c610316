"""What one pod adds to one node under the policy in force: its estimate
(``app.load.estimate``), at most the node's allocatable, and its fractions of that
allocatable. The reserve estimates every reservation here.

A burst is many pods of a few shapes, so a reservation's estimate is remembered per pod
shape and node rather than recomputed on the extender's one thread; the memory is
forgotten when an allocatable changes, on a policy change (``forget_estimates``), and when
it is full.
"""

from __future__ import annotations

from collections.abc import Callable

from app.load import estimate_scheduled, unsampled_fractions, within_node
from app.objects import CPU, MEMORY, ZERO, Demand, Resources, requests_and_limits
from app.policy import EstimationPolicy, Policy

Fractions = tuple[float, float]  # (cpu, memory), each a fraction of allocatable
_MEMO_SIZE = 4096


class EstimatedUnder:
    """The policy the reserve's estimates are made under, for each part that makes one:
    the node table's, adopted with it (``Reserve.set_policy``)."""

    __slots__ = ("policy",)

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self) -> Policy:
        return self.policy


class NodeEstimates:
    """Each node's allocatable, and the remembered estimate of each pod shape on it."""

    def __init__(self, policy: Callable[[], Policy]) -> None:
        self._policy = policy
        self._allocatable: dict[str, Resources] = {}
        # (demand, node, observed) → the estimate and its (cpu, memory) fractions of the
        # node's allocatable, under the policy and the allocatable known when it was made
        self._remembered: dict[
            tuple[Demand, str, Resources | None], tuple[Resources, Fractions]
        ] = {}

    def allocatable(self, node: str) -> Resources | None:
        """The node's allocatable, if the node cache has shown it."""
        return self._allocatable.get(node)

    def allocatable_or_zero(self, node: str) -> Resources:
        return self._allocatable.get(node, ZERO)

    def set_allocatable(self, node: str, allocatable: Resources | None) -> bool:
        """Record a node's allocatable (None: the node is gone); True if it changed."""
        if allocatable is None:
            self._allocatable.pop(node, None)
            return False
        changed = self._allocatable.get(node) != allocatable
        self._allocatable[node] = allocatable
        if changed:
            self._remembered.clear()
        return changed

    def reservation(
        self, demand: Demand, node: str, observed: Resources | None = None
    ) -> tuple[Resources, Fractions]:
        """A reservation's estimate on ``node`` and its (cpu, memory) fractions of the
        node's allocatable, remembered per pod shape, node and workload usage."""
        key = (demand, node, observed)
        return self._remembered.get(key) or self._estimate(key)

    def _estimate(self, key: tuple[Demand, str, Resources | None]) -> tuple[Resources, Fractions]:
        if len(self._remembered) >= _MEMO_SIZE:
            self._remembered.clear()
        demand, node, observed = key
        allocatable = self._allocatable.get(node, ZERO)
        usage = self.usage(demand, node, self._policy().spec.estimation, observed)
        fractions = unsampled_fractions((usage,), allocatable)
        remembered = self._remembered[key] = (
            usage,
            (fractions.get(CPU, 0.0), fractions.get(MEMORY, 0.0)),
        )
        return remembered

    def usage(
        self,
        demand: Demand,
        node: str,
        settings: EstimationPolicy,
        observed: Resources | None = None,
    ) -> Resources:
        """The estimate of a pod of ``demand`` (and of a workload ``observed`` to use so
        much a pod) under ``settings``, at most the node's allocatable; not remembered."""
        requests, limits = requests_and_limits(demand)
        estimate = estimate_scheduled(requests, limits, settings, observed)
        return within_node(estimate, self._allocatable.get(node, ZERO))

    def forget_estimates(self) -> None:
        """Forget every remembered estimate: the policy changed."""
        self._remembered.clear()

"""Who makes a source hot: its excess attributed to the pods using more than they request.

A pod at or within its requests uses what the scheduler reserved for it; a pod above
them uses what nobody reserved, and that is what makes a node hot after placement
(the kubelet's node-pressure eviction ranks such pods first for the same reason). On a
source, per resource it is hot on:

- pods above their requests (causers) may be evicted to cool it, whatever ordering
  hints they carry (``victims.victim_order``);
- pods at or within their requests may relieve only ``within_room``: the part of the
  excess that no pod above its requests explains (the node is packed past the
  threshold by requests alone). A tenant whose burner is protected by what it controls
  (an emptyDir, a single replica, a PDB, an opt-out) can then no longer get other
  tenants' pods evicted, nor, beside a request-based scheduler that sees the node empty
  by requests, the new pods that land there evicted the next run (docs/security.md);
- a node still hot after the drain, with pods within their requests kept and pods
  above theirs staying (they cannot be evicted: protected, opted out, the last Ready
  replica, a PodDisruptionBudget, a cooldown; or no destination takes them), is
  reported (``HeldHot``: the plan's notes, ``explain node``, an Event on the Node)
  rather than churned.

Only measured usage (Prometheus) says a pod is above its requests, and only by more than
``CAUSE_MARGIN`` (25 %): an estimate from requests and limits is no evidence against a
pod, and a pod sized to its use wobbles a little above its requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.objects import MEMORY, PodInfo, Resources
from app.rebalance.outcome import HeldHot

MEASURED = "prometheus"  # the usage source whose answer is evidence (``usage.MeasuredUsage``)
# How far above its requests a pod must be to count as a cause: a pod sized to its use
# wobbles around its requests (a 5-minute rate, a working set), and a tenant must not
# get its neighbours evicted because they use a few per cent more than they asked for.
# A pod that requests nothing of a resource and uses some of it is a cause.
CAUSE_MARGIN = 0.25
_ROUNDING = 1e-9  # amounts of a resource below this are nothing
_NAMED = 5  # pods named in a report, the biggest first


@dataclass(frozen=True, slots=True)
class PodOnSource:
    """A pod on a source as the drain reads it: its usage and where it came from."""

    pod: PodInfo
    usage: Resources
    origin: str


def over_requests(
    pod: PodInfo, usage: Resources, origin: str, resources: Sequence[str]
) -> dict[str, float]:
    """What the pod uses above its requests, per resource of ``resources`` where it uses
    more than ``CAUSE_MARGIN`` above them."""
    if origin != MEASURED:
        return {}
    return {
        r: usage.get(r) - pod.requests.get(r)
        for r in resources
        if usage.get(r) > pod.requests.get(r) * (1 + CAUSE_MARGIN) + _ROUNDING
    }


class Attribution:
    """One source's excess, attributed: see the module."""

    def __init__(
        self,
        node: str,
        allocatable: Resources,
        excess_fraction: Mapping[str, float],
        pods: Sequence[PodOnSource],
    ) -> None:
        resources = tuple(excess_fraction)
        excess = {r: excess_fraction[r] * allocatable.get(r) for r in resources}
        above = dict.fromkeys(resources, 0.0)
        self._over: dict[str, dict[str, float]] = {}  # per causer, its amounts over
        for entry in pods:
            over = over_requests(entry.pod, entry.usage, entry.origin, resources)
            if not over:
                continue
            self._over[entry.pod.key] = over
            for resource, amount in over.items():
                above[resource] += amount
        self.node = node
        self._allocatable = allocatable
        self._above = above
        self._within_room = {r: max(0.0, excess[r] - above[r]) for r in resources}
        self._refused = 0  # pods within their requests refused: what makes a report
        self._moved: set[str] = set()  # causers the plan evicts

    def causer(self, pod: PodInfo) -> bool:
        """Whether the pod uses more than it requests of a resource its node is hot on."""
        return pod.key in self._over

    def refusal(self, pod: PodInfo, over: Sequence[str]) -> str | None:
        """Why a pod within its requests may not be evicted now, or None: on every
        resource left to shed, pods above their requests explain the excess that is
        left (a resource no pod is above its requests on leaves the plan as it was)."""
        if self.causer(pod):
            return None
        if any(
            self._above.get(r, 0.0) <= _ROUNDING or self._within_room.get(r, 0.0) > _ROUNDING
            for r in over
        ):
            return None
        self._refused += 1
        return (
            f"within its requests: the excess of {' or '.join(over)} on {self.node} is "
            "used by pods above their requests, and pods within theirs are not moved "
            "for it (see the node's report)"
        )

    def take(self, pod: PodInfo, amount: Resources) -> None:
        """Count an eviction: a causer's leaves the node's report; a pod within its
        requests uses up room."""
        if self.causer(pod):
            self._moved.add(pod.key)
            return
        for resource in self._within_room:
            self._within_room[resource] -= amount.get(resource)

    def give_back(self, pod: PodInfo, amount: Resources) -> None:
        """Undo ``take``: the plan no longer evicts the pod."""
        if self.causer(pod):
            self._moved.discard(pod.key)
            return
        for resource in self._within_room:
            self._within_room[resource] += amount.get(resource)

    def report(self, still_over: Mapping[str, float]) -> HeldHot | None:
        """The node's report when pods within their requests were kept for an excess that
        is still there after the drain, and pods above their requests stay on it (they
        cannot be evicted, or go nowhere); None otherwise (a DaemonSet agent above its
        requests on a node cooled by moving other pods above theirs is no news)."""
        if not self._refused:
            return None
        staying = [
            (key, resource, amount)
            for key, over in self._over.items()
            if key not in self._moved
            for resource, amount in over.items()
            if resource in still_over
        ]
        if not staying:
            return None
        pods = tuple(sorted(staying, key=lambda h: (-h[2], h[0], h[1])))
        held: dict[str, float] = {}
        for _, resource, amount in pods:
            held[resource] = held.get(resource, 0.0) + amount
        held = {
            r: min(amount / self._allocatable.get(r), still_over[r]) for r, amount in held.items()
        }
        named = ", ".join(
            f"{key} ({resource} {_amount(resource, amount)} above its requests)"
            for key, resource, amount in pods[:_NAMED]
        )
        more = f" and {len(pods) - _NAMED} more" if len(pods) > _NAMED else ""
        shares = ", ".join(f"{r} {f:.1%} of the node" for r, f in held.items())
        reason = (
            f"hot from pods above their requests that stay on it ({shares}): "
            f"{named}{more}; pods within their requests are not evicted to make room for "
            "them: fix those pods' requests, or what keeps them from moving"
        )
        return HeldHot(self.node, held, pods, reason)


def _amount(resource: str, amount: float) -> str:
    return f"{amount / 2**20:.0f} MiB" if resource == MEMORY else f"{amount:.3g} cores"

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
- ``held``: what the causers that cannot be evicted (protected, opted out, the last
  Ready replica, a PodDisruptionBudget, a cooldown) use above their requests, capped at
  the excess. A node still hot after the drain, with some held and pods within
  their requests kept, is reported (``HeldHot``: the plan's notes, ``explain node``,
  an Event on the Node) rather than churned.

Only measured usage (Prometheus) says a pod is above its requests: an estimate from
requests and limits is no evidence against a pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.objects import MEMORY, PodInfo, Resources
from app.rebalance.outcome import HeldHot

MEASURED = "prometheus"  # the usage source whose answer is evidence (``usage.MeasuredUsage``)
_ROUNDING = 1e-9  # amounts of a resource below this are nothing
_NAMED = 5  # pods named in a report, the biggest first


@dataclass(frozen=True, slots=True)
class PodOnSource:
    """A pod on a source as the drain reads it: its usage and where it came from, and why
    it cannot be evicted in this run (None: it may be)."""

    pod: PodInfo
    usage: Resources
    origin: str
    kept: str | None


def over_requests(
    pod: PodInfo, usage: Resources, origin: str, resources: Sequence[str]
) -> dict[str, float]:
    """What the pod uses above its requests, per resource of ``resources`` where it does."""
    if origin != MEASURED:
        return {}
    over = {r: usage.get(r) - pod.requests.get(r) for r in resources}
    return {r: amount for r, amount in over.items() if amount > _ROUNDING}


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
        held = dict.fromkeys(resources, 0.0)
        self._causers: set[str] = set()
        holders: list[tuple[str, str, float]] = []
        for entry in pods:
            over = over_requests(entry.pod, entry.usage, entry.origin, resources)
            if not over:
                continue
            self._causers.add(entry.pod.key)
            for resource, amount in over.items():
                above[resource] += amount
                if entry.kept is not None:
                    held[resource] += amount
                    holders.append((entry.pod.key, resource, amount))
        self.node = node
        self.held_fraction = {
            r: min(held[r], excess[r]) / allocatable.get(r) for r in resources
        }
        self._above = above
        self._refused = 0  # pods within their requests refused: what makes a report
        self._within_room = {r: max(0.0, excess[r] - above[r]) for r in resources}
        self._holders = sorted(holders, key=lambda h: (-h[2], h[0], h[1]))

    def causer(self, pod: PodInfo) -> bool:
        """Whether the pod uses more than it requests of a resource its node is hot on."""
        return pod.key in self._causers

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
        return self._within_text(over)

    def _within_text(self, over: Iterable[str]) -> str:
        """The skip reason of a pod within its requests on this node."""
        return (
            f"within its requests: the excess of {' or '.join(over)} on {self.node} is "
            "used by pods above their requests, and pods within theirs are not moved "
            "for it (see the node's report)"
        )

    def take(self, pod: PodInfo, amount: Resources) -> None:
        """Count a pod within its requests as relieving its usage of the room."""
        if self.causer(pod):
            return
        for resource in self._within_room:
            self._within_room[resource] -= amount.get(resource)

    def report(self, still_over: Mapping[str, float]) -> HeldHot | None:
        """The node's report when pods within their requests were kept for an excess that
        is still there after the drain and that pods which cannot be evicted hold part
        of; None otherwise (a DaemonSet agent above its requests on a node cooled by
        moving other pods above theirs is no news)."""
        if not self._refused:
            return None
        held = {r: f for r, f in self.held_fraction.items() if f > 0 and r in still_over}
        if not held:
            return None
        pods = tuple(h for h in self._holders if h[1] in held)
        named = ", ".join(
            f"{key} ({resource} {_amount(resource, amount)} above its requests)"
            for key, resource, amount in pods[:_NAMED]
        )
        more = f" and {len(pods) - _NAMED} more" if len(pods) > _NAMED else ""
        shares = ", ".join(f"{r} {f:.1%} of the node" for r, f in held.items())
        reason = (
            f"hot from pods above their requests that cannot be evicted ({shares}): "
            f"{named}{more}; pods within their requests are not evicted to make room for "
            "them: fix those pods' requests or their protection"
        )
        return HeldHot(self.node, held, pods, reason)


def _amount(resource: str, amount: float) -> str:
    return f"{amount / 2**20:.0f} MiB" if resource == MEMORY else f"{amount:.3g} cores"

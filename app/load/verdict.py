"""One node judged for one pod: the single place a node's verdict is assembled.

The extender's node table, the simulator's load filter and ``loadaware explain`` all
judge a node the same way, and each calls ``node_verdict`` for it, keeping only its own
caching (what it measured, which pods its samples do not hold yet) and presentation:

* the node's **load** (``assess``): its readings with the usage its samples do not
  contain yet added, whether the filter passes it and on which predicate it fails,
  its 0..100 score and its 0..10 extender score;
* whether it **can be preferred** (``wire.can_be_preferred``): it passes and its
  score rests on a fresh reading;
* its **room** under the limits (``wire.limit_room``): per resource, the usage (a
  fraction of allocatable) that can still be added to its fresh readings before a
  predicate rejects it; a resource left out has no limit;
* whether the pod **fits** that room (``wire.has_room``), for a pod given as its
  estimate's share of the node's allocatable.

``policy`` is the node's: with node pools, its pool's (``Policy.for_node``,
``app/policy/pools.py``), which each caller resolves once per node, not per call.

``unsampled`` is what the node's samples do not hold yet, per resource, a signed
fraction of allocatable (``app.load.estimate``): the extender's reserve sums it from
bound pods and reservations, the simulator from its recent placements, explain from
the pods it lists. How each finds it is its own; what it means for the node is here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.load.model import Measurement, NodeLoad, assess, judged_by
from app.load.prioritize import can_be_preferred, has_room, limit_room
from app.policy import Policy

__all__ = ["NodeVerdict", "node_verdict"]


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node's verdict under a policy, for one pod (``node_verdict``)."""

    load: NodeLoad
    preferable: bool  # may be the preferred node (``wire.can_be_preferred``)
    room: Mapping[str, float]  # ``wire.limit_room``: resource → fraction still addable
    fits: bool = True  # the pod's share fits ``room`` (True where no pod was given)

    @property
    def passes(self) -> bool:
        """The load filter passes the node (``reason`` is None)."""
        return not self.load.overloads

    @property
    def reason(self) -> str | None:
        """The filter's reason: the first overloaded predicate in policy order."""
        return self.load.reason

    @property
    def score(self) -> int:
        """The 0..100 score, hot value applied."""
        return self.load.score

    @property
    def extender_score(self) -> int:
        """The 0..10 score prioritize answers before the preferred node's lift."""
        return self.load.extender_score


def node_verdict(
    measurement: Measurement,
    unsampled: Mapping[str, float] | None,
    policy: Policy,
    pod_share: Mapping[str, float] | None = None,
) -> NodeVerdict:
    """The node measured as ``measurement``, with ``unsampled`` usage its samples do not
    hold yet, judged under ``policy`` for a pod whose estimate is ``pod_share`` of the
    node's allocatable (per resource; None: no pod, it fits). A class's policy is judged
    beside the classes whose pods the node runs (``app.load.judged_by``)."""
    policy = judged_by(policy, measurement)
    load = assess(measurement, policy, unsampled)
    room = limit_room(load, policy)
    fits = pod_share is None or has_room(room, pod_share)
    return NodeVerdict(load, can_be_preferred(load), room, fits)

"""How hot a landing node can get: the proof ``scheduler: requests`` asks for.

Beside a kube-scheduler that places by requests alone, an eviction is a one-way door.
The replacement goes where requests say, and if that node grows hot later (its own
pods reach their peak, hours after the move) nothing brings the pod back: the next
eviction goes where requests say again, to the same kind of node, and the descheduler
stands down there. Beside the extender or soft taints the scheduler sees the heat and
the next round undoes a bad move; here the first move must be right for good.

A node's usage *now* proves nothing about later (issue 40's two-group day: group b at
its trough at 4h took group a's batch pods, then passed 100 % at its own peak at 16h).
What does bound it is the pods' limits: a container cannot use more CPU than its limit
(it is throttled) nor more memory (it is killed). So a landing is provably cool when,
per resource with a reading, the node's usage now, the replacement's usage, and what
every pod on it (the replacement and the pods this plan already sent there included)
may still add up to its limit, stay under the ceiling. A pod without a limit for a
resource may add anything: no proof, the pod stays. Usage the node shows outside its
pods (the system, the kubelet) is taken as it is now; pods bound there later are the
scheduler's doing, with or without the descheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.objects import PodInfo, Resources
from app.rebalance.destinations import FINISHED_PHASES, ROUNDING, Room


def growth(pod: PodInfo, usage: Resources | None, resource: str) -> float | None:
    """What ``pod`` may still add to its node's ``resource`` usage: its limit less what
    it uses (``usage``; unmeasured, the whole limit); None where it has no limit."""
    limit = pod.limits.get(resource)
    if limit <= 0:
        return None
    used = usage.get(resource) if usage is not None else 0.0
    return max(0.0, limit - used)


class LimitBound:
    """Per landing node, the pods there and the growth of those the plan sends there."""

    def __init__(self, pods: Iterable[PodInfo], measured: Mapping[str, Resources]) -> None:
        self._measured = measured
        self._by_node: dict[str, list[PodInfo]] = {}
        for pod in pods:
            if pod.node_name is not None and pod.phase not in FINISHED_PHASES:
                self._by_node.setdefault(pod.node_name, []).append(pod)
        self._sent: dict[str, list[tuple[PodInfo, Resources]]] = {}

    def refusal(self, room: Room, pod: PodInfo, usage: Resources) -> str | None:
        """None when ``pod``'s replacement (using ``usage``) keeps ``room``'s node under
        its ceiling for every resource with a reading, every pod there at its limit;
        else why that cannot be shown."""
        node = room.node
        here = self._by_node.get(node.name, [])
        sent = self._sent.get(node.name, [])
        for resource, fraction in room.usage_fraction.items():
            allocatable = node.allocatable.get(resource)
            added = growth(pod, usage, resource)
            if added is None:
                return f"the pod has no {resource} limit: its usage there is not bounded"
            for other in here:
                more = growth(other, self._measured.get(other.key), resource)
                if more is None:
                    return (
                        f"{other.key} on it has no {resource} limit: how hot it gets is "
                        "not bounded"
                    )
                added += more
            for other, other_usage in sent:
                more = growth(other, other_usage, resource)
                added += more or 0.0  # each was sent there only with a limit
            worst = fraction + (usage.get(resource) + added) / allocatable
            ceiling = room.ceiling[resource]
            if worst > ceiling + ROUNDING:
                return (
                    f"{resource} could reach {worst:.0%} with every pod there at its "
                    f"limit, above {ceiling:.0%}"
                )
        return None

    def send(self, node: str, pod: PodInfo, usage: Resources) -> None:
        self._sent.setdefault(node, []).append((pod, usage))

    def take_back(self, node: str, pod: PodInfo) -> None:
        sent = self._sent.get(node, [])
        for index, (other, _) in enumerate(sent):
            if other.key == pod.key:
                del sent[index]
                return


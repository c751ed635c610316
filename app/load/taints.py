"""Soft taints: which nodes carry loadaware's ``PreferNoSchedule`` taint. Pure.

kube-scheduler's default profile scores a ``PreferNoSchedule`` taint a pod does not
tolerate through TaintToleration, at a weight that outweighs the request-based plugins:
a tainted node becomes the last choice without ever being forbidden. So where the
scheduler cannot call the extender (managed control planes), the annotator steers
placement by tainting the nodes that are hot on real usage.

The rule, node by node, from the same readings the extender's filter judges, with the
same estimate added: ``judge_node`` reads a node's annotations through
``evaluate_node`` with ``unsampled``, the usage of the pods bound since the node's
samples were taken (``app.load.estimate.node_unsampled``). Without it a node filled by
a wave shows nothing for a whole averaging window: on cpu-heavy, one node took 7 pods
of 1.5 CPU before its 5-minute average could show them, while the extender, which adds
the estimate, stopped sending pods there after 4. So the annotator judges as often as
it refreshes the hot value, not only when a metric syncs.

Unlike the extender, the rule counts of each such pod only the share its node's
samples do not show yet (``partly_sampled``, ``app.load.estimate.unsampled_share``: a
5-minute average taken ``t`` seconds after a binding holds about ``t``/5 min of the
pod). The extender judges the pod in hand against a limit, where counting a fresh pod
whole only keeps a pod off a node a little too long; the rule ranks nodes against each
other for a bounded number of taints, where the sampled part counted twice makes a node
of 5 fresh pods read as hot as a node of 6 older ones: on cpu-heavy, nodes of 5 kept
the taints and a node of 6 took a 7th pod (65.6 %) on 6 of seeds 1-20.

It also judges each node with the *next pod*: one more pod like those of the wave in
progress (``next_pod``: of the kinds of pod bound anywhere in the cluster within
``estimation.maxAge``, the one whose estimate is the largest share of the node). A
taint steers the pods that come after it, so a node must carry it *before* the pod
that would take it over its limit, not after: the extender's room check asks the same
of a node for the pod in hand. Judged as it stood, cpu-heavy's last wave put a 7th
pod of 1.5 CPU (65.6 %) on one of the seven nodes left, since kube-scheduler's
request-based scores tie a node of 6 pods with one of 5, and the taint came one pod
late: more node-minutes above the limit than ``default`` on 14 of seeds 1-20, and on
5 of 10 of the mixed-waves fixture (not tuned to). With the next pod, on 6 and 0; with
each pod counted less what its samples show and the share at 70 % (below), on none.
With no wave (no pod bound within ``maxAge``) the rule judges the node as it is.

Each pod, bound or next, is estimated as the extender estimates it
(``estimate_with_evidence`` on its ``PlacedPod``): a pod placed through the scheduler
is raised to its workload's observed per-pod usage where that is at least 3 times the
guess from requests and limits (``PlacedPod.observed``, ``estimation.workloadUsage``;
the annotator publishes it, README "Burst-aware estimation"), a pod placed around it
is read from its requests. The callers hand each pod its workload's usage: the
annotator from the document it last published (while fresh; else none, and the
estimate is on requests and limits), the simulator from its simulated publication. A
service that requests 100m and uses 0.7 core, estimated at 85m, was no next pod worth
a taint: on crane-style-waves its waves piled where kube-scheduler's ties sent them,
and the taints added harm over ``default`` on 4 of seeds 1-10; with its usage, on 1
(seed 8: the first pod of a wave, which no next pod foresees), 3.1 throttled
CPU-minutes in all against 101.3.

- **hot**: a *fresh* reading of a limited metric (a policy predicate), with the
  estimate and the next pod, is above its limit. A hot node is tainted.
- **warm**: none is above its limit, but one is above the *lower line* (its limit less
  ``release_margin``). A tainted warm node keeps its taint; an untainted one gets none.
- **cool**: every fresh reading of a limited metric is at or below its lower line. A
  tainted cool node keeps its taint until it has stayed cool for ``min_hold_s``, so a
  short dip does not make the taint flap.
- **unknown**: no fresh reading of any limited metric (stale, missing, unreadable).
  Fail open: never tainted, and an existing taint goes at once.

Then the bound: never more than ``max_share`` of the nodes (at least one node once
there are two), so a cluster hot everywhere is not tainted everywhere, and never more
than the nodes that are not hot as they stand (without the next pod): a taint sends a
hot node's pods to the others, which helps only where they are not hot too. On burst
(100 pods in a minute on 10 nodes) the estimate makes every node hot; 4 taints piled
the rest of the burst onto the other 6, hot too, and throttled 470-1080 core-minutes
of CPU where spreading by requests throttled next to none. Counted with the next pod,
the nodes a wave had filled to one pod short of the limit took the taints of the
nodes busy from the start at the end of each wave, which then took its last pods:
memory-heavy's busy nodes reached 0.80-0.94 of their memory on every seed of 1-20
(0.71-0.75 judged without the next pod; 0.71-0.80 counted as they stand). The
hottest are kept, judged by how far their worst reading (with the next pod) is above
its limit; a node already tainted counts ``release_margin`` hotter, so two nodes near
the bound do not take turns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from app.load.estimate import PlacedPod, estimate_with_evidence, unsampled_fractions
from app.load.model import Measurement, NodeLoad, measure

# The taint and the rule's settings live in soft_taint_rule (the annotator's flags read
# them without loading the model); they are named here too, where the rule is.
from app.load.soft_taint_rule import SOFT_TAINT_EFFECT as SOFT_TAINT_EFFECT
from app.load.soft_taint_rule import SOFT_TAINT_KEY as SOFT_TAINT_KEY
from app.load.soft_taint_rule import SOFT_TAINT_VALUE as SOFT_TAINT_VALUE
from app.load.soft_taint_rule import SoftTaintSettings as SoftTaintSettings
from app.objects import Resources
from app.policy import Policy

__all__ = [
    "Heat",
    "NodeHeat",
    "SoftTaints",
    "bounded_next_pod_heats",
    "decide_soft_taints",
    "judge_measured",
    "judge_node",
    "next_pod",
    "node_heat",
    "plain_wave",
    "wave_of",
]


class Heat(StrEnum):
    HOT = "hot"
    WARM = "warm"
    COOL = "cool"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class NodeHeat:
    heat: Heat
    # The worst fresh limited reading's usage less its limit (negative below the limit);
    # -inf without one.
    excess: float
    metric: str | None  # the metric of that reading
    usage_fraction: float | None
    limit_fraction: float | None
    # Of usage_fraction, what the estimate of pods not yet sampled added, and of that,
    # the next pod of the wave in progress (``next_pod``).
    estimated_fraction: float = 0.0
    next_pod_fraction: float = 0.0
    # Hot as it stands, without the next pod: what the bound on the taints counts.
    hot_as_it_stands: bool | None = None  # None: judged without a next pod (= HOT)

    @property
    def hot_now(self) -> bool:
        if self.hot_as_it_stands is not None:
            return self.hot_as_it_stands
        return self.heat is Heat.HOT

    def describe(self) -> str:
        if self.metric is None or self.usage_fraction is None:
            return "no fresh reading of a limited metric"
        relation = ">" if self.heat is Heat.HOT else "<="
        usage = f"{self.usage_fraction:.2f}"
        sampled = self.estimated_fraction - self.next_pod_fraction
        if abs(sampled) >= 0.005:  # what rounds to 0.00 (the next pod's share less itself)
            usage += f" ({sampled:+.2f} estimated)"
        if self.next_pod_fraction:
            usage += f" ({self.next_pod_fraction:+.2f} next pod)"
        return f"{self.metric} {usage} {relation} {self.limit_fraction:g}"


def wave_of(pods: Iterable[PlacedPod], policy: Policy, now_s: float) -> tuple[PlacedPod, ...]:
    """The wave in progress: of ``pods`` (bound anywhere in the cluster), those bound
    within ``estimation.maxAge``, one of each kind (requests, limits, evidence and the
    usage its workload is observed to use), so
    that judging every node against it costs the kinds, not the pods."""
    settings = policy.spec.estimation
    if not settings.enabled:
        return ()
    kinds: dict[tuple[Resources, Resources, str, Resources | None], PlacedPod] = {}
    for pod in pods:
        if now_s < pod.bound_at_s + settings.max_age_s:
            kinds.setdefault((pod.requests, pod.limits, pod.evidence, pod.observed), pod)
    return tuple(kinds.values())


def next_pod(wave: Iterable[PlacedPod], allocatable: Resources, policy: Policy) -> dict[str, float]:
    """The next pod of the wave in progress, as fractions of this node's allocatable.

    ``wave`` is what ``wave_of`` returns: the kinds of pod bound in the cluster within
    ``estimation.maxAge``. The scheduler is placing pods like them now, so the one whose
    estimate (``estimate_with_evidence``: on its evidence, within the node) is the
    largest share of this node is the pod this node may get next. A kind whose estimate
    alone reaches a limit of its resource is left out: it would be over the limit on an
    empty node, so no node has room for it and judging with it would make every node
    hot (a tenant's pod of huge limit would do that; docs/security.md). Empty: no wave,
    or estimation off.
    """
    settings = policy.spec.estimation
    if not settings.enabled:
        return {}
    lowest: dict[str, float] = {}  # per resource, its lowest limit
    for metric, limit in policy.limits:
        resource = policy.metric_resources.get(metric)
        if resource is not None:
            lowest[resource] = min(limit, lowest.get(resource, limit))
    best: dict[str, float] = {}
    for pod in wave:
        usage = estimate_with_evidence(
            pod.requests, pod.limits, pod.evidence, settings, allocatable, pod.observed
        )
        fractions = unsampled_fractions((usage,), allocatable)
        if any(share >= lowest.get(r, math.inf) for r, share in fractions.items()):
            continue
        if max(fractions.values(), default=0.0) > max(best.values(), default=0.0):
            best = fractions
    return best


def plain_wave(wave: Iterable[PlacedPod]) -> tuple[PlacedPod, ...]:
    """The wave's kinds without the usage their workloads are observed to use: the next
    pod as a pod that takes no raise would be estimated (``bounded_next_pod_heats``)."""
    kinds: dict[tuple[Resources, Resources, str], PlacedPod] = {}
    for pod in wave:
        kinds.setdefault((pod.requests, pod.limits, pod.evidence), replace(pod, observed=None))
    return tuple(kinds.values())


def bounded_next_pod_heats(
    raised: Mapping[str, NodeHeat], plain: Mapping[str, NodeHeat], left: int
) -> dict[str, NodeHeat]:
    """Each node's heat judged with the next pod at its workload's observed usage
    (``raised``), except that at most ``left`` nodes are hot only through that raise;
    the others keep their heat judged with the next pod at its requests and limits
    (``plain``, over ``plain_wave``).

    ``left``: how many more pods of the raised kinds' workloads would take a raise
    (``app.load.estimate.raises_left``, "Bounds"). So many pods at most can come at
    that usage; judging every node with one let a tenant's one burner at 60 % of a node
    and one idle pod of its workload taint 14 of 20 cool nodes (issue 42). The hottest
    (by excess over the limit with the raise) keep theirs."""
    only_raised = [
        name
        for name, heat in raised.items()
        if heat.heat is Heat.HOT and plain[name].heat is not Heat.HOT
    ]
    if len(only_raised) <= left:
        return dict(raised)
    ranked = sorted(only_raised, key=lambda name: (-raised[name].excess, name))
    dropped = set(ranked[max(0, left) :])
    return {name: plain[name] if name in dropped else heat for name, heat in raised.items()}


def judge_node(
    annotations: Mapping[str, str],
    policy: Policy,
    now_s: float,
    release_margin: float,
    unsampled: Mapping[str, float] | None = None,
    next_pod: Mapping[str, float] | None = None,
) -> NodeHeat:
    """How hot a node is at ``now_s``, about to take the next pod of the wave: its
    annotations (the usage readings and their timestamps) plus ``unsampled``, the
    extender's estimate of the pods bound since those readings were taken, plus
    ``next_pod``, the estimate of one more pod like those the scheduler is placing.

    ``unsampled`` is what ``app.load.estimate.node_unsampled`` returns, with
    ``partly_sampled`` (module doc), for the pods bound on the node within
    ``estimation.maxAge`` (each a ``PlacedPod``: its requests, its limits, the instant
    it was bound), the node's annotations, its allocatable, the policy and ``now_s``;
    ``next_pod`` what ``next_pod`` returns for
    the pods bound anywhere in the cluster within it. Both are added to fresh readings
    only, so stale or missing data still fails open; None or empty: the readings alone.
    """
    measurement = measure(annotations, policy, now_s)
    return judge_measured(measurement, policy, release_margin, unsampled, next_pod)


def judge_measured(
    measurement: Measurement,
    policy: Policy,
    release_margin: float,
    unsampled: Mapping[str, float] | None = None,
    next_pod: Mapping[str, float] | None = None,
) -> NodeHeat:
    """``judge_node`` of a node measured already (``measure`` of its annotations at the
    instant judged): a caller that keeps the Measurement until its ``changes_at_s``, as
    the simulator does, reads the annotations once, not once per judgement."""
    added = dict(unsampled or {})
    for resource, fraction in (next_pod or {}).items():
        added[resource] = added.get(resource, 0.0) + fraction
    heat = _measured_heat(measurement, policy, release_margin, added)
    if not next_pod or heat.metric is None:
        return heat
    resource = policy.metric_resources.get(heat.metric, "")
    standing = heat.heat is Heat.HOT and (
        _measured_heat(measurement, policy, release_margin, unsampled).heat is Heat.HOT
    )
    return NodeHeat(  # ``replace`` with the next pod's share, without its introspection
        heat.heat,
        heat.excess,
        heat.metric,
        heat.usage_fraction,
        heat.limit_fraction,
        heat.estimated_fraction,
        next_pod.get(resource, 0.0),
        standing,
    )


def _measured_heat(
    measurement: Measurement,
    policy: Policy,
    release_margin: float,
    added: Mapping[str, float] | None,
) -> NodeHeat:
    """``node_heat(assess(measurement, policy, added), ...)``: ``added`` added to the
    limited metrics' fresh readings alone, as ``with_unsampled`` adds it, without
    making the readings or the rest of the NodeLoad (its score, hot value and
    overloads), which the heat does not read."""
    readings, resources = measurement.readings, measurement.resources
    worst: _Worst | None = None
    for metric, limit in policy.limits:
        reading = readings.get(metric)
        if reading is None or not reading.is_fresh or reading.usage_fraction is None:
            continue
        usage, estimated = reading.usage_fraction, reading.unsampled_fraction
        fraction = added.get(resources.get(metric, ""), 0.0) if added else 0.0
        if fraction != 0:
            effective = max(0.0, usage + fraction)
            usage, estimated = effective, effective - usage
        excess = usage - limit
        if worst is None or excess > worst[0]:
            worst = (excess, metric, usage, limit, estimated)
    return _heat_from(worst, release_margin)


def node_heat(load: NodeLoad, policy: Policy, release_margin: float) -> NodeHeat:
    """How hot a node is on its fresh readings of the policy's limited metrics (the
    estimate included, when ``load`` was evaluated with one)."""
    readings = {reading.metric: reading for reading in load.readings}
    worst: _Worst | None = None
    for metric, limit in policy.limits:
        reading = readings.get(metric)
        if reading is None or not reading.is_fresh or reading.usage_fraction is None:
            continue
        excess = reading.usage_fraction - limit
        if worst is None or excess > worst[0]:
            worst = (excess, metric, reading.usage_fraction, limit, reading.unsampled_fraction)
    return _heat_from(worst, release_margin)


# The worst fresh limited reading: its excess, metric, usage, limit and estimated part.
_Worst = tuple[float, str, float, float, float]


def _heat_from(worst: _Worst | None, release_margin: float) -> NodeHeat:
    if worst is None:
        return NodeHeat(Heat.UNKNOWN, -math.inf, None, None, None)
    excess, metric, usage, limit, estimated = worst
    if excess > 0:
        heat = Heat.HOT
    elif excess > -release_margin:
        heat = Heat.WARM
    else:
        heat = Heat.COOL
    return NodeHeat(heat, excess, metric, usage, limit, estimated)


@dataclass(frozen=True, slots=True)
class TaintDecision:
    node: str
    tainted: bool
    reason: str


@dataclass(frozen=True, slots=True)
class SoftTaints:
    """One round's decision: per node, tainted or not and why, and the new memory."""

    decisions: Mapping[str, TaintDecision]
    # Tainted node -> the last instant it was seen above its lower line (warm or hot):
    # what the next round's hold is counted from.
    warm_at_s: Mapping[str, float]

    @property
    def tainted(self) -> frozenset[str]:
        return frozenset(name for name, d in self.decisions.items() if d.tainted)


def decide_soft_taints(
    heats: Mapping[str, NodeHeat],
    warm_at_s: Mapping[str, float],
    now_s: float,
    settings: SoftTaintSettings,
    nodes: int | None = None,
) -> SoftTaints:
    """Which of ``heats``' nodes carry the taint after this round (module doc).

    ``warm_at_s`` is the previous round's memory: the nodes tainted then, each with
    the last instant it was above its lower line. A node that carries the taint with no
    memory of it (a restarted annotator) should be passed with ``now_s``: its hold
    starts again, which only ever keeps a taint longer.

    ``nodes`` is how many nodes the share is of (``len(heats)`` if None). ``heats`` may
    leave out nodes that are neither hot nor in ``warm_at_s``: such a node is never
    tainted, so the result for the others is the same (a large cluster is judged
    without reading every cool node).
    """
    total = len(heats) if nodes is None else nodes
    if total < len(heats):
        raise ValueError(f"{len(heats)} nodes judged, more than the {total} of the cluster")
    wanted: dict[str, tuple[float, str]] = {}  # node -> (rank, reason)
    memory: dict[str, float] = {}
    decisions: dict[str, TaintDecision] = {}
    for name, heat in heats.items():
        was_tainted = name in warm_at_s
        bonus = settings.release_margin if was_tainted else 0.0
        if heat.heat is Heat.HOT:
            wanted[name] = (heat.excess + bonus, f"hot: {heat.describe()}")
            memory[name] = now_s
        elif heat.heat is Heat.WARM and was_tainted:
            wanted[name] = (heat.excess + bonus, f"held above the lower line: {heat.describe()}")
            memory[name] = now_s
        elif heat.heat is Heat.COOL and was_tainted:
            cool_for_s = now_s - warm_at_s[name]
            if cool_for_s < settings.min_hold_s:
                reason = (
                    f"held: cool for {cool_for_s:.0f}s of {settings.min_hold_s:.0f}s "
                    f"({heat.describe()})"
                )
                wanted[name] = (heat.excess + bonus, reason)
                memory[name] = warm_at_s[name]
            else:
                decisions[name] = TaintDecision(
                    name, False, f"cool for {cool_for_s:.0f}s: {heat.describe()}"
                )
        elif heat.heat is Heat.UNKNOWN:
            decisions[name] = TaintDecision(name, False, "no fresh data: fail open")
        else:
            decisions[name] = TaintDecision(name, False, heat.describe())
    hot = sum(1 for heat in heats.values() if heat.hot_now)
    cap = min(settings.cap(total), total - hot)
    ranked = sorted(wanted, key=lambda name: (-wanted[name][0], name))
    for index, name in enumerate(ranked):
        reason = wanted[name][1]
        if index < cap:
            decisions[name] = TaintDecision(name, True, reason)
        else:
            decisions[name] = TaintDecision(
                name, False, f"over the share: {cap} of {total} nodes at most, {hot} hot ({reason})"
            )
            memory.pop(name, None)
    return SoftTaints(decisions, {name: memory[name] for name in ranked[:cap]})

"""Where the extender would let a pod go, node by node, and why: pure.

Each node is judged exactly as the extender judges it: ``app.load.model`` on the node's
annotations, with the extender's estimate of the pods bound since the node's last
sample added (``app.load.estimate``: ``counts`` and ``estimate_with_evidence``, which
the extender's reserve applies one binding at a time). What a bound pod's estimate rests
on is what explain can see of it: a pod already on its node, which is what the extender
too has of every pod it first sees there (``Evidence.PLACED``: its requests x factor,
within the node). A running extender that watched a pod pending and then bound counts
its limit instead, so for such pods explain shows the lower of the two. The pod asked
about is left out of that estimate: the extender judged it before it was bound. What
this cannot see either is the running extender's reservations, kept in its memory for
the few seconds between kube-scheduler choosing a node and the binding reaching the
watch.

Nodes kube-scheduler's own filters remove (a taint not tolerated, a node selector that
does not match, a cordoned node) never reach the extender, nor do the nodes its filter
refuses; they are marked, never preferred and answered no score. The extender's
prioritize answer for the others, the preferred node lifted alone to the top, is
``app.load.prioritize``'s rule, with the pod's estimate judged against each node's room
under its limits, in the order of the node names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from app.load import (
    Evidence,
    MetricReading,
    NodeLoad,
    Overload,
    PlacedPod,
    ScorePart,
    class_annotations,
    counts,
    estimate_scheduled,
    host_priorities,
    is_exempt_from_filter,
    judged_by,
    measure,
    node_verdict,
    pod_class,
    policy_for_pod,
    preferred_position,
    score_parts,
    unsampled_after,
    unsampled_fractions,
)
from app.objects import ZERO, NodeInfo, PodInfo, Resources, ScheduledPod
from app.policy import Policy, pod_classes
from app.rebalance import fit_refusal


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node as the extender sees it for the pod."""

    node: str
    load: NodeLoad
    limits: Mapping[str, float]  # metric → maxLimitPercent of the predicates that set one
    parts: tuple[ScorePart, ...]
    recent_pods: int  # bound pods the estimate counts on the node
    exempt: bool  # a DaemonSet pod: the filter passes every node
    not_offered: str | None  # why kube-scheduler's own filters keep the pod off, if they do
    preferable: bool = False  # may be the preferred node (``wire.can_be_preferred``)
    has_room: bool = True  # the pod's estimate fits under its limits (``wire.has_room``)
    answered: int | None = None  # the prioritize score; None: kube-scheduler does not ask
    # A class's pod: the filter passes the node only where its estimate fits (``has_room``).
    room_filters: bool = False
    # The node is in a node pool: the filter passes any pod only where its estimate fits.
    in_pool: bool = False

    @property
    def refused(self) -> Overload | None:
        """The predicate the extender's filter fails the node on (the first, in policy
        order, as its FailedScheduling reason names), or None when it passes."""
        if self.exempt or not self.load.overloads:
            return None
        return self.load.overloads[0]

    @property
    def short_of_room(self) -> bool:
        """The filter refuses the node on no predicate but its room: the pod's estimate
        does not fit under its class's limits, or its node pool's."""
        if not (self.room_filters or self.in_pool):
            return False
        return not self.has_room and not self.exempt and self.refused is None

    @property
    def passes(self) -> bool:
        return self.refused is None and not self.short_of_room

    @property
    def asked(self) -> bool:
        """kube-scheduler asks the extender's prioritize about this node: it passes
        kube-scheduler's filters and the extender's."""
        return self.passes and self.not_offered is None

    def reading(self, metric: str) -> MetricReading | None:
        return next((r for r in self.load.readings if r.metric == metric), None)


@dataclass(frozen=True, slots=True)
class PodExplanation:
    pod: PodInfo
    verdicts: tuple[NodeVerdict, ...]  # every node, most telling first (``ranked``)
    preferred: str | None  # the node the extender's prioritize would put on top
    tied: tuple[str, ...]  # other nodes with the preferred node's score
    failed_scheduling: str | None  # kube-scheduler's last FailedScheduling message
    # The pod's class of pods (spec.classes), whose limits and weights judge it; None:
    # in no class, or the policy has none (the policy's own).
    pod_class: str | None = None

    @property
    def pending(self) -> bool:
        return self.pod.node_name is None


def placed_pods(
    pods: Iterable[tuple[str, ScheduledPod]], leave_out: str | None, now_s: float
) -> dict[str, list[PlacedPod]]:
    """Per node, the bound pods the estimate reads, as the extender's reserve keeps them:
    unfinished, bound no later than now; ``leave_out`` (a pod key) is not counted."""
    by_node: dict[str, list[PlacedPod]] = {}
    for key, pod in pods:
        if pod.node is None or pod.finished or key == leave_out:
            continue
        # What explain sees of a bound pod is what the extender has of one it first
        # sees on its node: ``Evidence.PLACED`` (module doc).
        placed = PlacedPod(
            pod.requests, pod.limits, min(pod.bound_at_s, now_s), Evidence.PLACED
        )
        by_node.setdefault(pod.node, []).append(placed)
    return by_node


def judge_node(
    node: NodeInfo,
    pod: PodInfo,
    pod_object: Mapping[str, object],
    placed: list[PlacedPod],
    policy: Policy,
    now_s: float,
    observed: Resources | None = None,
    annotations: Mapping[str, str] | None = None,
) -> NodeVerdict:
    """One node's verdict and score for the pod, the extender's way: its table measures
    the annotations, its reserve adds the estimate of the pods the node's freshest sample
    does not hold (``app.load.estimate.unsampled_after``), and ``app.load.node_verdict``
    judges the node for the pod. ``policy`` is the one the pod is judged by (its class's,
    ``app.load.policy_for_pod``), under the node's pool's limits (``Policy.for_node``)
    and beside the higher classes whose pods it runs (``app.load.judged_by``), over
    ``annotations`` (the node's, with the class usages read in:
    ``app.load.class_annotations``; None: the node's own)."""
    in_pool = bool(policy.spec.node_pools) and policy.node_pools.match(node.labels).pool is not None
    policy = policy.for_node(node.labels)
    read = node.annotations if annotations is None else annotations
    measurement = measure(read, policy, now_s)
    policy = judged_by(policy, measurement)  # beside a higher class's pods on the node
    settings = policy.spec.estimation
    sample_at_s = measurement.freshest_sample_s()
    recent = (
        sum(1 for p in placed if counts(p.bound_at_s, sample_at_s, now_s, settings))
        if settings.enabled
        else 0
    )
    allocatable = node.allocatable
    verdict = node_verdict(
        measurement,
        unsampled_after(placed, sample_at_s, allocatable, policy, now_s),
        policy,
        pod_share(pod, allocatable, policy, observed),
    )
    load = verdict.load
    return NodeVerdict(
        node=node.name,
        load=load,
        limits=dict(policy.limits),
        parts=score_parts({r.metric: r for r in load.readings}, policy),
        recent_pods=recent,
        exempt=is_exempt_from_filter(pod_object),
        not_offered=fit_refusal(pod, node),
        preferable=verdict.preferable,
        has_room=verdict.fits,
        in_pool=in_pool,
    )


def pod_share(
    pod: PodInfo, allocatable: Resources, policy: Policy, observed: Resources | None = None
) -> dict[str, float]:
    """The pod's estimate as fractions of a node's allocatable, as the extender judges a
    node's room for it: ``estimate_scheduled`` of its requests and limits, raised to its
    workload's ``observed`` per-pod usage where that applies (nothing while estimation
    is off); a resource whose allocatable is unknown is left out, as the extender then
    takes the node's room in it to be unbounded."""
    settings = policy.spec.estimation
    usage = (
        estimate_scheduled(pod.requests, pod.limits, settings, observed)
        if settings.enabled
        else ZERO
    )
    return unsampled_fractions((usage,), allocatable)


def explain_pod(
    pod: PodInfo,
    pod_object: Mapping[str, object],
    nodes: Mapping[str, NodeInfo],
    pods: Iterable[tuple[str, ScheduledPod]],
    policy: Policy,
    now_s: float,
    failed_scheduling: str | None = None,
    observed: Resources | None = None,
) -> PodExplanation:
    """Every node's verdict and score for ``pod``, and the node the extender prefers.

    ``pod_object`` is the pod as the API server holds it (what kube-scheduler sends the
    extender; only its controller reference is read). The nodes kube-scheduler asks the
    extender to prioritize (``NodeVerdict.asked``), in the order of their names, get
    ``app.load.prioritize``'s answer: the preferred node, if any, alone on top. Where the
    request's order would decide between nodes of the preferred node's score, the others
    are listed in ``tied``. ``observed``: what one pod of its workload is published to
    use (``app.kube.workload_usage``), which its room check is raised to as the
    extender's is."""
    by_node = placed_pods(pods, pod.key, now_s)
    classes = pod_classes(policy)
    name_of_class = pod_class(pod_object, classes)
    judged = policy_for_pod(policy, pod_object)
    def judged_under(under: Policy) -> list[NodeVerdict]:
        return [
            judge_node(
                nodes[name], pod, pod_object, by_node.get(name, []), under, now_s, observed,
                class_annotations(nodes[name].annotations, classes) if classes else None,
            )
            for name in sorted(nodes)
        ]  # fmt: skip

    verdicts = judged_under(judged)
    if name_of_class is not None:  # a class's pod: judged with its estimate added
        verdicts = [replace(v, room_filters=True) for v in verdicts]
        # Where no node passes it, its class's limits on its own usage yield
        # (``PodClasses.yielding``), as the extender answers the filter again.
        yielding = classes.yielding.get(name_of_class)
        if yielding is not None and not any(v.asked for v in verdicts):
            verdicts = [replace(v, room_filters=True) for v in judged_under(yielding)]
    asked = [v for v in verdicts if v.asked]
    scores = [v.load.extender_score for v in asked]
    preferable = [v.preferable for v in asked]
    roomy = [v.has_room for v in asked]
    best = preferred_position(scores, preferable, roomy)
    answered = host_priorities(scores, preferable, roomy)
    answers = dict(zip((v.node for v in asked), answered, strict=True))
    verdicts = [replace(v, answered=answers.get(v.node)) for v in verdicts]
    preferred = asked[best].node if best >= 0 else None
    tied: list[str] = []
    if best >= 0:
        chosen = asked[best]
        tied = [
            v.node
            for v in asked
            if v is not chosen
            and v.preferable
            and v.load.extender_score == chosen.load.extender_score
            and (v.has_room or not chosen.has_room)
        ]
    return PodExplanation(
        pod=pod,
        verdicts=tuple(ranked(verdicts, preferred, pod.node_name)),
        preferred=preferred,
        tied=tuple(tied),
        failed_scheduling=failed_scheduling,
        pod_class=name_of_class,
    )


def ranked(
    verdicts: Iterable[NodeVerdict], preferred: str | None, bound_to: str | None
) -> list[NodeVerdict]:
    """Most telling first: where the pod runs, the preferred node, the nodes the load
    filter refuses (hottest first), then the others from the best score down."""

    def rank(verdict: NodeVerdict) -> tuple[int, float, str]:
        if verdict.node == bound_to:
            return (0, 0.0, verdict.node)
        if verdict.node == preferred:
            return (1, 0.0, verdict.node)
        refused = verdict.refused
        if refused is not None:
            return (2, -(refused.usage_fraction - refused.limit_fraction), verdict.node)
        return (3 if verdict.not_offered is None else 4, -verdict.load.score, verdict.node)

    return sorted(verdicts, key=rank)

"""Burst-aware estimation: the usage of pods that a node's samples do not contain yet.

A node's usage annotations lag placement by minutes (recording-rule windows plus the
annotator period). Pods placed on a node *after* its freshest sample are therefore
missing from it, and in a burst every pod would see the same node as coolest. Their
usage is estimated (koordinator's rule, README "Burst-aware estimation") and handed
to ``evaluate_node`` as ``unsampled``, which adds it to every fresh reading of the
matching resource. Stale or missing data is never changed, so the filter still fails
open.

The API, all pure (the extender keeps per-node reserves, the simulator calls these):

* ``estimate_pod_usage(requests, limits, settings) -> Resources``: per resource
  ``max(request, limit) x factor`` (cpu 0.85, memory 0.70 by default); a pod that
  declares neither for a resource (both 0) is assumed to use ``defaultPodUsage``.
* ``within_node(usage, allocatable) -> Resources``: one pod's estimate, each resource
  at most its node's allocatable. A pod cannot use more than its node has, and its
  limit is the tenant's word, not a measurement (issue 28, attack 1): without this, a
  pod declaring a 100,000-CPU limit would take its node out of scheduling for
  ``maxAge``. A resource whose allocatable is unknown (0) is not added at all.
* ``Evidence`` and ``estimate_with_evidence``: what a pod's estimate may rest on. A
  pod this extender scored (``SCORED``) or one the extender saw bound by a binder
  (``BOUND``: the pod was watched pending, then bound, which takes ``pods/binding``,
  a right tenants do not have) is estimated from its limit as above. A pod first
  seen already on its node (``PLACED``: created with ``spec.nodeName``, around the
  scheduler and its filter, or listed after a restart) is estimated from its
  requests alone: the kubelet admits a pod only if its requests fit the node, and
  quota charges them, while nothing checks a limit (docs/security.md). Requests
  beyond the node's allocatable (the API server defaults a missing request to the
  limit: a 1 PiB memory limit is a 1 PiB request) count nothing: the kubelet refuses
  such a pod, and it never runs there.
* ``workload_per_pod_usage(pods) -> Resources | None``, ``with_workload_usage`` and
  ``estimate_scheduled`` (the estimate of a pod placed through the scheduler):
  what one pod of a workload is *observed* to use, and the estimate raised to it.
  ``max(request, limit) x factor`` is a guess from what the tenant declares; a
  workload that requests 100m and uses 0.7 core is estimated at 85m, and a wave of
  its pods piles onto the coolest node (issue 27). So a pod bound through the
  scheduler (``SCORED``, ``BOUND``) whose workload has running pods is estimated per
  resource at ``max(estimate, observed)``: the observed value is the 90th percentile
  (nearest rank) of the workload's running pods' usage, at most the pod's limit where
  it declares one, and counts only where it is at least ``UNDER_REQUESTED_FACTOR``
  (3) times the estimate. A smaller gap is within the factors' guess and misplaces
  nothing: on ``mixed-waves`` (memsvc's CPU 2x its estimate, cpusvc's memory 2.3x),
  raising it there traded memory node-minutes above the limit for CPU ones, seeds 1-5
  over 8 tie-break draws each (docs/simulate-results.md). With the default factors a
  limit caps the observed value below 3 times its estimate, so in effect only a
  resource the pod declares no limit for is raised. It only ever changes a pod's own
  estimate (raised here, lowered below: "Lowered to what is measured"), and only by
  what its own workload's pods (in its own namespace) use, so a tenant can make only
  its own pods look heavier or lighter, never another tenant's
  (docs/security.md); the result is at most the node's allocatable as every
  estimate. A pod ``PLACED`` around the scheduler keeps its requests-only estimate.
  Missing, non-finite or negative values observe nothing.
* **Bounds** on that raise (issue 42, ``bounded_raises``, ``started_in_grace``): a
  workload's usage is what its *measured* pods use, and pods never started are never
  measured. A tenant running one pod at 7.5 cores could otherwise publish 7.5 cores as
  its workload's usage, then bind pods of the same workload key that request 1m and
  never start: each counted as most of a node for ``maxAge``, and a few made every
  node read too hot for anyone's pod. So a workload's usage raises nothing until at
  least ``MIN_MEASURED_PODS`` (3) of its running pods were measured; in binding order,
  a pod takes a raise only while fewer of its workload's pods hold one than were
  measured (the annotator publishes the count), so the raises at once add no more
  pods' worth than the tenant really runs; and a pod whose containers have not started
  within ``START_GRACE_S`` (2 minutes) of its binding loses its raise for good. A raise
  ends at ``maxAge``, or at the end of the grace for a pod not started by then. A pod
  without a raise is estimated from its requests and limits, as without the feature.
* **Lowered to what is measured** (issue 43, ``lowering``): the other way round, a pod
  placed through the scheduler whose workload was measured on at least
  ``MIN_MEASURED_PODS`` running pods is estimated at no more CPU than one of them uses
  (the same 90th percentile). Memory keeps the guess: a pod's working set grows after
  its start, and lowering it too put ``mixed-waves`` (seeds 1-10, weight 2) past crane's
  memory node-minutes above the limits (median 458 against 445). ``max(request, limit) x
  factor`` is a guess for a pod nobody has measured; a workload whose pods use a third
  of their requests is estimated at 2-5 times its use, and at a step rise (a morning
  scale-up) the estimate of the pods just bound made nodes with room by requests, and by
  real use, fail the filter: the pods waited for the next samples (~5 minutes), and a
  node autoscaler, which counts requests, added no node for them (``diurnal-trough``
  seed 1 at weight 8: 75 of ``loadaware+autoscaler``'s 186 pending pod-minutes, where
  ``default+autoscaler`` had 81 in all). The lowering takes no bound on how many pods
  hold it: it makes a tenant's pods look no lighter than its own measured pods, and at
  most lets them be placed as kube-scheduler places them by requests alone. A pod
  ``PLACED`` around the scheduler keeps its requests-only estimate, a raise (above) wins
  over it, and the pod in hand (the extender's room check) is not lowered. Only a
  positive, finite value lowers (0 is what ``workload_per_pod_usage`` gives a resource
  it observed nothing of).
* ``counts(bound_at_s, sample_at_s, now_s, settings) -> bool``: whether a pod bound
  at ``bound_at_s`` is missing from a sample taken at ``sample_at_s``. A sample
  *covers* a pod only when it was taken at least ``coveredAfter`` (5 minutes) after
  the binding: the usage metrics are 5-minute averages, so a sample taken sooner
  averages in the minutes before the pod ran, and a pod just bound is still starting
  (koordinator likewise keeps estimating for a set time after scheduling). Until a
  sample covers it, and for at most ``maxAge``, a pod counts. Equal times therefore
  count: a sample stamped in the binding's second (both have 1-second resolution in
  production) cannot hold the pod. ``sample_at_s`` None (no fresh sample) counts
  nothing: the load model ignores such a node's data anyway.
* ``unsampled_share(bound_at_s, sample_at_s, settings) -> float``: of a pod that
  ``counts``, the share of it its node's sample does not show yet, ``1 - t/W`` for a
  sample taken ``t`` seconds after the binding (``W``: ``coveredAfter``, the window the
  usage is averaged over), between 0 and 1. A ``W``-second average taken ``t`` seconds
  after a pod started running holds about ``t/W`` of it already. Counting the pod whole
  on top of that counts the sampled part twice: the safe side for the extender's
  filter, which judges the pod in hand against a limit (a pod kept off a node a few
  minutes too long misplaces nothing), so it counts pods whole. The soft-taint rule
  instead ranks nodes against each other for a bounded number of taints, and there
  the double count misorders them: on cpu-heavy, nodes of 5 pods of 1.5 CPU with
  fresh pods read as hot as nodes of 6 whose pods were sampled, kept the taints, and
  a node of 6 took a 7th pod (65.6 % > 65 %) on 6 of seeds 1-20. So the rule asks for
  the rest only (``node_unsampled``' ``partly_sampled``).
* ``unsampled_fractions(usages, allocatable) -> {"cpu": f, "memory": f}``: the sum of
  estimated usages as fractions of the node's allocatable. A resource whose
  allocatable is unknown (0) is left out: nothing is added rather than a guess.
* ``freshest_sample_s(annotations, policy, now_s) -> float | None``: the timestamp
  of a node's freshest fresh usage sample.
* ``node_unsampled(pods, annotations, allocatable, policy, now_s, partly_sampled)``:
  all of the above for one node's ``PlacedPod``s (each on its evidence, within the
  node), returning what ``evaluate_node`` takes as ``unsampled``: each pod that counts
  whole, or with ``partly_sampled`` (the soft-taint rule) its ``unsampled_share``. A
  ``PlacedPod`` is ``BOUND`` unless it says otherwise (the simulator's pods all pass a
  scheduler; the annotator says ``PLACED`` for a pod it first saw on its node).

Worked example (the README's): a pod with request 200m and limit 3 CPU on an 8-CPU
node is estimated at 3 x 0.85 = 2.55 cores, 2.55 / 8 = 0.32 of the node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from app.load.model import measure
from app.objects import CPU, MEMORY, ZERO, Resources
from app.policy import EstimationPolicy, Policy, class_unsampled_key

__all__ = [
    "MIN_MEASURED_PODS",
    "START_GRACE_S",
    "UNDER_REQUESTED_FACTOR",
    "WORKLOAD_USAGE_PERCENTILE",
    "Evidence",
    "PlacedPod",
    "bounded_raises",
    "class_fractions",
    "counts",
    "estimate_pod_usage",
    "estimate_scheduled",
    "estimate_with_evidence",
    "holds_raise",
    "lowering",
    "may_rise",
    "nearest_rank_index",
    "node_unsampled",
    "raise_end_s",
    "raises",
    "raises_left",
    "started_in_grace",
    "unsampled_after",
    "unsampled_fractions",
    "unsampled_share",
    "with_workload_usage",
    "within_node",
    "workload_per_pod_usage",
]


class Evidence(StrEnum):
    """What says a pod was placed through the scheduler (module doc)."""

    SCORED = "scored"  # this extender reserved it, and the binding followed
    BOUND = "bound"  # watched pending, then bound: a binder placed it
    PLACED = "placed"  # first seen on its node: perhaps placed around the scheduler


@dataclass(frozen=True, slots=True)
class PlacedPod:
    """A pod as the estimate sees it: what it declares, when it was bound, and what
    says it went through a scheduler (``Evidence``)."""

    requests: Resources
    limits: Resources
    bound_at_s: float
    evidence: Evidence = Evidence.BOUND
    # What one running pod of its workload is observed to use (``workload_per_pod_usage``);
    # None: nothing observed (or ``estimation.workloadUsage`` off, or no raise left for
    # it: ``bounded_raises``).
    observed: Resources | None = None
    # When its containers were first seen started; None: not yet. The default, long
    # ago, is a pod that started as it was bound (the simulator's).
    started_at_s: float | None = -math.inf
    # Its class of pods (``app/policy/classes.py``): its estimate counts in its class's
    # usage too (``class_unsampled_key``); None: no class, or a policy without them.
    pod_class: str | None = None


# The percentage of a workload's running pods whose usage is at or below what one of its
# pods is taken to use (nearest rank): conservative without following a single outlier.
WORKLOAD_USAGE_PERCENTILE = 90
# Observed usage counts for a resource only when at least this many times the estimate:
# a workload under-requested by a wide margin piles a wave onto one node; a smaller gap
# is within what the estimate's factors guess, and raising it there only trades one
# resource's node-minutes above its limit for the other's (module doc).
UNDER_REQUESTED_FACTOR = 3.0
# The bounds on the raise (module doc, "Bounds"; issue 42): a workload's usage counts
# once at least this many of its running pods were measured, no more of its pods hold a
# raise at once than were measured, and a pod whose containers have not started within
# this long of its binding loses its raise for good.
MIN_MEASURED_PODS = 3
START_GRACE_S = 120.0


def estimate_pod_usage(
    requests: Resources, limits: Resources, settings: EstimationPolicy
) -> Resources:
    """``max(request, limit) x factor`` per resource, or the default when both are 0."""
    default = settings.default_pod_usage
    cpu = max(requests.cpu_cores, limits.cpu_cores)
    memory = max(requests.memory_bytes, limits.memory_bytes)
    return Resources(
        cpu * settings.factors.cpu if cpu > 0 else default.cpu_cores,
        memory * settings.factors.memory if memory > 0 else default.memory_bytes,
    )


def workload_per_pod_usage(pods: Iterable[Resources]) -> Resources | None:
    """What one pod of a workload uses, from its running pods' usage (module doc): per
    resource the ``WORKLOAD_USAGE_PERCENTILE`` by nearest rank, over the finite,
    non-negative values; None when no pod has any."""
    cpu: list[float] = []
    memory: list[float] = []
    for pod in pods:
        if math.isfinite(pod.cpu_cores) and pod.cpu_cores >= 0:
            cpu.append(pod.cpu_cores)
        if math.isfinite(pod.memory_bytes) and pod.memory_bytes >= 0:
            memory.append(pod.memory_bytes)
    if not cpu and not memory:
        return None
    return Resources(_nearest_rank(cpu), _nearest_rank(memory))


def _nearest_rank(values: list[float]) -> float:
    if not values:
        return 0.0
    values.sort()
    return values[nearest_rank_index(len(values))]


def nearest_rank_index(count: int) -> int:
    """The index, in ``count`` values sorted ascending, of their
    ``WORKLOAD_USAGE_PERCENTILE`` by nearest rank (in integers: no rounding)."""
    return max(0, -(-WORKLOAD_USAGE_PERCENTILE * count // 100) - 1)


def with_workload_usage(
    estimate: Resources, observed: Resources | None, limits: Resources
) -> Resources:
    """The estimate raised per resource to the workload's observed per-pod usage where
    that is at least ``UNDER_REQUESTED_FACTOR`` times it, at most the pod's limit where
    it declares one (module doc); never lowered."""
    if observed is None:
        return estimate
    cpu = _raised(estimate.cpu_cores, observed.cpu_cores, limits.cpu_cores)
    memory = _raised(estimate.memory_bytes, observed.memory_bytes, limits.memory_bytes)
    if cpu == estimate.cpu_cores and memory == estimate.memory_bytes:
        return estimate
    return Resources(cpu, memory)


def _raised(estimate: float, observed: float, limit: float) -> float:
    if not math.isfinite(observed) or observed <= 0:
        return estimate
    if limit > 0:
        observed = min(observed, limit)
    return observed if observed >= UNDER_REQUESTED_FACTOR * estimate else estimate


def lowering(
    requests: Resources,
    limits: Resources,
    observed: Resources | None,
    settings: EstimationPolicy,
) -> Resources | None:
    """What lowers the estimate of a pod declaring ``requests`` and ``limits`` to its
    workload's ``observed`` per-pod usage (module doc, "Lowered to what is measured"):
    its CPU where observed below ``estimate_pod_usage``'s, with the estimate's memory,
    so that ``estimate_scheduled`` with it never raises; None where it lowers nothing
    (or ``workloadUsage`` is off, or nothing was observed)."""
    if observed is None or not settings.workload_usage:
        return None
    estimate = estimate_pod_usage(requests, limits, settings)
    cpu = _lowered(estimate.cpu_cores, observed.cpu_cores)
    if cpu == estimate.cpu_cores:
        return None
    return Resources(cpu, estimate.memory_bytes)  # memory: module doc


def _lowered(estimate: float, observed: float) -> float:
    if not math.isfinite(observed) or observed <= 0:  # 0: nothing observed of it
        return estimate
    return min(estimate, observed)


def raises(
    requests: Resources,
    limits: Resources,
    observed: Resources | None,
    settings: EstimationPolicy,
) -> bool:
    """Whether ``observed`` raises the estimate of a pod declaring ``requests`` and
    ``limits`` (``with_workload_usage`` changes it): only such a pod takes one of its
    workload's raises (``bounded_raises``)."""
    if observed is None or not settings.workload_usage:
        return False
    estimate = estimate_pod_usage(requests, limits, settings)
    return with_workload_usage(estimate, observed, limits) != estimate


def holds_raise(pod: PlacedPod, settings: EstimationPolicy) -> bool:
    """Whether ``pod``, as ``bounded_raises`` returned it, holds one of its workload's
    raises (a pod it left lowered only holds none)."""
    return raises(pod.requests, pod.limits, pod.observed, settings)


def started_in_grace(bound_at_s: float, started_at_s: float | None, now_s: float) -> bool:
    """Whether a pod bound at ``bound_at_s`` may hold a raise at ``now_s``: its
    containers started within ``START_GRACE_S`` of the binding, or that time is not
    over yet. A pod that never starts (an init container that sleeps, an image that
    does not exist) is never measured, so nothing it does could pull its workload's
    usage down: its raise ends with the grace."""
    grace_end_s = bound_at_s + START_GRACE_S
    if started_at_s is not None and started_at_s < grace_end_s:
        return True
    return now_s < grace_end_s


def bounded_raises(
    pods: Sequence[tuple[str | None, PlacedPod]],
    measured: Mapping[str, int],
    now_s: float,
    settings: EstimationPolicy,
) -> list[PlacedPod]:
    """Each ``(workload, pod)`` of ``pods`` (pods bound within ``maxAge``, each with its
    workload's ``observed`` usage) as the estimate may take it: with its ``observed``
    kept where it holds one of the workload's raises (``holds_raise``); where not, only
    what of it lowers the estimate (``lowering``: a workload measured on at least
    ``MIN_MEASURED_PODS`` pods, a pod placed through the scheduler), else None
    (module doc, "Bounds" and "Lowered to what is measured").

    ``measured``: per workload, how many of its running pods its published usage
    was measured on. In binding order, a pod whose ``observed`` raises it takes a raise
    when, at its binding, fewer than ``measured`` of its workload's pods hold one;
    a holder lets go at ``maxAge``, or at the end of its grace if its containers had
    not started by then (``started_in_grace``), and a pod that lost its raise does not
    get it back. A workload measured on fewer than ``MIN_MEASURED_PODS`` raises none."""
    order = sorted(range(len(pods)), key=lambda i: pods[i][1].bound_at_s)
    out = [pod for _, pod in pods]
    holders: dict[str, list[float]] = {}  # workload -> the instants its raises end
    for index in order:
        workload, pod = pods[index]
        if pod.observed is None:
            continue
        cap = measured.get(workload, 0) if workload is not None else 0
        granted = (
            cap >= MIN_MEASURED_PODS
            and pod.evidence is not Evidence.PLACED
            and raises(pod.requests, pod.limits, pod.observed, settings)
        )
        if granted and workload is not None:
            at_s = pod.bound_at_s
            ends = [end_s for end_s in holders.get(workload, ()) if end_s > at_s]
            granted = len(ends) < cap and started_in_grace(at_s, pod.started_at_s, now_s)
            if granted:
                ends.append(raise_end_s(pod, settings))
            holders[workload] = ends
        if not granted:
            lowered = (
                lowering(pod.requests, pod.limits, pod.observed, settings)
                if cap >= MIN_MEASURED_PODS and pod.evidence is not Evidence.PLACED
                else None
            )
            out[index] = replace(pod, observed=lowered)
    return out


def raises_left(
    bounded: Sequence[tuple[str | None, PlacedPod]],
    measured: Mapping[str, int],
    now_s: float,
    settings: EstimationPolicy,
) -> dict[str, int]:
    """Per workload with a raise held in ``bounded`` (what ``bounded_raises`` returned,
    each with its workload), how many more of its pods placed at ``now_s`` would take
    one: the soft-taint rule's next pod is such a pod (``app.load.taints``)."""
    held: dict[str, int] = {}
    for workload, pod in bounded:
        if (
            workload is not None
            and holds_raise(pod, settings)
            and raise_end_s(pod, settings) > now_s
        ):
            held[workload] = held.get(workload, 0) + 1
    return {workload: max(0, measured.get(workload, 0) - count) for workload, count in held.items()}


def raise_end_s(pod: PlacedPod, settings: EstimationPolicy) -> float:
    """When a pod's raise ends: at ``maxAge``, or at the end of its grace unless its
    containers started within it (a pod not started yet holds it until then)."""
    grace_end_s = pod.bound_at_s + START_GRACE_S
    started = pod.started_at_s
    if started is not None and started < grace_end_s:
        return pod.bound_at_s + settings.max_age_s
    return min(grace_end_s, pod.bound_at_s + settings.max_age_s)


def may_rise(requests: Resources, limits: Resources, settings: EstimationPolicy) -> bool:
    """Whether any observed usage could raise this pod's estimate (``with_workload_usage``):
    a resource without a limit, or factors so low that 3 times the estimate stays below
    the limit. With the defaults, a pod that declares both limits never rises, and its
    workload need not be looked up."""
    if not settings.workload_usage:
        return False
    for request, limit, factor in (
        (requests.cpu_cores, limits.cpu_cores, settings.factors.cpu),
        (requests.memory_bytes, limits.memory_bytes, settings.factors.memory),
    ):
        if limit <= 0 or UNDER_REQUESTED_FACTOR * max(request, limit) * factor <= limit:
            return True
    return False


def estimate_scheduled(
    requests: Resources,
    limits: Resources,
    settings: EstimationPolicy,
    observed: Resources | None = None,
) -> Resources:
    """The estimate of a pod placed through the scheduler: ``estimate_pod_usage``, raised
    to its workload's ``observed`` per-pod usage when ``workloadUsage`` is on, and per
    resource no higher than that usage (``lowered_to``; a caller passes ``observed``
    only where the bounds allow: ``bounded_raises``, ``lowering``)."""
    estimate = estimate_pod_usage(requests, limits, settings)
    if not settings.workload_usage or observed is None:
        return estimate
    return lowered_to(with_workload_usage(estimate, observed, limits), observed)


def lowered_to(estimate: Resources, observed: Resources) -> Resources:
    """The estimate's CPU at most ``observed``'s where that is positive and finite
    (module doc, "Lowered to what is measured"; memory is never lowered); a raised
    resource is at most its observed value already."""
    cpu = _lowered(estimate.cpu_cores, observed.cpu_cores)
    if cpu == estimate.cpu_cores:
        return estimate
    return Resources(cpu, estimate.memory_bytes)  # memory is never lowered (module doc)


def within_node(usage: Resources, allocatable: Resources) -> Resources:
    """One pod's estimate, each resource at most the node's allocatable (module doc)."""
    cpu, memory = allocatable.cpu_cores, allocatable.memory_bytes
    if usage.cpu_cores <= cpu and usage.memory_bytes <= memory:
        return usage
    return Resources(min(usage.cpu_cores, cpu), min(usage.memory_bytes, memory))


def estimate_with_evidence(
    requests: Resources,
    limits: Resources,
    evidence: Evidence,
    settings: EstimationPolicy,
    allocatable: Resources,
    observed: Resources | None = None,
) -> Resources:
    """``estimate_pod_usage`` on what the evidence allows, within the node (module doc):
    a pod placed through the scheduler at least at its workload's ``observed`` per-pod
    usage (with ``workloadUsage`` on); a pod placed around the scheduler from its
    requests alone, and not at all when they exceed the node (the kubelet will refuse
    it: it never runs there)."""
    if evidence is not Evidence.PLACED:
        return within_node(estimate_scheduled(requests, limits, settings, observed), allocatable)
    if not _fits(requests, allocatable):
        return ZERO
    return within_node(estimate_pod_usage(requests, ZERO, settings), allocatable)


def _fits(requests: Resources, allocatable: Resources) -> bool:
    """Whether the node could ever admit these requests (unknown allocatable: yes)."""
    cpu, memory = allocatable.cpu_cores, allocatable.memory_bytes
    return (cpu <= 0 or requests.cpu_cores <= cpu) and (
        memory <= 0 or requests.memory_bytes <= memory
    )


def counts(
    bound_at_s: float, sample_at_s: float | None, now_s: float, settings: EstimationPolicy
) -> bool:
    """Whether a pod bound at ``bound_at_s`` is missing from the node's sample (module
    doc): within ``maxAge`` of its binding, and no sample taken ``coveredAfter`` later."""
    if sample_at_s is None or now_s >= bound_at_s + settings.max_age_s:
        return False
    return sample_at_s - bound_at_s < settings.covered_after_s


def unsampled_share(
    bound_at_s: float, sample_at_s: float | None, settings: EstimationPolicy
) -> float:
    """Of a pod bound at ``bound_at_s``, the share a sample taken at ``sample_at_s`` does
    not show (module doc): ``1 - t/coveredAfter`` for ``t`` seconds between them, within
    [0, 1]; a sample taken before the binding (or none) shows none of it."""
    if sample_at_s is None or sample_at_s <= bound_at_s:
        return 1.0
    return max(0.0, 1.0 - (sample_at_s - bound_at_s) / settings.covered_after_s)


def unsampled_fractions(usages: Iterable[Resources], allocatable: Resources) -> dict[str, float]:
    """Summed usages as fractions of allocatable, per resource with a known allocatable."""
    total = sum(usages, Resources())
    fractions: dict[str, float] = {}
    for resource in (CPU, MEMORY):
        capacity = allocatable.get(resource)
        amount = total.get(resource)
        if capacity > 0 and amount > 0:
            fractions[resource] = amount / capacity
    return fractions


def freshest_sample_s(annotations: Mapping[str, str], policy: Policy, now_s: float) -> float | None:
    """The newest timestamp among the node's fresh usage readings; None if none is fresh."""
    return measure(annotations, policy, now_s).freshest_sample_s()


def node_unsampled(
    pods: Iterable[PlacedPod],
    annotations: Mapping[str, str],
    allocatable: Resources,
    policy: Policy,
    now_s: float,
    partly_sampled: bool = False,
) -> dict[str, float]:
    """What ``evaluate_node`` takes as ``unsampled`` for a node with these pods bound:
    each pod that ``counts`` whole (the extender), or with ``partly_sampled`` only the
    share of it the node's freshest sample does not show (``unsampled_share``: the
    soft-taint rule, module doc)."""
    if not policy.spec.estimation.enabled:
        return {}
    sample_at_s = freshest_sample_s(annotations, policy, now_s)
    return unsampled_after(pods, sample_at_s, allocatable, policy, now_s, partly_sampled)


def unsampled_after(
    pods: Iterable[PlacedPod],
    sample_at_s: float | None,
    allocatable: Resources,
    policy: Policy,
    now_s: float,
    partly_sampled: bool = False,
    estimates: Sequence[Resources] | None = None,
) -> dict[str, float]:
    """``node_unsampled`` for a node measured already: ``sample_at_s`` is its
    ``Measurement.freshest_sample_s()`` (a caller that keeps the Measurement, as the
    simulator's load filter does, need not read the annotations twice).

    ``estimates``, where given, is each pod's ``estimate_with_evidence`` on this node
    with this policy's settings, in the order of ``pods``: a caller that keeps them
    (the simulator: a pod's estimate outlives every sample of its node) need not make
    them again for every sample."""
    settings = policy.spec.estimation
    if not settings.enabled or sample_at_s is None:  # None: no pod ``counts``
        return {}
    # The usages summed as floats in the same order as ``unsampled_fractions`` sums
    # them (a Resources at a time made two objects a pod: a node of a burst has tens).
    cpu_cores = memory_bytes = 0.0
    by_class: dict[str, Resources] | None = None
    for index, pod in enumerate(pods):
        if not counts(pod.bound_at_s, sample_at_s, now_s, settings):
            continue
        usage = (
            estimates[index]
            if estimates is not None
            else estimate_with_evidence(
                pod.requests, pod.limits, pod.evidence, settings, allocatable, pod.observed
            )
        )
        share = 1.0
        if partly_sampled:
            share = unsampled_share(pod.bound_at_s, sample_at_s, settings)
            cpu_cores += usage.cpu_cores * share
            memory_bytes += usage.memory_bytes * share
        else:
            cpu_cores += usage.cpu_cores
            memory_bytes += usage.memory_bytes
        if pod.pod_class is not None:  # its class's usage too (``class_fractions``)
            by_class = {} if by_class is None else by_class
            shared = Resources(usage.cpu_cores * share, usage.memory_bytes * share)
            by_class[pod.pod_class] = by_class.get(pod.pod_class, ZERO) + shared
    fractions = unsampled_fractions((Resources(cpu_cores, memory_bytes),), allocatable)
    if by_class:
        fractions.update(class_fractions(by_class, allocatable))
    return fractions


def class_fractions(by_class: Mapping[str, Resources], allocatable: Resources) -> dict[str, float]:
    """Each class's summed usage as ``unsampled`` fractions under its class keys
    (``class_unsampled_key``): what its pods placed since the sample add to its usage."""
    fractions: dict[str, float] = {}
    for name, usage in by_class.items():
        for resource, fraction in unsampled_fractions((usage,), allocatable).items():
            fractions[class_unsampled_key(name, resource)] = fraction
    return fractions

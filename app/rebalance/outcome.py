"""What the planner returns: node classes, the evictions in order, and what it skipped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from app.objects import EvictionRecord, PodInfo, Resources, workload_of
from app.rebalance.config import ReplacementScheduler

__all__ = [
    "STOPPED_HELPING",
    "EvictionPlan",
    "HeldHot",
    "NodeClass",
    "NodeKind",
    "PlannedEviction",
    "SkipCode",
    "SkippedPod",
]


class NodeKind(StrEnum):
    SOURCE = "source"  # hot long enough: pods are evicted from it
    DEBOUNCING = "debouncing"  # hot, but not for enough consecutive rounds yet
    # scheduler: soft-taints: hot long enough, but without loadaware's soft taint, so
    # kube-scheduler would not steer its pods' replacements away: nothing leaves it
    UNTAINTED = "untainted"
    DESTINATION = "destination"  # underutilized: may receive evicted pods
    NEUTRAL = "neutral"  # in between, or excluded from receiving (unschedulable, not Ready)
    NO_DATA = "no-data"  # a metric is stale or missing: never a source nor a destination
    EXCLUDED = "excluded"  # not selected by nodeSelector


@dataclass(frozen=True, slots=True)
class NodeClass:
    node: str
    kind: NodeKind
    usage_fraction: Mapping[str, float]  # per resource, convergence adjustments included
    high_fraction: Mapping[str, float]  # targetThresholds (after deviation) per resource
    low_fraction: Mapping[str, float]  # thresholds (after deviation) per resource
    hot: bool  # above targetThresholds this round (what debounce counts)
    hot_rounds: int = 0  # consecutive rounds seen hot, this one included
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PlannedEviction:
    pod: PodInfo
    source: str
    destination: str
    usage: Resources
    usage_from: str  # "prometheus" | "estimate"
    metric_values: Mapping[str, float]  # "<metric> before" / "<metric> after" on the source
    reason: str
    destination_ceiling: Mapping[str, float] = field(default_factory=dict)  # see Room
    drain: bool = False  # consolidation empties its source (no hot spot to cool)

    def record(self, evicted_at_s: float) -> EvictionRecord:
        """What the descheduler remembers of this eviction once it is made."""
        return EvictionRecord(
            pod_key=self.pod.key,
            uid=self.pod.uid,
            node=self.source,
            destination=self.destination,
            usage=self.usage,
            evicted_at_s=evicted_at_s,
            workload=workload_of(self.pod),
        )


class SkipCode(StrEnum):
    """Why a pod was not evicted, as a fixed set (a metric label): the free-text reason
    beside it names namespaces, workloads and budgets, which a label must not."""

    PROTECTED = "protected"  # DaemonSet, bare, critical, local storage, too young, ...
    # cluster-autoscaler's safe-to-evict "false", Karpenter's do-not-disrupt "true" (pod
    # or node): what keeps an autoscaler off a pod keeps the descheduler off it too
    OPTED_OUT = "opted_out"
    EVICTION_LIMIT = "eviction_limit"  # maxNoOfPodsToEvict{Total,PerNode,PerNamespace}
    COOLDOWN = "cooldown"  # workloadCooldown; a replacement within returnCooldown
    WORKLOAD_LIMIT = "workload_limit"  # maxMigratingPerWorkload in this run
    WORKLOAD_UNAVAILABLE = "workload_unavailable"  # maxUnavailablePerWorkload
    LAST_REPLICA = "last_replica"
    PDB = "pdb"  # a PodDisruptionBudget allows no more disruptions
    NOTHING_TO_MOVE = "nothing_to_move"  # uses none of the resource the node is hot on
    OTHER_RESOURCE = "other_resource"  # mostly a resource its node is not hot on
    GAIN_TOO_SMALL = "gain_too_small"  # leaves the source hot and gains under minimumGain
    # at or within its requests, on a node whose excess pods above theirs explain: it
    # is not moved to make room for them (HeldHot)
    WITHIN_REQUESTS = "within_requests"
    NO_DESTINATION = "no_destination"
    # scheduler: requests | soft-taints: kube-scheduler would put the replacement back
    BACK_ON_SOURCE = "back_on_source"
    # scheduler: soft-taints: among the nodes kube-scheduler would choose from, those
    # the replacement would make hot outweigh what its eviction takes off the source
    HOT_LANDING = "hot_landing"
    # scheduler: requests: a node kube-scheduler would choose cannot be shown to stay
    # under targetThresholds with every pod there at its limit (app/rebalance/bound.py)
    UNPROVEN_LANDING = "unproven_landing"
    # scheduler: soft-taints: a wave of pods still arriving whose next pod no node
    # kube-scheduler may choose takes cool: the run stands down (app/rebalance/arrivals.py)
    WAVE_AHEAD = "wave_ahead"
    ALREADY_EVICTED = "already_evicted"
    RECHECK = "recheck"  # the live re-check before the call refused it
    # its node's or its workload's recent evictions did not help (app/rebalance/backoff.py)
    BACKED_OFF = "backed_off"


# The plan's note when every source is backed off: the descheduler logs it once.
STOPPED_HELPING = (
    "every hot node is backed off: recent evictions from each did not help "
    "(docs/troubleshooting.md, is the descheduler helping?)"
)


@dataclass(frozen=True, slots=True)
class SkippedPod:
    pod_key: str
    node: str
    reason: str
    code: SkipCode


@dataclass(frozen=True, slots=True)
class HeldHot:
    """A source left hot by pods using more than they request that stay on it (they
    cannot be evicted: protected, opted out, the last Ready replica, a PDB, ...; or no
    destination takes them): the planner does not move its pods within their requests
    to make room for them, and reports it."""

    node: str
    held: Mapping[str, float]  # per resource, the share of the node those pods use over
    # their requests (capped at what is left of the excess)
    pods: tuple[tuple[str, str, float], ...]  # (pod key, resource, amount over its request)
    reason: str


@dataclass
class EvictionPlan:
    # The scheduler the plan assumes places the replacements (config ``scheduler``).
    scheduler: ReplacementScheduler = "extender"
    node_classes: dict[str, NodeClass] = field(default_factory=dict)
    evictions: list[PlannedEviction] = field(default_factory=list)  # in execution order
    skipped: list[SkippedPod] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    held_hot: dict[str, HeldHot] = field(default_factory=dict)  # by node

"""What the descheduler's planner makes of one node: pure.

The whole plan is made, as the descheduler makes it (``app.rebalance.plan.plan`` over
every node and pod, the debounce rounds and recent evictions from its memory), and
then read for the one node: its class and why, the pods it would move off it and
where, the pods it would skip with their codes, and the pods it would send to it.

With ``consolidation.enabled``, the consolidation plan too, made as the descheduler
makes it (the drains in progress read from the nodes' drain taints): whether the node
would be drained and why, or why not, where each of its pods would go and which must
wait for a later run, or which pods a drain would send to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.objects import NodeInfo, Resources
from app.policy import Policy
from app.rebalance import (
    ClusterView,
    DeschedulerConfig,
    EvictionPlan,
    HeldHot,
    NodeClass,
    NodeKind,
    PlannedEviction,
    ReplacementScheduler,
    SkippedPod,
    draining_nodes,
    node_opt_out,
    plan,
    plan_consolidation,
    pool_of,
)

# What each class means for the node's pods, in one sentence.
ROLE = {
    NodeKind.SOURCE: "a source: the descheduler moves pods off it",
    NodeKind.DEBOUNCING: "not yet a source: hot, but not for enough runs in a row",
    NodeKind.UNTAINTED: "not a source: hot, but without loadaware's soft taint the "
    "scheduler could send its pods back",
    NodeKind.DESTINATION: "a destination: evicted pods may be sent to it",
    NodeKind.NEUTRAL: "neither a source nor a destination",
    NodeKind.NO_DATA: "neither: without usable data it is never a source nor a destination",
    NodeKind.EXCLUDED: "neither: the configuration's nodeSelector leaves it out",
}


@dataclass(frozen=True, slots=True)
class NodeConsolidation:
    """What consolidation would do with the node this run."""

    verdict: str  # drained | draining | kept | given up | no candidate | receives | untouched
    reason: str
    moves: tuple[PlannedEviction, ...] = ()  # its pods, each with its destination
    waiting: tuple[tuple[str, str], ...] = ()  # its pods that go in a later run, and why
    received: tuple[PlannedEviction, ...] = ()  # pods a drain sends to it
    waits_for_hot_spots: bool = False  # the hot-spot plan evicts: no drain this run


def consolidation_of(
    name: str, cluster: ClusterView, config: DeschedulerConfig, policy: Policy, now_s: float,
    hot_spot_evictions: bool, rise: Resources | None = None,
) -> NodeConsolidation | None:  # fmt: skip
    """The node's part of the consolidation plan; None when consolidation is off."""
    if not config.consolidation.enabled:
        return None
    started = draining_nodes(cluster.nodes.values(), now_s)
    whole = plan_consolidation(cluster, config, policy, now_s, started, started, rise=rise)
    received = tuple(e for e in whole.evictions if e.destination == name)
    waits = hot_spot_evictions
    for drain in whole.drains:
        if drain.node == name:
            verdict = "draining" if drain.continued else "drained"
            return NodeConsolidation(verdict, drain.reason, drain.evictions, drain.waiting,
                                     waits_for_hot_spots=waits)  # fmt: skip
    for given_up in whole.abandoned:
        if given_up.node == name:
            return NodeConsolidation("given up", given_up.reason, waits_for_hot_spots=waits)
    for kept in whole.kept:
        if kept.node == name:
            return NodeConsolidation("kept", kept.reason, received=received,
                                     waits_for_hot_spots=waits)  # fmt: skip
    if name in whole.not_candidates:
        return NodeConsolidation("no candidate", whole.not_candidates[name], received=received,
                                 waits_for_hot_spots=waits)  # fmt: skip
    if received:
        return NodeConsolidation("receives", "a destination of the nodes drained this run",
                                 received=received, waits_for_hot_spots=waits)  # fmt: skip
    why = "; ".join(whole.notes) or "a candidate not tried this run (maxNodesPerRun)"
    return NodeConsolidation("untouched", why, waits_for_hot_spots=waits)


@dataclass(frozen=True, slots=True)
class NodePoolsOf:
    """A node's pool in the policy (its limits) and in the configuration (thresholds):
    a name; None: in none; or the pools that overlap on it (judged by the defaults)."""

    policy: str | None
    policy_overlap: tuple[str, ...]
    configuration: str | None
    configuration_overlap: tuple[str, ...]

    def described(self, pool: str | None, overlap: tuple[str, ...], defaults: str) -> str:
        if overlap:
            return (
                f"none: pools {', '.join(overlap)} all select it, an error: judged by the "
                f"{defaults} until one pool selects it"
            )
        return pool if pool is not None else f"none ({defaults})"


def pools_of(
    node: NodeInfo, config: DeschedulerConfig, policy: Policy
) -> NodePoolsOf | None:
    """The node's pools (``NodePoolsOf``), or None where neither file has pools."""
    if not policy.spec.node_pools and not config.node_pools:
        return None
    in_policy = policy.node_pools.match(node.labels)
    in_config = pool_of(config, node)
    return NodePoolsOf(in_policy.pool, in_policy.overlap, in_config.name, in_config.overlap)


@dataclass(frozen=True, slots=True)
class NodeExplanation:
    node: str
    node_class: NodeClass
    consecutive_hot_rounds: int  # what the configuration asks for
    pods_on_node: int
    moved_off: tuple[PlannedEviction, ...]  # in the order the descheduler would evict
    skipped: tuple[SkippedPod, ...]
    sent_here: tuple[PlannedEviction, ...]
    notes: tuple[str, ...]  # the plan's, for the whole cluster
    scheduler: ReplacementScheduler = "extender"  # what the plan assumes places replacements
    # Hot from pods above their requests that stay on it (issue 42): reported,
    # not churned; and Karpenter's opt-out on the Node, which keeps every pod on it.
    held_hot: HeldHot | None = None
    opt_out: str | None = None
    consolidation: NodeConsolidation | None = None  # None: consolidation.enabled is off
    # Its node pool in the policy and in the descheduler's configuration (None: neither
    # has pools); app/policy/pools.py.
    pools: NodePoolsOf | None = None

    @property
    def role(self) -> str:
        return ROLE[self.node_class.kind]


def explain_node(
    name: str,
    cluster: ClusterView,
    config: DeschedulerConfig,
    policy: Policy,
    now_s: float,
    hot_rounds: Mapping[str, int],
    rise: Resources | None = None,
) -> NodeExplanation:
    """The node's part of the plan the descheduler would make on ``cluster`` now
    (``rise``: the rise in demand consolidation keeps room for, from its memory).

    Raises KeyError when the cluster has no such node."""
    the_plan: EvictionPlan = plan(cluster, config, policy, now_s, hot_rounds)
    node_class = the_plan.node_classes[name]
    return NodeExplanation(
        node=name,
        node_class=node_class,
        consecutive_hot_rounds=config.consecutive_hot_rounds,
        pods_on_node=sum(1 for pod in cluster.pods.values() if pod.node_name == name),
        moved_off=tuple(e for e in the_plan.evictions if e.source == name),
        skipped=tuple(s for s in the_plan.skipped if s.node == name),
        sent_here=tuple(e for e in the_plan.evictions if e.destination == name),
        notes=tuple(the_plan.notes),
        scheduler=the_plan.scheduler,
        held_hot=the_plan.held_hot.get(name),
        opt_out=node_opt_out(cluster.nodes[name].annotations),
        consolidation=consolidation_of(
            name, cluster, config, policy, now_s, bool(the_plan.evictions), rise
        ),
        pools=pools_of(cluster.nodes[name], config, policy),
    )

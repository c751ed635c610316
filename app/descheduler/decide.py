"""Decide: the plan for one run's view, with the debounce counts to remember; pure.

The planning itself is ``app.rebalance``'s. This step adds the debounce bookkeeping
around it (``app/rebalance/debounce.py``): the consecutive hot rounds come from the
memory; a dry run never writes them, so a dry-run loop counts its own on top, and its
table previews evictions once debouncing would end.

With ``consolidation.enabled`` it also plans consolidation
(``app.rebalance.plan_consolidation``): the nodes being drained are those carrying the
drain taint (``app/rebalance/drain_taint.py``), with the start each taint records.
Cooling hot spots comes first: a run whose plan evicts for a hot spot starts no drain
and moves no pod of one (``Decision.drains_wait``); it still gives up the drains that
no longer hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.descheduler.gather import View
from app.objects import Resources
from app.policy import Policy
from app.rebalance import (
    ConsolidationPlan,
    DemandHistory,
    DeschedulerConfig,
    EvictionPlan,
    PlannerState,
    demand_of,
    draining_nodes,
    observe_round,
    plan,
    plan_consolidation,
    previous_hot_rounds,
    record_hot_rounds,
)


@dataclass(frozen=True, slots=True)
class Decision:
    plan: EvictionPlan
    # The state's debounce counts after this round (written unless dry-running).
    hot_rounds: dict[str, tuple[int, float]]
    # What a dry-run loop remembers for its next round (empty when not dry-running).
    dry_rounds: PlannerState = field(default_factory=PlannerState)
    # The consolidation plan (None when consolidation.enabled is off).
    consolidation: ConsolidationPlan | None = None

    @property
    def drains_wait(self) -> bool:
        """Hot spots first: no drain starts or goes on in a run that cools one."""
        return bool(self.plan.evictions)


def rise_of(history: DemandHistory, view: View, config: DeschedulerConfig) -> Resources | None:
    """This run's sample of the demand of the pods that need a node, into ``history``
    and the state (saved with it unless dry-running: a restart, a new leader or a
    ``--once`` run goes on with it), and the rise consolidation keeps room for
    (``app/rebalance/rise.py``); None while consolidation is off."""
    settings = config.consolidation
    if not settings.enabled:
        return None
    history.lookback_s, history.within_s = settings.rise_lookback, settings.rise_within
    history.merge(view.state.demand)
    history.record(view.now_s, demand_of(view.cluster.pods.values()))
    view.state.demand = history.samples
    return history.rise()


def decide(
    view: View,
    config: DeschedulerConfig,
    policy: Policy,
    dry_rounds: PlannerState | None,
    rise: Resources | None = None,
) -> Decision:
    """The plan for ``view``; ``dry_rounds``: a dry-run loop's own counts, None when not
    dry-running; ``rise``: the rise in demand consolidation keeps room for
    (``app/rebalance/rise.py``)."""
    hot_rounds = previous_hot_rounds(view.state.hot_rounds, view.now_s, config.interval)
    if dry_rounds is not None:
        for name, count in dry_rounds.hot_rounds.items():
            hot_rounds[name] = max(hot_rounds.get(name, 0), count)
    the_plan = plan(view.cluster, config, policy, view.now_s, hot_rounds)
    consolidation = None
    if config.consolidation.enabled:
        started_s = draining_nodes(view.cluster.nodes.values(), view.now_s)
        consolidation = plan_consolidation(
            view.cluster, config, policy, view.now_s, started_s, started_s, rise=rise
        )
    return Decision(
        consolidation=consolidation,
        plan=the_plan,
        hot_rounds=record_hot_rounds(
            view.state.hot_rounds, the_plan.node_classes, view.now_s, config.interval
        ),
        dry_rounds=(
            observe_round(dry_rounds, the_plan.node_classes)
            if dry_rounds is not None
            else PlannerState()
        ),
    )

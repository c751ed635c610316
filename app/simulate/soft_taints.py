"""The annotator's soft taints, simulated: which nodes carry loadaware's taint now.

The simulated annotator judges the nodes as the annotator does: at each sync of a
limited metric (a metric a policy predicate sets a limit on) and at each hot-value
refresh (``metrics.hotValueInterval``, the annotator's hot-value loop), it reads each
node's annotations with the estimate of the pods bound since its samples added
(``app.load.taints.judge_node``; the estimate is the ``loadaware`` policy's
``estimation.BurstEstimate``, the extender's ``unsampled``, each pod counted for the
share of it the samples do not show yet: ``partly_sampled``, and raised to its
workload's usage as the simulated annotator publishes it, ``cluster.workload_usage``,
as the extender's estimate is), judges them with
``decide_soft_taints`` and the memory kept from the previous round, and sets the taint
on the nodes the rule names. Between rounds the taints stay as they are, as they do on
the Nodes.

``tainted`` is what kube-scheduler's TaintToleration sees (``scheduling.Scheduler``);
``rounds`` keeps every decision, so that tests can tie a taint to its reason.

Only the nodes that can carry the taint are read: those tainted now, those with an
estimate (pods bound within ``estimation.maxAge``), and those with a written value of
a limited metric within ``SCREEN_SLACK`` of its limit (the annotation is that value
to 5 decimals, so a node below it without an estimate cannot read as hot). The others
are neither hot nor tainted, so the rule leaves them untainted whatever their readings
say (``decide_soft_taints``' ``nodes``); on 1,000 cool nodes, reading every one at
every sync made ``default+taints`` eight times slower than ``default``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.load import (
    NodeHeat,
    PlacedPod,
    SoftTaints,
    SoftTaintSettings,
    decide_soft_taints,
    evaluate_node,
    judge_node,
    next_pod,
    node_heat,
    wave_of,
)
from app.objects import Resources
from app.policy import Policy
from app.simulate.recording_rules import SimulatedMonitoring, is_due
from app.simulate.scheduling import UnsampledUsage

SCREEN_SLACK = 1e-4


@dataclass(frozen=True, slots=True)
class TaintRound:
    t_s: float
    decision: SoftTaints


class SimulatedSoftTaints:
    """The annotator's soft-taint keeper over the simulated monitoring's annotations."""

    def __init__(
        self,
        policy: Policy,
        pipeline: SimulatedMonitoring,
        node_names: list[str],
        settings: SoftTaintSettings | None = None,
        estimate: UnsampledUsage | None = None,
        allocatable: Sequence[Resources] = (),
    ) -> None:
        """``allocatable``, per node, is what the next pod of a wave is a fraction of;
        without it (or without ``estimate``) the rule does not look ahead."""
        self.policy = policy
        self.settings = settings or SoftTaintSettings()
        self._pipeline = pipeline
        self._estimate = estimate
        # Nodes whose estimate may be non-zero: those told changed since it was last empty.
        self._estimated: set[int] = set()
        self._names = node_names
        limits = dict(policy.limits)
        self._limits = {m: limit for m, limit in limits.items() if m in pipeline.sync_periods_s}
        self._periods_s = sorted({pipeline.sync_periods_s[m] for m in self._limits})
        if self._periods_s:
            self._periods_s.append(pipeline.hot_value_interval_s)
        self.tainted: npt.NDArray[np.bool_] = np.zeros(len(node_names), dtype=np.bool_)
        self._warm_at_s: dict[str, float] = {}
        self.rounds: list[TaintRound] = []
        # A node's heat without an estimate is reused until its annotations are rewritten
        # or the clock alone would change it, as the extender's LoadFilter reuses a load.
        self._heats: list[tuple[int, float, NodeHeat] | None] = [None] * len(node_names)
        # Nodes of the same allocatable take the same next pod: judged once per kind.
        kinds: dict[Resources, int] = {}
        self._kind_of = np.array(
            [kinds.setdefault(a, len(kinds)) for a in allocatable], dtype=np.int64
        )
        self._kinds = list(kinds)
        self._next: list[dict[str, float]] = [{} for _ in self._kinds]

    def advance(self, t_s: float) -> None:
        """After the pipeline's ``advance(t_s)``: decide again if a limited metric synced
        or the hot value is refreshed."""
        if any(is_due(t_s, period_s) for period_s in self._periods_s):
            self.sync(t_s)

    def sync(self, t_s: float) -> SoftTaints:
        now_s = self._pipeline.epoch_s + t_s
        wave: tuple[PlacedPod, ...] = ()
        if self._estimate is not None:
            self._estimated |= self._estimate.changed_nodes(t_s)
            if self._kinds:
                wave = wave_of(self._estimate.recent_pods(t_s), self.policy, now_s)
        self._next = [next_pod(wave, kind, self.policy) for kind in self._kinds]
        heats = {
            self._names[node]: self._heat(node, t_s, now_s)
            for node in np.flatnonzero(self._may_be_tainted()).tolist()
        }
        decision = decide_soft_taints(
            heats, self._warm_at_s, now_s, self.settings, nodes=len(self._names)
        )
        self._warm_at_s = dict(decision.warm_at_s)
        tainted = decision.tainted
        # In place: the scheduler holds this array.
        self.tainted[:] = [name in tainted for name in self._names]
        self.rounds.append(TaintRound(t_s, decision))
        return decision

    def _may_be_tainted(self) -> npt.NDArray[np.bool_]:
        near = self.tainted.copy()
        resources = self.policy.metric_resources
        for metric, limit in self._limits.items():
            # Within the next pod of its limit (the written value is the reading
            # alone); NaN (never written) compares False: such a node reads as unknown.
            line: float | npt.NDArray[np.float64] = limit - SCREEN_SLACK
            resource = resources.get(metric, "")
            if any(resource in fractions for fractions in self._next):
                ahead = np.array([fractions.get(resource, 0.0) for fractions in self._next])
                line = line - ahead[self._kind_of]
            near |= self._pipeline.values[metric] > line
        near[list(self._estimated)] = True
        return near

    def _heat(self, node: int, t_s: float, now_s: float) -> NodeHeat:
        margin = self.settings.release_margin
        ahead = self._next[int(self._kind_of[node])] if self._kinds else {}
        unsampled = None
        if node in self._estimated:
            assert self._estimate is not None
            unsampled = self._estimate.unsampled(node, t_s, partly_sampled=True)
            if not unsampled:
                self._estimated.discard(node)
        if unsampled or ahead:
            annotations = self._pipeline.annotations(node)
            return judge_node(annotations, self.policy, now_s, margin, unsampled, ahead)
        version = int(self._pipeline.node_version[node])
        cached = self._heats[node]
        if cached is not None and cached[0] == version and now_s < cached[1]:
            return cached[2]
        load = evaluate_node(self._pipeline.annotations(node), self.policy, now_s)
        heat = node_heat(load, self.policy, margin)
        self._heats[node] = (version, load.recheck_at_s, heat)
        return heat

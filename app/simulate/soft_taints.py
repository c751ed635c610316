"""The annotator's soft taints, simulated: which nodes carry loadaware's taint now.

The simulated annotator judges the nodes as the annotator does: at each sync of a
limited metric (a metric a policy predicate sets a limit on) and at each hot-value
refresh (``metrics.hotValueInterval``, the annotator's hot-value loop), it reads each
node's annotations with the estimate of the pods bound since its samples added
(``app.load.taints.judge_node``, as ``judge_measured`` of the node's kept
Measurement; the estimate is the ``loadaware`` policy's
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

What a sync would only make again is kept: a node's Measurement until a metric's text
changes or its ``changes_at_s`` (a hot-value rewrite alone keeps it: the rule never
reads the hot value), its heat while its readings, estimate and next pod stay the
same, the next pod while the wave's kinds do, and a decision taken with no tainted
node judged cool, for the very same heats and tainted nodes (its memory moved to the
clock). A node without an estimate whose annotations were not rewritten, whose
Measurement still holds and whose next pod is the same gets its last heat without
asking for any of them (``_Settled``): on the small built-ins most nodes read at a
sync are such. Each is what making it again would give, so a run is the same with
them as without (``test_every_heat_a_sync_keeps_is_the_heat_judged_afresh``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.load import (
    Evidence,
    Heat,
    Measurement,
    MetricReading,
    NodeHeat,
    PlacedPod,
    SoftTaints,
    SoftTaintSettings,
    WarmTaintSettings,
    decide_soft_taints,
    judge_measured,
    measure,
    next_pod,
    warm_metrics,
    wave_of,
)
from app.objects import Resources
from app.policy import Policy
from app.simulate.drained import BindingFeed, SimulatedDrainedNodes
from app.simulate.recording_rules import SimulatedMonitoring, is_due
from app.simulate.scheduling import NodeRequests, UnsampledUsage
from app.simulate.warm_taints import SimulatedWarmTaints

SCREEN_SLACK = 1e-4
# What ``next_pod`` reads of a pod of the wave: all but when it was bound.
PodKind = tuple[Resources, Resources, Evidence, Resources | None]


@dataclass(frozen=True, slots=True)
class TaintRound:
    t_s: float
    decision: SoftTaints


# A node's Measurement with the annotations' version, the metrics' writes
# (``sync_version``) and the instant it was taken at, the metrics' texts it was read
# from and its ``freshest_sample_s`` (``NodeHeats.measurement``).
_Measured = tuple[int, int, float, tuple[str | None, ...], Measurement, float | None]


@dataclass(frozen=True, slots=True)
class _Judged:
    """A node's last judgement with an estimate or a next pod, and what it was of. A
    heat follows from the readings alone (not the hot value, whose rewrites bump the
    annotations' version every refresh after a binding), the estimate and the next pod."""

    readings: Mapping[str, MetricReading]
    unsampled: Mapping[str, float] | None
    ahead: dict[str, float]  # the very object ``next_pod`` made: it is not changed after
    heat: NodeHeat


@dataclass(frozen=True, slots=True)
class _Settled:
    """A node's heat judged without an estimate, and what makes it hold: the same
    annotations' version, the clock within its Measurement's life (from ``taken_s``
    to ``changes_at_s``) and the same next pod. Then ``measurement`` gives the very
    Measurement again and ``_judge`` the very heat, so a sync reuses it without asking
    them; a node with an estimate (whose share moves with the clock) never does."""

    version: int
    taken_s: float
    changes_at_s: float
    ahead: dict[str, float]
    heat: NodeHeat


@dataclass(frozen=True, slots=True)
class _Decided:
    """A decision taken with no tainted node judged cool, and what it was taken from:
    the heats and the nodes tainted before it (``SimulatedSoftTaints._decide``)."""

    heats: dict[str, NodeHeat]
    warm: frozenset[str]
    decision: SoftTaints


def _limits_by_metric(
    policies: Sequence[Policy], policy: Policy, synced: Mapping[str, float]
) -> dict[str, float | npt.NDArray[np.float64]]:
    """Per limited metric that is synced, its limit: one number, or with node pools one
    per node (inf where the node's pool sets none)."""
    if not policy.spec.node_pools:
        return {m: limit for m, limit in policy.limits if m in synced}
    per_node = [dict(p.limits) for p in policies]
    metrics = dict.fromkeys(m for limits in per_node for m in limits if m in synced)
    return {
        m: np.array([limits.get(m, math.inf) for limits in per_node], dtype=np.float64)
        for m in metrics
    }


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
        node_labels: Sequence[Mapping[str, str]] = (),
        requests: NodeRequests | None = None,
        warm_settings: WarmTaintSettings | None = None,
        bindings: BindingFeed | None = None,
    ) -> None:
        """``allocatable``, per node, is what the next pod of a wave is a fraction of;
        without it (or without ``estimate``) the rule does not look ahead.
        ``node_labels``, per node, put it in a node pool (app/policy/pools.py) whose
        limits it is judged by. ``bindings``: what the guard ahead of the replacements
        stands down on (``app.simulate.drained``)."""
        self.policy = policy
        self._policies = [policy] * len(node_names)
        if policy.spec.node_pools:
            self._policies = [policy.for_node(labels) for labels in node_labels]
        self.settings = settings or SoftTaintSettings()
        self._pipeline = pipeline
        self._estimate = estimate
        self._heats = NodeHeats(
            policy, self._policies, pipeline, estimate, self.settings.release_margin
        )
        self._names = node_names
        self._index = {name: index for index, name in enumerate(node_names)}
        # The descheduler's evictions, which drained nodes are held by (app/load/drained.py).
        self.drained = SimulatedDrainedNodes(node_names, allocatable, self._policies, bindings)
        self._limits = _limits_by_metric(self._policies, policy, pipeline.sync_periods_s)
        self._periods_s = sorted({pipeline.sync_periods_s[m] for m in self._limits})
        if self._periods_s:
            self._periods_s.append(pipeline.hot_value_interval_s)
        self.tainted: npt.NDArray[np.bool_] = np.zeros(len(node_names), dtype=np.bool_)
        self._guarded: list[int] = []  # nodes tainted by the guard alone, this round
        self._warm_at_s: dict[str, float] = {}
        self.rounds: list[TaintRound] = []
        # The warm taint (app/load/warm_taint.py), from the nodes' requests and readings.
        self.warm = SimulatedWarmTaints(
            requests,
            pipeline,
            self._limits,
            warm_metrics(policy),
            warm_settings or WarmTaintSettings(),
        )
        self.heats: dict[str, NodeHeat] = {}  # what the last sync judged, per node read
        # Nodes of the same allocatable (and limits: a node pool's) take the same next
        # pod: judged once per kind.
        kinds: dict[tuple[Resources, tuple[tuple[str, float], ...]], int] = {}
        kind_policies: list[Policy] = []
        of = []
        for a, p in zip(allocatable, self._policies, strict=False):
            kind = kinds.setdefault((a, p.limits), len(kinds))
            if kind == len(kind_policies):
                kind_policies.append(p)
            of.append(kind)
        self._kind_of = np.array(of, dtype=np.int64)
        self._kinds = [(a, p) for (a, _), p in zip(kinds, kind_policies, strict=True)]
        self._next: list[dict[str, float]] = [{} for _ in self._kinds]
        self._wave_kinds: list[PodKind] | None = None
        self._lines: dict[str, float | npt.NDArray[np.float64]] | None = None
        # The last decision the clock entered only through the memory (``_decide``).
        self._last_decided: _Decided | None = None
        # The decisions ``tainted`` was last set from, and per screen line the nodes
        # above it, with the metrics' writes (``sync_version``) and the lines they are of.
        self._applied: object = None
        self._above: tuple[int, dict[str, float | npt.NDArray[np.float64]],
                           npt.NDArray[np.bool_]] | None = None  # fmt: skip

    def advance(self, t_s: float) -> None:
        """After the pipeline's ``advance(t_s)``: decide again if a limited metric synced
        or the hot value is refreshed."""
        if any(is_due(t_s, period_s) for period_s in self._periods_s):
            self.sync(t_s)

    def sync(self, t_s: float) -> SoftTaints:
        now_s = self._pipeline.epoch_s + t_s
        wave: tuple[PlacedPod, ...] = ()
        if self._estimate is not None:
            self._heats.estimated |= self._estimate.changed_nodes(t_s)
            if self._kinds:
                wave = wave_of(self._estimate.recent_pods(t_s), self.policy, now_s)
        # The next pod depends on the kinds of the wave's pods, not on when they were bound.
        wave_kinds = [(p.requests, p.limits, p.evidence, p.observed) for p in wave]
        if wave_kinds != self._wave_kinds:
            self._next = [next_pod(wave, kind, policy) for kind, policy in self._kinds]
            self._wave_kinds = wave_kinds
            self._lines = None
        heats = {
            self._names[node]: self._heats.heat(node, t_s, now_s, self._ahead(node))
            for node in np.flatnonzero(self._may_be_tainted()).tolist()
        }
        self.heats = heats
        if self.drained.evictions and self._warm_at_s:
            node_now = self._heats.measurement  # of a node's annotations' version, now
            self._warm_at_s = self.drained.hold(
                self._warm_at_s, lambda i, v: node_now(i, v, now_s)[4], self._pipeline.node_version,
                now_s, self.settings.release_margin,
            )  # fmt: skip
        decision = self._decide(heats, now_s)
        self._warm_at_s = dict(decision.warm_at_s)
        if decision.decisions is not self._applied or self._guarded:  # else set already
            tainted = decision.tainted
            # In place: the scheduler holds this array. Set by index: the nodes are many,
            # the tainted few.
            self.tainted[:] = False
            if tainted:
                self.tainted[[self._index[name] for name in tainted]] = True
            self._applied = decision.decisions
        # The guard ahead of the replacements (app/load/landing_guard.py): on top of the
        # rule's taints for this round, never in its memory.
        if self.drained.evictions:
            node_now = self._heats.measurement
            self._guarded = self.drained.guard(
                self.tainted, lambda i, v: node_now(i, v, now_s)[4], self._pipeline.node_version,
                now_s, self.settings.release_margin,
            )  # fmt: skip
            if self._guarded:
                self.tainted[self._guarded] = True
        self.rounds.append(TaintRound(t_s, decision))
        self.warm.sync(now_s, self.tainted)
        return decision

    def codes(self) -> npt.NDArray[np.int64]:
        """Per node, 1 for the hot taint, 2 for the warm one, 3 for both, 0 for none."""
        return self.tainted + 2 * self.warm.tainted.astype(np.int64)

    def _decide(self, heats: dict[str, NodeHeat], now_s: float) -> SoftTaints:
        """``decide_soft_taints``, or the last round's decision where it cannot differ
        but in its clock. The clock enters a decision only through a tainted node
        judged cool (its hold, counted from its memory) and the memory itself (``now_s``
        for each node kept tainted and not cool). So after a round with no tainted node
        judged cool, the same heats (the very objects: ``NodeHeats.heat`` reuses them)
        with the same nodes tainted give the same decisions, and the same nodes keep the
        taint with ``now_s`` as their memory."""
        last = self._last_decided
        warm = self._warm_at_s
        if (
            last is not None
            and warm.keys() == last.warm
            and heats.keys() == last.heats.keys()
            and all(heat is last.heats[name] for name, heat in heats.items())
        ):
            kept = last.decision
            if not kept.warm_at_s:
                return kept
            return SoftTaints(kept.decisions, dict.fromkeys(kept.warm_at_s, now_s))
        decision = decide_soft_taints(heats, warm, now_s, self.settings, nodes=len(self._names))
        timeless = not any(heat.heat is Heat.COOL and name in warm for name, heat in heats.items())
        self._last_decided = _Decided(heats, frozenset(warm), decision) if timeless else None
        return decision

    def _may_be_tainted(self) -> npt.NDArray[np.bool_]:
        if self._lines is None:
            self._lines = self._screen_lines()
        above = self._above
        if above is None or above[0] != self._pipeline.sync_version or above[1] is not self._lines:
            # Made again once a metric is written or the lines move, not every sync.
            near_a_limit = np.zeros(len(self._names), dtype=np.bool_)
            for metric, line in self._lines.items():
                # NaN (never written) compares False: such a node reads as unknown.
                near_a_limit |= self._pipeline.values[metric] > line
            above = self._above = (self._pipeline.sync_version, self._lines, near_a_limit)
        near = self.tainted | above[2]
        if self._heats.estimated:
            near[list(self._heats.estimated)] = True
        return near

    def _screen_lines(self) -> dict[str, float | npt.NDArray[np.float64]]:
        """Per limited metric, the written value above which a node may be hot: within
        the next pod of its limit (the written value is the reading alone). Made again
        when the next pod changes."""
        lines: dict[str, float | npt.NDArray[np.float64]] = {}
        resources = self.policy.metric_resources
        for metric, limit in self._limits.items():
            line: float | npt.NDArray[np.float64] = limit - SCREEN_SLACK
            resource = resources.get(metric, "")
            if any(resource in fractions for fractions in self._next):
                ahead = np.array([fractions.get(resource, 0.0) for fractions in self._next])
                line = line - ahead[self._kind_of]
            lines[metric] = line
        return lines

    def _ahead(self, node: int) -> dict[str, float]:
        """The wave's next pod on the node, as fractions of its allocatable."""
        return self._next[int(self._kind_of[node])] if self._kinds else {}


class NodeHeats:
    """Each node's heat for the soft-taint rule (``judge_measured``), from its kept
    Measurement, reused while what it was judged from holds (module doc)."""

    def __init__(
        self,
        policy: Policy,
        policies: Sequence[Policy],
        pipeline: SimulatedMonitoring,
        estimate: UnsampledUsage | None,
        release_margin: float,
    ) -> None:
        self.policy = policy
        self._policies = policies  # per node: its node pool's
        self._pipeline = pipeline
        self._estimate = estimate
        self._release_margin = release_margin
        nodes = len(policies)
        # Nodes whose estimate may be non-zero: those told changed since it was last empty.
        self.estimated: set[int] = set()
        # Per node, its last Measurement (``measurement``): the estimate and both
        # judgements (with and without the next pod) read it.
        self._measured: list[_Measured | None] = [None] * nodes
        self._metrics = [metric for metric, _ in policy.metric_windows]  # what it reads
        self._judged: list[_Judged | None] = [None] * nodes
        # Per node, its last heat judged without an estimate, while it holds (``heat``).
        self._settled: list[_Settled | None] = [None] * nodes

    def heat(self, node: int, t_s: float, now_s: float, ahead: dict[str, float]) -> NodeHeat:
        """The node's heat with ``ahead``, the wave's next pod, on it: the last one
        judged without an estimate while nothing it was judged from moved
        (``_Settled``), else judged afresh."""
        version = int(self._pipeline.node_version[node])
        settled = self._settled[node]
        if (
            settled is not None
            and settled.version == version
            and settled.taken_s <= now_s < settled.changes_at_s
            and node not in self.estimated
            and settled.ahead == ahead
        ):
            return settled.heat
        measured = self.measurement(node, version, now_s)
        measurement = measured[4]
        unsampled = None
        if node in self.estimated:
            assert self._estimate is not None
            unsampled = self._estimate.unsampled_after(node, t_s, measured[5], partly_sampled=True)
            if not unsampled:
                self.estimated.discard(node)
        heat = self._judge(node, measurement, unsampled, ahead)
        self._settled[node] = (
            _Settled(version, now_s, measurement.changes_at_s, ahead, heat)
            if unsampled is None
            else None
        )
        return heat

    def _judge(
        self,
        node: int,
        measurement: Measurement,
        unsampled: Mapping[str, float] | None,
        ahead: dict[str, float],
    ) -> NodeHeat:
        """``judge_measured``, reused while the node's readings, its estimate and the
        next pod stay the same (``_judged``)."""
        judged = self._judged[node]
        if (
            judged is not None
            and judged.ahead == ahead
            and judged.unsampled == unsampled
            and judged.readings == measurement.readings
        ):
            return judged.heat
        margin = self._release_margin
        heat = judge_measured(measurement, self._policies[node], margin, unsampled, ahead)
        self._judged[node] = _Judged(measurement.readings, unsampled, ahead, heat)
        return heat

    def measurement(self, node: int, version: int, now_s: float) -> _Measured:
        """``measure`` of the node's annotations at ``now_s``, kept (as the load filter
        keeps it) from when it was taken until its ``changes_at_s``, or until a rewrite
        changes a metric's text. A rewrite of the hot value alone (every refresh while
        a node has recent bindings) keeps it: the rule reads the readings and never the
        hot value (``node_heat``), so that one is left as it was read. A metric's text
        is written only at a sync of the metrics, which bumps ``sync_version``: with
        none since, a new version is the hot value's, and the texts are not read."""
        kept = self._measured[node]
        syncs = self._pipeline.sync_version
        if kept is not None and kept[2] <= now_s < kept[4].changes_at_s:
            if kept[0] == version:
                return kept
            _, kept_syncs, taken_s, texts, measurement, freshest_s = kept
            if kept_syncs != syncs:
                annotations = self._pipeline.annotations(node)
                if texts != tuple(annotations.get(metric) for metric in self._metrics):
                    kept = None
            if kept is not None:
                kept = (version, syncs, taken_s, texts, measurement, freshest_s)
                self._measured[node] = kept
                return kept
        annotations = self._pipeline.annotations(node)
        measurement = measure(annotations, self.policy, now_s)
        texts = tuple(annotations.get(metric) for metric in self._metrics)
        measured = (version, syncs, now_s, texts, measurement, measurement.freshest_sample_s())
        self._measured[node] = measured
        return measured

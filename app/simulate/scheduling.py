"""Where a pending pod goes: kube-scheduler's resource plugins, plus the load extender.

``default`` approximates kube-scheduler's default profile for resource placement
(REFERENCE §6): the NodeResourcesFit filter by requests, then the sum of
NodeResourcesFit/LeastAllocated and NodeResourcesBalancedAllocation, each 0..100 and
weight 1, scored on "non-zero" requests (100m CPU, 200Mi memory for a container that
requests nothing). Ties are broken at random, as kube-scheduler does. It leaves out
everything a scenario cannot express: affinity, topology spread, image locality,
preemption and ``percentageOfNodesToScore`` (every node is scored). One thing a scenario
does say is which workload owns each pod: kube-scheduler's system-default
PodTopologySpread (weight 2) spreads a Deployment's, ReplicaSet's or StatefulSet's
replicas over ``kubernetes.io/hostname`` and, where the nodes carry
``topology.kubernetes.io/zone``, over zones (``WorkloadSpread``). kube-scheduler runs
under every policy (the extender and crane's plugin add to its default profile, they do
not replace it), so the spread is scored under every one.

With soft taints (``default+taints``), TaintToleration is scored as kube-scheduler
scores it (REFERENCE §8): per feasible node, the count of ``PreferNoSchedule`` taints
the pod does not tolerate (here loadaware's own, 0 or 1: scenario pods tolerate
nothing), normalized in reverse across the feasible nodes (the node with the most gets
0, one with none 100; all 100 when none has any) and added at weight 3, the default
profile's, to the request-based plugins' sum. So a tainted node is the last choice
among the feasible ones, never filtered out.

The rules themselves are ``app.load.default_profile``, which the descheduler also calls
to predict where a replacement lands.

``loadaware`` is that, followed by the extender: nodes the production load model
(``app.load.evaluate_node``) rejects are filtered out, and the extender's answer
(``app.load.prioritize.host_priorities``: its 0..10 scores with the preferred node alone on
top) times 10 x ``extenderWeight`` is added, as kube-scheduler adds an extender's
score; ``unsampled`` is the burst estimate (``UnsampledUsage``). The answer lists the
feasible nodes as kube-scheduler sends them: in node order from a start that moves on
every cycle (its ``nextStartNodeIndex``), here drawn at random.

``crane`` is crane-scheduler as it ships (``scenario.crane``): the same filter, but
scored as an in-tree plugin, its 0..100 score times ``pluginWeight`` (3) beside the
default plugins, with crane's rule for missing data and no estimate.

Pods come in waves of one shape, and each binding changes one node's rank: the ranks,
the best one and the nodes tied at it are kept between pods (``BestNodes``) and made
again for the nodes a binding, an eviction or the load filter changed, or over every
node where more changed, the shape is new, a soft taint, the topology spread or a
preferred node makes the ranks this pod's alone. ``tests/simulate/test_scheduling.py``
holds every choice to the one made afresh.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from app.load import (
    EXTENDER_SCORE_SCALE,
    HOSTNAME_KEY,
    MAX_NODE_SCORE,
    PLAIN_MAX_SCORE,
    SYSTEM_DEFAULT_SPREAD,
    ZONE_KEY,
    Measurement,
    NodeLoad,
    PlacedPod,
    evaluate_node,
    fits_request,
    fits_requests,
    measure,
    node_verdict,
    non_zero_requests,
    plain_priority,
    preferred_position,
    preferred_priority,
    profile_scores,
    resource_score,
    resource_scores,
    spread_term,
    taint_toleration_scores,
    topology_spread_scores,
)
from app.policy import Policy
from app.simulate.draws import IntegerDraws

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_Array = TypeVar("_Array", BoolArray, IntArray)


@dataclass(frozen=True, slots=True)
class PodShape:
    """What placement needs to know about a pod."""

    request_cpu_cores: float
    request_memory_bytes: float
    # What the extender estimates the pod will use (app.load.estimate), which the
    # preferred node must have room for; 0 where the policy has no estimate.
    estimate_cpu_cores: float = 0.0
    estimate_memory_bytes: float = 0.0
    # The requests the scoring plugins count (cores, bytes): ``non_zero_requests``, made
    # once (asked at every binding and every choice).
    scored: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        scored = non_zero_requests(self.request_cpu_cores, self.request_memory_bytes)
        object.__setattr__(self, "scored", scored)


@dataclass
class NodeRequests:
    """Allocatable and the sum of bound pods' requests, per node."""

    allocatable_cpu: FloatArray
    allocatable_memory: FloatArray
    # Each workload's pods per node, for the system-default topology spread
    # (``WorkloadSpread``); None: not scored (a test of the scheduler without it).
    spread: WorkloadSpread | None = None
    requested_cpu: FloatArray = field(init=False)
    requested_memory: FloatArray = field(init=False)
    scored_cpu: FloatArray = field(init=False)  # with the non-zero defaults
    scored_memory: FloatArray = field(init=False)

    # NodeResourcesFit's filter and the scoring plugins' sum for the last pod shape.
    _fit: _PerShape[BoolArray] = field(init=False)
    _score: _PerShape[IntArray] = field(init=False)
    _unranked: set[int] = field(init=False, default_factory=set)  # see ``take_unranked``

    def __post_init__(self) -> None:
        zeros = np.zeros_like(self.allocatable_cpu)
        self.requested_cpu, self.requested_memory = zeros.copy(), zeros.copy()
        self.scored_cpu, self.scored_memory = zeros.copy(), zeros.copy()
        self._fit = _PerShape(fits_requests, fits_request)
        self._score = _PerShape(resource_scores, resource_score)

    def add(self, node: int, pod: PodShape, sign: float = 1.0, workload: int = -1) -> None:
        """A pod of ``pod``'s shape (of scenario workload ``workload``) bound on ``node``
        (``sign`` 1) or gone from it (-1)."""
        if self.spread is not None and workload >= 0:
            self.spread.add(workload, node, sign)
        self.requested_cpu[node] += sign * pod.request_cpu_cores
        self.requested_memory[node] += sign * pod.request_memory_bytes
        score_cpu_cores, score_memory_bytes = pod.scored
        self.scored_cpu[node] += sign * score_cpu_cores
        self.scored_memory[node] += sign * score_memory_bytes
        self._fit.changed.add(node)
        self._score.changed.add(node)
        self._unranked.add(node)

    def take_unranked(self) -> set[int]:
        """The nodes whose requests changed since the scheduler last asked (``Scheduler``
        ranks them again)."""
        unranked, self._unranked = self._unranked, set()
        return unranked

    def fits(self, pod: PodShape) -> BoolArray:
        """NodeResourcesFit's filter (``app.load.default_profile``).

        Read-only: the same array is updated in place for the next pod of the shape."""
        shape = (pod.request_cpu_cores, pod.request_memory_bytes)
        return self._fit.answer(shape, self.allocatable_cpu, self.allocatable_memory,
                                self.requested_cpu, self.requested_memory)  # fmt: skip

    def scores(self, pod: PodShape) -> IntArray:
        """LeastAllocated + BalancedAllocation, the pod placed (``app.load.default_profile``).

        Read-only: the same array is updated in place for the next pod of the shape."""
        return self._score.answer(pod.scored, self.allocatable_cpu, self.allocatable_memory,
                                  self.scored_cpu, self.scored_memory)  # fmt: skip


class _PerShape(Generic[_Array]):
    """A per-node answer for one pod shape (cores, bytes), from the nodes' allocatable
    and what their pods use of it: kept for the next pod of the shape, and made again
    only for the nodes whose pods changed since (``changed``), since pods come in waves
    of one workload and each binding changes one node's answer, not a thousand. The
    answer is changed in place, and handed out read-only through a view.

    ``whole`` answers for arrays of nodes, ``one`` for a single node in plain floats
    (numpy's per-call cost is most of the work there), with the same operations in the
    same order, so the same answer."""

    def __init__(self, whole: Callable[..., _Array], one: Callable[..., bool | int]) -> None:
        self._whole: Callable[..., _Array] = whole
        self._one = one
        self.changed: set[int] = set()
        self._shape: tuple[float, float] | None = None
        self._answer: _Array
        self._read: _Array

    def answer(
        self, shape: tuple[float, float], allocatable_cpu: FloatArray,
        allocatable_memory: FloatArray, used_cpu: FloatArray, used_memory: FloatArray,
    ) -> _Array:  # fmt: skip
        changed = self.changed
        if shape != self._shape:
            self._answer = self._whole(
                allocatable_cpu, allocatable_memory, used_cpu, used_memory, *shape
            )
            self._read = _read_only(self._answer)
            self._shape = shape
        elif len(changed) == 1:  # one binding since the last pod: most often
            (node,) = changed
            self._answer[node] = self._one(
                allocatable_cpu.item(node), allocatable_memory.item(node),
                used_cpu.item(node), used_memory.item(node), *shape,
            )  # fmt: skip
        elif changed:
            nodes = _indices(changed)
            self._answer[nodes] = self._whole(
                allocatable_cpu[nodes], allocatable_memory[nodes],
                used_cpu[nodes], used_memory[nodes], *shape,
            )  # fmt: skip
        changed.clear()
        return self._read


_LOWEST = int(np.iinfo(np.int64).min)  # how ``Scheduler.choose`` ranks infeasible nodes


class WorkloadSpread:
    """Each spread workload's pods per node, for kube-scheduler's system-default
    PodTopologySpread (``app.load.default_profile``): a pod with no constraints of its
    own, owned by a ReplicaSet or StatefulSet, spreads over ``kubernetes.io/hostname``
    (maxSkew 3) and ``topology.kubernetes.io/zone`` (maxSkew 5) among its owner's pods.
    Scenario pods declare no constraint, so every Deployment's, ReplicaSet's and
    StatefulSet's pods spread so; a DaemonSet's, a Job's and a bare pod's do not."""

    def __init__(self, spreads: Sequence[bool], zones: Sequence[str | None]) -> None:
        nodes = len(zones)
        self._on_node: list[FloatArray | None] = [
            np.zeros(nodes) if spread else None for spread in spreads
        ]
        names = sorted({zone for zone in zones if zone is not None})
        index = {zone: i for i, zone in enumerate(names)}
        self._zone = np.array(
            [index[zone] if zone is not None else -1 for zone in zones], dtype=np.int64
        )
        self._zoned = bool(names)
        self._hostname = np.arange(nodes, dtype=np.int64)
        self._every = np.ones(nodes, dtype=np.bool_)

    def applies(self, workload: int) -> bool:
        return 0 <= workload < len(self._on_node) and self._on_node[workload] is not None

    def add(self, workload: int, node: int, sign: float = 1.0) -> None:
        on_node = self._on_node[workload]
        if on_node is not None:
            on_node[node] += sign

    def scores(self, workload: int, feasible: BoolArray) -> IntArray:
        """PodTopologySpread's normalized score per node for the next pod of
        ``workload`` (0..100; 0 where not feasible)."""
        on_node = self._on_node[workload]
        assert on_node is not None
        terms = []
        for key, max_skew in SYSTEM_DEFAULT_SPREAD:
            if key == HOSTNAME_KEY:
                term = spread_term(self._hostname, on_node, self._every, feasible, hostname=True)
            elif key == ZONE_KEY and self._zoned:
                term = spread_term(self._zone, on_node, self._every, feasible)
            else:
                continue
            per_node, labelled, domains = term
            terms.append((per_node, labelled, max_skew, domains))
        return topology_spread_scores(terms, feasible)


def _read_only(array: _Array) -> _Array:
    """A read-only view of ``array``, which shows every change made to it."""
    view = array.view()
    view.flags.writeable = False
    return view


def _indices(nodes: set[int]) -> slice | IntArray:
    """The nodes as an index: most often one node, which a slice reaches fastest."""
    if len(nodes) == 1:
        (node,) = nodes
        return slice(node, node + 1)
    return np.fromiter(nodes, dtype=np.intp, count=len(nodes))


class UnsampledUsage(Protocol):
    """Usage on a node that its samples do not contain yet (the ``unsampled`` seam)."""

    def unsampled(
        self, node: int, t_s: float, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        """What ``app.load.estimate.node_unsampled`` returns for the node's recent pods
        (``partly_sampled``: the share of each its samples do not show, for the
        soft-taint rule)."""
        ...

    def unsampled_after(
        self, node: int, t_s: float, sample_at_s: float | None, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        """``unsampled`` for a node measured already, its freshest sample at ``sample_at_s``."""
        ...

    def changed_nodes(self, t_s: float) -> set[int]:
        """Nodes whose answer may have changed since the last call (placements, age-outs)."""
        ...

    def recent_pods(self, t_s: float) -> list[PlacedPod]:
        """Every pod bound in the cluster within ``estimation.maxAge`` (after
        ``changed_nodes``): the wave the soft-taint rule looks ahead with."""
        ...


class Monitoring(Protocol):
    """What the load filter reads of the metrics pipeline (``SimulatedMonitoring``, or a
    class's view of it, ``app/simulate/classes.py``)."""

    @property
    def epoch_s(self) -> float: ...
    @property
    def sync_version(self) -> int: ...
    @property
    def hot_changed(self) -> set[int]: ...
    @property
    def node_version(self) -> IntArray: ...
    def annotations(self, node: int) -> Mapping[str, str]: ...


class LoadFilter:
    """The extender's view: ``evaluate_node`` per node, re-run only when its inputs change.

    A node's result is reused until its annotations are rewritten, its ``unsampled``
    usage changes, or the clock reaches the result's ``recheck_at_s``. As the extender
    does, it is taken as ``assess`` of the node's ``measure``, which is kept until the
    annotations change or its ``changes_at_s`` (``evaluate_node`` is exactly that).
    """

    def __init__(
        self,
        policy: Policy,
        pipeline: Monitoring,
        nodes: int,
        estimate: UnsampledUsage | None = None,
        node_labels: Sequence[Mapping[str, str]] = (),
    ) -> None:
        self.policy = policy
        # Each node's policy: its node pool's limits (app/policy/pools.py), resolved once.
        self.policies = [policy] * nodes
        # Per node, whether it is in a node pool, where a pod passes only if its own
        # estimate fits the pool's limits (``Scheduler``); None: the policy has no pools.
        self.in_pool: BoolArray | None = None
        if policy.spec.node_pools:
            self.policies = [policy.for_node(labels) for labels in node_labels]
            pools = [policy.node_pools.match(labels).pool for labels in node_labels]
            self.in_pool = np.array([pool is not None for pool in pools], dtype=np.bool_)
        self._pipeline = pipeline
        self._estimate = estimate
        self.passes = np.ones(nodes, dtype=np.bool_)
        self.extender_score = np.zeros(nodes, dtype=np.int64)
        self.preferable = np.zeros(nodes, dtype=np.bool_)  # app.load.prioritize.can_be_preferred
        # app.load.prioritize.limit_room, fractions of allocatable (inf: no limit applies)
        self.room_cpu = np.full(nodes, math.inf)
        self.room_memory = np.full(nodes, math.inf)
        self.score = np.zeros(nodes, dtype=np.int64)  # 0..100, hot value applied
        self._recheck_at_s = np.full(nodes, -math.inf)
        # At most the earliest recheck time: until then no node is due, and the search
        # for due nodes (over every node, for every pod) is left out.
        self._earliest_recheck_s = -math.inf
        self._seen_sync_version = -1
        self.loads: list[NodeLoad | None] = [None] * nodes
        # Nodes evaluated since the extender's answer last read them (``ExtenderTerms``),
        # and since the scheduler last ranked them (``Scheduler``).
        self.evaluated: set[int] = set()
        self.rescored: set[int] = set()
        # Per node, its last Measurement, with the annotations' version and the instant
        # it was taken: the same until the annotations change or its changes_at_s; and
        # its ``freshest_sample_s``, which the burst estimate asks at every evaluation.
        self._measured: list[tuple[int, float, Measurement, float | None] | None] = [
            None
        ] * nodes
        # Per node, what its load in ``loads`` was assessed from.
        self._assessed: list[tuple[Measurement, Mapping[str, float] | None] | None] = [
            None
        ] * nodes
        self.evaluations = 0

    def now_s(self, t_s: float) -> float:
        return self._pipeline.epoch_s + t_s

    def take_rescored(self) -> set[int]:
        """The nodes evaluated since the scheduler last asked (``Scheduler`` ranks them
        again): whatever changes a node's arrays evaluates it."""
        rescored, self.rescored = self.rescored, set()
        return rescored

    def refresh(self, t_s: float) -> None:
        pipeline = self._pipeline
        now_s = self.now_s(t_s)
        # Always asked, so that the estimate has seen every binding before it answers.
        changed = self._estimate.changed_nodes(t_s) if self._estimate is not None else set()
        searched = True
        if pipeline.sync_version != self._seen_sync_version:
            self._seen_sync_version = pipeline.sync_version
            dirty: set[int] = set(range(len(self.passes)))
        elif now_s >= self._earliest_recheck_s:
            dirty = set(np.flatnonzero(self._recheck_at_s <= now_s).tolist())
            dirty |= pipeline.hot_changed | changed
        else:
            searched = False
            dirty = pipeline.hot_changed | changed
        pipeline.hot_changed.clear()
        for node in dirty:
            self._evaluate(node, t_s)
        if searched:
            self._earliest_recheck_s = float(np.fmin.reduce(self._recheck_at_s, initial=math.inf))

    def load_of(self, node: int, t_s: float) -> NodeLoad:
        """What the production load model says about the node at ``t_s``, uncached."""
        unsampled = self._estimate.unsampled(node, t_s) if self._estimate is not None else None
        return evaluate_node(
            self._pipeline.annotations(node), self.policies[node], self.now_s(t_s), unsampled
        )

    def _measurement(self, node: int, now_s: float) -> tuple[Measurement, float | None]:
        """``measure`` of the node's annotations at ``now_s``, and its freshest sample:
        kept, as the extender keeps it, from when it was taken until its
        ``changes_at_s`` or an annotation's rewrite."""
        version: int = self._pipeline.node_version.item(node)
        kept = self._measured[node]
        if kept is not None and kept[0] == version and kept[1] <= now_s < kept[2].changes_at_s:
            return kept[2], kept[3]
        measurement = measure(self._pipeline.annotations(node), self.policies[node], now_s)
        freshest_s = measurement.freshest_sample_s()
        self._measured[node] = (version, now_s, measurement, freshest_s)
        return measurement, freshest_s

    def _evaluate(self, node: int, t_s: float) -> None:
        """``load_of``, on the node's kept Measurement."""
        now_s = self.now_s(t_s)
        measurement, freshest_s = self._measurement(node, now_s)
        # No fresh sample: no pod counts as unsampled (``app.load.estimate.counts``).
        unsampled = (
            self._estimate.unsampled_after(node, t_s, freshest_s)
            if self._estimate is not None and freshest_s is not None
            else None
        )
        self.evaluations += 1  # as the extender would: a kept answer counts too
        # The load is assess of these two alone: with the same Measurement kept and the
        # same usage unsampled (most often none: a node without a fresh sample counts no
        # pod), it is the one already held, and so is every array below (its recheck
        # time too, which ``_earliest_recheck_s`` is no later than already).
        unsampled = unsampled or None  # assess reads an empty one as none
        assessed = self._assessed[node]
        if assessed is not None and assessed[0] is measurement and assessed[1] == unsampled:
            return
        self._assessed[node] = (measurement, unsampled)
        verdict = node_verdict(measurement, unsampled, self.policies[node])
        load = verdict.load
        self.evaluated.add(node)
        self.rescored.add(node)
        self.loads[node] = load
        self.passes[node] = verdict.passes
        self.extender_score[node] = load.extender_score
        self.preferable[node] = verdict.preferable
        self.room_cpu[node] = verdict.room.get("cpu", math.inf)
        self.room_memory[node] = verdict.room.get("memory", math.inf)
        self.score[node] = load.score
        self._recheck_at_s[node] = load.recheck_at_s
        self._earliest_recheck_s = min(self._earliest_recheck_s, load.recheck_at_s)


class _Afresh(Enum):
    AFRESH = "afresh"


_AFRESH = _Afresh.AFRESH
# Above this many nodes changed since the last pod (a sync, a hot-value refresh), the
# ranks are made again over whole arrays, which is then cheaper.
_FEW = 16


class BestNodes:
    """Every node's rank for the last pod (its score, or ``_LOWEST`` where infeasible),
    the best rank and the nodes tied at it, kept for the next pod: a binding changes
    one node's rank, not a thousand, so the ties are brought up to date node by node
    rather than found again over every node.

    ``tied`` lists the nodes at ``best`` in node order, as ``(ranks == best).nonzero()``
    lists them, so a draw among them picks the node a draw over the array would;
    ``feasible`` counts the feasible nodes. ``best`` is ``_LOWEST`` (and ``tied``
    empty) where no node ranks above it."""

    def __init__(self, ranks: IntArray, feasible: BoolArray) -> None:
        self._ranks = ranks  # owned: changed in place
        self._feasible = feasible.copy()
        self.feasible = int(np.count_nonzero(feasible))
        self.best = _LOWEST
        self.tied: list[int] = []
        self._find_best()

    def _find_best(self) -> None:
        self.best = int(np.maximum.reduce(self._ranks, initial=_LOWEST))
        self.tied = (self._ranks == self.best).nonzero()[0].tolist() if self.best > _LOWEST else []

    def rank(self, node: int, feasible: bool, rank: int) -> None:
        """The node ranked ``rank`` from now on (``_LOWEST`` where not ``feasible``)."""
        if feasible != self._feasible.item(node):
            self._feasible[node] = feasible
            self.feasible += 1 if feasible else -1
        old: int = self._ranks.item(node)
        if rank == old:
            return
        self._ranks[node] = rank
        if rank > self.best:
            self.best, self.tied = rank, [node]
        elif rank == self.best:  # above _LOWEST: ``old`` was another rank
            bisect.insort(self.tied, node)
        elif old == self.best:
            del self.tied[bisect.bisect_left(self.tied, node)]
            if not self.tied:
                self._find_best()

    def pick(self, draws: IntegerDraws) -> int:
        """One of the nodes tied at the best rank, drawn at random (``best`` > _LOWEST)."""
        return self.tied[draws.integers(len(self.tied))]


@dataclass
class Scheduler:
    """One policy's scheduling step for one pod: filter, score, pick."""

    requests: NodeRequests
    load_filter: LoadFilter | None
    extender_weight: int
    rng: np.random.Generator  # drawn from through ``draws`` alone, which takes it over
    plugin_weight: int = 0  # > 0: the load score counts as a 0..100 plugin at this weight
    # Per node, whether it carries loadaware's PreferNoSchedule taint (the annotator's
    # soft taints); None: no node is ever tainted, TaintToleration adds the same to all.
    soft_tainted: BoolArray | None = None
    # Per node, whether it carries loadaware's second taint, ``loadaware.io/warm``
    # (``app.load.warm_taint``): TaintToleration counts it beside the hot one.
    soft_warm: BoolArray | None = None
    # A class's scheduler (``app/simulate/classes.py``): the load filter passes a node only
    # where the pod's own estimate fits its room under the limits (``app.load.has_room``),
    # so a pod never takes a node past its class's limits; a policy of no class judges
    # the node's usage before the pod, as crane does.
    estimate_filters: bool = False
    # A class's load filter without its limits on its own usage
    # (``app.policy.PodClasses.yielding``): where no node passes the pod under
    # ``load_filter``, the nodes it passes (with the pod's estimate) take the pod.
    yielding: LoadFilter | None = None
    # Without ``estimate_filters``, the nodes in a node pool (``LoadFilter.in_pool``) are
    # judged with the pod's estimate all the same, as the extender judges them; the nodes
    # in none as crane does. None: no node is in a pool.
    _pooled: BoolArray | None = field(default=None, init=False)
    # Choices in which TaintToleration told feasible nodes apart (some tainted, some
    # not); with none, the taints changed nothing and the run is the one without them.
    taint_steered: int = field(default=0, init=False)
    _terms: ExtenderTerms | None = field(default=None, init=False)
    # The last pod's ranks, kept for the next pod where they hold (``BestNodes``).
    _best: BestNodes | None = field(default=None, init=False)
    _ranked_for: PodShape | None = field(default=None, init=False)  # the pod they rank
    draws: IntegerDraws = field(init=False, repr=False)  # ``rng.integers``, made faster

    def __post_init__(self) -> None:
        self.draws = IntegerDraws(self.rng)
        in_pool = None if self.load_filter is None else self.load_filter.in_pool
        if not self.estimate_filters and in_pool is not None and bool(in_pool.any()):
            self._pooled = in_pool
        if self.load_filter is not None and self.plugin_weight == 0:
            self._terms = ExtenderTerms(
                self.load_filter,
                self.requests.allocatable_cpu,
                self.requests.allocatable_memory,
                EXTENDER_SCORE_SCALE * self.extender_weight,
            )

    def forget_ranks(self) -> None:
        """Rank every node afresh for the next pod: another scheduler shares the node
        requests (a class's, ``app/simulate/classes.py``) and takes the changes."""
        self._best = None

    def choose(self, pod: PodShape, workload: int = -1) -> int | None:
        """The node for the next pod of ``pod``'s shape (of scenario workload
        ``workload``, which the topology spread reads), or None: it stays pending."""
        # The nodes whose rank may have changed since the last pod, whatever its shape.
        changed = self.requests.take_unranked()
        if self.load_filter is not None:
            changed |= self.load_filter.take_rescored()
        feasible = self.requests.fits(pod)  # read-only: every step below makes a new one
        scores = self.requests.scores(pod)
        # With no node tainted TaintToleration gives every feasible node the same 100,
        # which changes neither the choice nor ``taint_steered``: left out, it costs nothing.
        tainted = any(
            marks is not None and bool(np.count_nonzero(marks))
            for marks in (self.soft_tainted, self.soft_warm)
        )
        # The spread score moves with every binding of the workload, and its
        # normalization with the fewest and the most: made afresh for each pod.
        spreads = self.requests.spread is not None and self.requests.spread.applies(workload)
        kept = self._best
        if (
            kept is not None
            and (pod is self._ranked_for or pod == self._ranked_for)
            and len(changed) <= _FEW
            and not tainted
            and not spreads
            and not self.estimate_filters
            and self._pooled is None
        ):
            node = self._choose_from_kept(kept, changed, feasible, scores, pod)
            if node is not _AFRESH:
                return node
        self._best = None
        return self._choose_afresh(feasible, scores, pod, tainted, workload if spreads else -1)

    def _choose_afresh(
        self,
        feasible: BoolArray,
        scores: IntArray,
        pod: PodShape,
        tainted: bool,
        spread_workload: int = -1,
    ) -> int | None:
        """Filter, score and pick over every node; the ranks are kept for the next pod
        where no taint, topology spread (of ``spread_workload``, >= 0) or preferred node
        made them this pod's alone."""
        toleration: IntArray | None = None
        if tainted:
            # Scenario pods tolerate neither taint.
            untolerated = np.zeros(len(feasible), dtype=np.int64)
            if self.soft_tainted is not None:
                untolerated += self.soft_tainted
            if self.soft_warm is not None:
                untolerated += self.soft_warm
            toleration = taint_toleration_scores(untolerated, feasible)
            if toleration[feasible].min(initial=MAX_NODE_SCORE) < MAX_NODE_SCORE and (
                toleration.max() == MAX_NODE_SCORE
            ):
                self.taint_steered += 1
        spread: IntArray | None = None
        if spread_workload >= 0:
            assert self.requests.spread is not None
            spread = self.requests.spread.scores(spread_workload, feasible)
        if toleration is not None or spread is not None:
            scores = profile_scores(scores, toleration=toleration, spread=spread)
        every_node_feasible = False
        keep = not tainted and spread is None
        if self.load_filter is not None:
            placeable = feasible
            feasible = feasible & self.load_filter.passes
            if self.estimate_filters:
                feasible = feasible & self._has_room(pod)
                if self.yielding is not None and not feasible.any():
                    yielding = self.yielding
                    feasible = placeable & yielding.passes & self._has_room(pod, yielding)
            elif self._pooled is not None:
                feasible = feasible & (self._has_room(pod) | ~self._pooled)
            if self.plugin_weight > 0:
                scores = scores + self.load_filter.score * self.plugin_weight
            elif asked := int(np.count_nonzero(feasible)):
                scores, preferred = self._with_extender_answer(scores, feasible, asked, pod)
                every_node_feasible = asked == len(feasible)
                keep = keep and not preferred
        # The best feasible score, ties drawn at random: the infeasible nodes ranked at
        # the lowest int64, below every score but one made of no allocatable, one pass
        # finds both; only that ``best`` leaves it unclear what is feasible. With every
        # node feasible the ranks are the scores themselves (a new array: kept as it is).
        ranked = scores if every_node_feasible else np.where(feasible, scores, _LOWEST)
        if keep:
            best_nodes = BestNodes(ranked, feasible)
            if best_nodes.best > _LOWEST:
                self._best, self._ranked_for = best_nodes, pod
                return best_nodes.pick(self.draws)
        else:
            top = np.maximum.reduce(ranked, initial=_LOWEST)  # ndarray.max, less wrapping
            if top > _LOWEST:
                candidates = (ranked == top).nonzero()[0]
                return int(candidates[self.draws.integers(len(candidates))])
        if np.count_nonzero(feasible):
            best = scores[feasible].max()
            candidates = np.flatnonzero(feasible & (scores == best))
            return int(candidates[self.draws.integers(len(candidates))])
        return None

    def _has_room(self, pod: PodShape, load_filter: LoadFilter | None = None) -> BoolArray:
        """Per node, whether the pod's estimate fits its room under the limits
        (``app.load.has_room`` over every node; no limit on a resource: room), of
        ``load_filter`` (by default the scheduler's)."""
        load_filter = load_filter if load_filter is not None else self.load_filter
        assert load_filter is not None
        requests = self.requests
        with np.errstate(divide="ignore", invalid="ignore"):  # no allocatable: no room
            cpu = pod.estimate_cpu_cores / requests.allocatable_cpu <= load_filter.room_cpu
            memory = pod.estimate_memory_bytes / requests.allocatable_memory
            return cpu & (memory <= load_filter.room_memory)

    def _choose_from_kept(
        self,
        kept: BestNodes,
        changed: set[int],
        feasible: BoolArray,
        scores: IntArray,
        pod: PodShape,
    ) -> int | _Afresh | None:
        """``_choose_afresh`` on the last pod's ranks, re-ranking the ``changed`` nodes
        alone: each rank is what ``_choose_afresh`` would rank the node at, and the
        random draws are the same, in the same order. ``_AFRESH`` (before any draw):
        this pod's ranks are not the kept ones, choose afresh."""
        load_filter = self.load_filter
        if load_filter is None:
            for node in changed:
                fits = feasible.item(node)
                kept.rank(node, fits, scores.item(node) if fits else _LOWEST)
        elif self.plugin_weight > 0:
            passes, load_score, weight = load_filter.passes, load_filter.score, self.plugin_weight
            for node in changed:
                fits = feasible.item(node) and passes.item(node)
                rank = scores.item(node) + load_score.item(node) * weight if fits else _LOWEST
                kept.rank(node, fits, rank)
        else:
            terms = self._terms
            assert terms is not None
            terms.follow((pod.estimate_cpu_cores, pod.estimate_memory_bytes))
            if terms.preferable_nodes:
                return _AFRESH  # the answer lifts a preferred node: this pod's alone
            plain, passes = terms.plain(PLAIN_MAX_SCORE), load_filter.passes
            for node in changed:
                fits = feasible.item(node) and passes.item(node)
                kept.rank(node, fits, scores.item(node) + plain.item(node) if fits else _LOWEST)
        if kept.best == _LOWEST:  # no feasible node, or only ones ranked at _LOWEST
            return None if kept.feasible == 0 else _AFRESH
        if load_filter is not None and self.plugin_weight == 0:
            self.draws.integers(kept.feasible)  # the request's first node, not needed here
        return kept.pick(self.draws)

    def _with_extender_answer(
        self, scores: IntArray, feasible: BoolArray, asked: int, pod: PodShape
    ) -> tuple[IntArray, bool]:
        """The scores with the extender's prioritize answer added (``host_priorities`` times
        10 x ``extenderWeight``), for the ``feasible`` nodes it is asked about (``asked``
        of them): the others are ranked below every feasible node whatever they are
        given. And whether the answer lifted a preferred node."""
        terms = self._terms
        assert terms is not None
        # The request lists the asked nodes in node order from the k-th on, then wraps:
        # drawn for every pod, and looked up only where some node can be preferred.
        k = self.draws.integers(asked)
        terms.follow((pod.estimate_cpu_cores, pod.estimate_memory_bytes))
        best = -1  # no node can be preferred, so none of those asked (most often)
        if terms.preferable_nodes:
            best = terms.preferred(feasible.nonzero()[0], k)
        extender_scores = terms.extender_scores
        cap = PLAIN_MAX_SCORE if best < 0 else plain_priority(int(extender_scores[best]))
        answered = scores + terms.plain(cap)
        if best >= 0:
            answered[best] = scores[best] + terms.factor * preferred_priority(
                int(extender_scores[best])
            )
        return answered, best >= 0


class ExtenderView(Protocol):
    """What the extender's answer reads of the load filter (``LoadFilter``)."""

    extender_score: IntArray
    preferable: BoolArray
    room_cpu: FloatArray
    room_memory: FloatArray
    evaluated: set[int]


class ExtenderTerms:
    """What the extender's answer (``host_priorities``) is made of, per node, kept between
    pods: each binding re-evaluates one node, and pods come in waves of one estimate.

    ``can_rank`` is a node's extender score where it can be preferred (-1 elsewhere,
    below every score ``host_priorities`` counts), ``roomy_rank`` that where the pod's
    estimate fits its room too; ``plain`` each node's answer capped below the preferred
    one's, times the factor. Each is made again for the nodes the load filter evaluated
    since (``LoadFilter.evaluated``), or whole when the estimate or the cap changes.
    ``preferable_nodes`` counts the nodes ranked in ``can_rank`` (``roomy_rank`` ranks
    some of those): with none, no node is preferred, whichever are asked.
    """

    # Above this many nodes re-evaluated at once (a sync), whole arrays are cheaper.
    _FEW = 16

    def __init__(
        self, view: ExtenderView, allocatable_cpu: FloatArray, allocatable_memory: FloatArray,
        factor: int,
    ) -> None:  # fmt: skip
        self._view = view
        self._allocatable = (allocatable_cpu, allocatable_memory)
        self.factor = factor
        self.extender_scores = view.extender_score
        nodes = len(allocatable_cpu)
        self.can_rank = np.full(nodes, -1, dtype=np.int64)
        self.roomy_rank = np.full(nodes, -1, dtype=np.int64)
        self.preferable_nodes = 0
        self._estimate: tuple[float, float] | None = None
        self._fractions = (np.zeros(nodes), np.zeros(nodes))  # the estimate / allocatable
        self._cap: int | None = None
        self._plain = np.zeros(nodes, dtype=np.int64)
        self._plain_stale: set[int] = set()

    def follow(self, estimate: tuple[float, float]) -> None:
        """The ranks for a pod of this estimate (cores, bytes), after the latest refresh."""
        view = self._view
        evaluated = view.evaluated
        if estimate != self._estimate:
            cpu, memory = self._allocatable
            self._estimate = estimate
            self._fractions = (estimate[0] / cpu, estimate[1] / memory)
            self._rank_all()
        elif len(evaluated) > self._FEW:
            self._rank_all()
        else:
            cpu_fraction, memory_fraction = self._fractions
            scores, preferable = view.extender_score, view.preferable
            for node in evaluated:
                score = int(scores[node])
                can = score >= 0 and bool(preferable[node])
                if can != (self.can_rank[node] >= 0):
                    self.preferable_nodes += 1 if can else -1
                self.can_rank[node] = score if can else -1
                roomy = (
                    cpu_fraction[node] <= view.room_cpu[node]
                    and memory_fraction[node] <= view.room_memory[node]
                )
                self.roomy_rank[node] = score if can and roomy else -1
        self._plain_stale |= evaluated
        evaluated.clear()

    def _rank_all(self) -> None:
        view = self._view
        cpu_fraction, memory_fraction = self._fractions
        scores = view.extender_score
        can = view.preferable & (scores >= 0)  # host_priorities counts a negative as none
        roomy = (cpu_fraction <= view.room_cpu) & (memory_fraction <= view.room_memory)
        self.can_rank = np.where(can, scores, -1)
        self.preferable_nodes = int(np.count_nonzero(can))
        self.roomy_rank = np.where(can & roomy, scores, -1)

    def preferred(self, asked: IntArray, k: int) -> int:
        """The node ``app.load.prioritize.preferred_position`` prefers (-1: none), of the
        ``asked`` nodes (in node order) listed as kube-scheduler lists them: from the
        ``k``-th on, then from the first."""
        listed = np.concatenate((asked[k:], asked[:k]))
        position = preferred_position(
            self.extender_scores[listed].tolist(),
            (self.can_rank[listed] >= 0).tolist(),
            (self.roomy_rank[listed] >= 0).tolist(),
        )
        return int(listed[position]) if position >= 0 else -1

    def plain(self, cap: int) -> IntArray:
        """Every node's score capped at ``cap``, times the factor (read only)."""
        scores = self._view.extender_score
        if cap != self._cap or len(self._plain_stale) > self._FEW:
            self._plain = np.minimum(scores, cap) * self.factor
            self._cap = cap
        else:
            for node in self._plain_stale:
                self._plain[node] = min(int(scores[node]), cap) * self.factor
        self._plain_stale.clear()
        return self._plain

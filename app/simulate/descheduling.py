"""The ``+desched`` policies: the descheduler's real planner, run on the simulated cluster.

Every descheduler ``interval`` the adapter does what ``app/descheduler/descheduler.py`` does
around ``app.rebalance.plan``, with the simulator's state in place of the caches:

* **nodes**: a ``NodeInfo`` per node, with the annotations the simulated annotator
  wrote (the same text the planner reads in production), its allocatable, and
  loadaware's soft taint where the simulated annotator keeps one (``default+taints``);
* **the scheduler beside it** (``scheduler``): the policy's, not the scenario's
  (``PolicyPlan.steering``): ``requests`` beside ``default``, ``soft-taints`` beside
  ``default+taints``, ``extender`` beside crane and loadaware;
* **pods**: a ``PodInfo`` per bound pod, and per pod pending at the round (created,
  not bound yet: Pending, on no node; the planner counts where each would go):
  namespace ``default``, named
  ``<workload>-<slot>-<generation>`` (a recreated pod is a new pod with a new UID),
  owned by the ReplicaSet ``<workload>-sim`` (so ``workload_of`` names the
  Deployment ``<workload>``), labelled ``app: <workload>``, Running and Ready when bound;
* **pod usage**, as the descheduler's default queries see it: CPU is
  ``rate(container_cpu_usage_seconds_total[5m])``, the mean of the pod's real use
  over the last 5 minutes it ran (only since it was bound; a pod with fewer than two
  scrapes has no series yet, and the planner then uses its requests, as in
  production); memory is the working set at the last scrape. Usage is what the pod
  wanted, not capped by its node's capacity: the simple, documented choice;
* **PDBs**: one ``PodDisruptionBudgetView`` per workload with a ``pdb``, its
  ``disruptionsAllowed`` computed as the disruption controller does (running pods
  minus those that must stay);
* **recent evictions**: an ``EvictionRecord`` per eviction this adapter made, within
  ``max(settleTime, workloadCooldown) + interval``, as the loop rebuilds from Events;
* **debounce rounds**: counted by the descheduler's own rule,
  ``app.rebalance.debounce`` (``previous_hot_rounds`` before the plan,
  ``record_hot_rounds`` after it), on the simulated clock; the loop keeps the counts in
  its memory ConfigMap, the adapter in a dict (a simulation never restarts).

Each planned eviction is then made by the cluster, in the plan's order: the pod is
recreated pending and the policy's own scheduler places it. An eviction the API server
would refuse (the PDB allows no disruption at that moment) is counted as a PDB
violation: the planner must never propose one.
Every plan is kept in ``plans`` so that tests can tie each eviction to the planner.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from app.load import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SOFT_TAINT_VALUE, WARM_TAINT_KEY
from app.objects import (
    EvictionRecord,
    LabelSelector,
    NodeInfo,
    PodDisruptionBudgetView,
    PodInfo,
    Resources,
    Taint,
)
from app.rebalance import (
    ClusterView,
    EvictionPlan,
    plan,
    previous_hot_rounds,
    record_hot_rounds,
    state_window_s,
)
from app.simulate.gains import EvictionGains, MoveMemory
from app.simulate.pod_identity import NAMESPACE, TEMPLATE_HASH, owner_of

if TYPE_CHECKING:
    from app.simulate.cluster import Autoscaler, ClusterState
    from app.simulate.recording_rules import SimulatedMonitoring
    from app.simulate.soft_taints import SimulatedSoftTaints

RATE_WINDOW_S = 5 * 60.0
# The taint the simulated annotator keeps (``soft_taints``), as the Node carries it.
SOFT_TAINT = Taint(SOFT_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)
WARM_TAINT = Taint(WARM_TAINT_KEY, SOFT_TAINT_VALUE, SOFT_TAINT_EFFECT)
# A node's taints by its code: 1 for the hot taint, 2 for the warm one (both: 3).
_TAINTS_OF: tuple[tuple[Taint, ...], ...] = (
    (),
    (SOFT_TAINT,),
    (WARM_TAINT,),
    (SOFT_TAINT, WARM_TAINT),
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PlanRecord:
    """One planner call: when, and the plan it returned."""

    t_s: float
    plan: EvictionPlan


class PlannerRebalancer:
    """``Rebalancer`` that asks ``app.rebalance.plan`` which pods to evict."""

    def __init__(
        self,
        cluster: ClusterState,
        soft_taints: SimulatedSoftTaints | None = None,
        autoscaler: Autoscaler | None = None,
    ) -> None:
        """``soft_taints``: the simulated annotator's, which the view's nodes carry;
        ``autoscaler``: what runs the nodes (read by consolidation)."""
        self._cluster = cluster
        self._soft_taints = soft_taints
        self._autoscaler = autoscaler
        # The policy's scheduler, not the scenario's file, says what places replacements.
        config = cluster.scenario.descheduler_config()
        self.config = config.model_copy(update={"scheduler": cluster.plan.steering})
        self.plans: list[PlanRecord] = []
        # Judges each round's evictions at the first round settleTime after it, on the
        # cluster as the last step left it (``gains``), into the run's counts.
        self.gains = EvictionGains(
            config.settle_time, cluster.allocatable_cpu, cluster.allocatable_memory
        )
        self._hot_rounds: dict[str, tuple[int, float]] = {}  # as the memory ConfigMap keeps them
        self.moves = MoveMemory()  # for the planner's back-off (app/rebalance/backoff.py)
        self._records: list[EvictionRecord] = []
        self._generation = np.zeros(cluster.usage.slots, dtype=np.int64)
        # The view, kept up to date between rounds rather than rebuilt:
        self._nodes: dict[str, NodeInfo] = {}
        self._node_tainted = np.zeros(len(cluster.node_names), dtype=np.int64)
        self._pods: dict[str, PodInfo] = {}
        self._key_of: dict[int, str] = {}  # bound slot -> its pod's key
        self._slot_of: dict[str, int] = {}
        self._placements_seen = 0
        self._evictions_seen = 0
        self._deletions_seen = 0
        self._rounds = 0
        self._touched_in: dict[int, int] = {}  # slot -> the last round a record touched it
        # The rate window's real usage per slot (cores, bytes), one entry per step.
        self._usage_by_step: dict[int, tuple[FloatArray, FloatArray]] = {}
        # Each node's own annotations (the scenario's node group's), beside the load.
        self._node_annotations = [
            group.annotations for group in cluster.scenario.nodes for _ in group.node_names
        ]
        self._node_labels = cluster.scenario.node_labels  # what node pools select
        workloads = cluster.scenario.workloads
        self._requests = [w.pod_requests_and_limits[0] for w in workloads]
        self._limits = [w.pod_requests_and_limits[1] for w in workloads]
        self._allocatable = [
            Resources(cpu, memory)
            for cpu, memory in zip(
                cluster.allocatable_cpu.tolist(), cluster.allocatable_memory.tolist(), strict=True
            )
        ]

    # -- the round -------------------------------------------------------------------
    def evictions(self, t_s: float) -> Sequence[int]:
        cluster = self._cluster
        now_s = cluster.pipeline.epoch_s + t_s
        # The last step's demand, where every pod is bound since (evictions come first).
        last_step = round(t_s / cluster.scenario.step_s) - 1
        self.gains.step(t_s, cluster.node_of, *self._demand(last_step))
        self.gains.count_into(cluster.run)
        self.moves.collect(self.gains, now_s)
        view, slot_of = self._view(t_s, now_s)
        interval_s = self.config.interval
        counts = previous_hot_rounds(self._hot_rounds, now_s, interval_s)
        the_plan = plan(view, self.config, cluster.policy, now_s, counts)
        self._hot_rounds = record_hot_rounds(
            self._hot_rounds, the_plan.node_classes, now_s, interval_s
        )
        self.plans.append(PlanRecord(t_s, the_plan))
        slots = []
        for eviction in the_plan.evictions:
            slot = slot_of[eviction.pod.key]
            slots.append(slot)
            node = int(cluster.node_of[slot])
            self.gains.evicted(slot, node, t_s, cluster.node_of)
            self.moves.made(node, t_s, now_s, eviction, the_plan)
            self._generation[slot] += 1  # the controller's replacement is a new pod
            record = eviction.record(now_s)
            self._records.append(record)
            if self._soft_taints is not None:  # the annotator reads the descheduler's record
                self._soft_taints.drained.evicted(record)
        return slots

    def _view(self, t_s: float, now_s: float) -> tuple[ClusterView, dict[str, int]]:
        self._update_nodes()
        self._update_pods()
        since_s = now_s - state_window_s(self.config)
        self._records = [r for r in self._records if r.evicted_at_s >= since_s]
        view = ClusterView(
            nodes=self._nodes,
            pods=_Pods(lambda: self._with_pending(t_s)),
            pod_usage=self._pod_usage(t_s),
            budgets=_Budgets(lambda: budgets_now(self._cluster, t_s)),
            recent_evictions=tuple(self._records),
            moves=tuple(self.moves.judged),
        )
        return view, self._slot_of  # up to date once the planner has looked at a pod

    # -- the pieces of the view ------------------------------------------------------
    def _update_nodes(self) -> None:
        """A new ``NodeInfo`` for each node whose soft taint the simulated annotator set
        or removed (and for each node, in the first round). Its annotations are the
        node's as they are when the planner reads them (``_Annotations``): rewritten
        annotations need no new ``NodeInfo``."""
        cluster = self._cluster
        soft_taints = self._soft_taints
        tainted = soft_taints.codes() if soft_taints is not None else self._node_tainted
        changed: Iterable[int]
        if self._nodes:
            changed = np.flatnonzero(tainted != self._node_tainted).tolist()
        else:
            changed = range(len(cluster.node_names))
        names, pipeline = cluster.node_names, cluster.pipeline
        nodes, allocatable, is_tainted = self._nodes, self._allocatable, tainted.tolist()
        for i in changed:
            name = names[i]
            nodes[name] = NodeInfo(
                name,
                _Annotations(pipeline, i, self._node_annotations[i]),
                internal_ip=None,
                labels=self._node_labels[i],
                taints=_TAINTS_OF[is_tainted[i]],
                allocatable=allocatable[i],
            )
        self._node_tainted = tainted.copy()

    def _update_pods(self) -> None:
        """Note the pods evicted, bound or deleted since the last round (``_pods_now``
        brings the pods up to date when the planner first looks at them)."""
        run = self._cluster.run
        self._rounds += 1
        touched = self._touched_in
        for records in (
            run.evictions[self._evictions_seen :],
            run.placements[self._placements_seen :],
            run.deletions[self._deletions_seen :],
        ):
            for record in records:
                touched[record.slot] = self._rounds
        self._deletions_seen = len(run.deletions)
        self._evictions_seen = len(run.evictions)
        self._placements_seen = len(run.placements)

    def _pods_now(self) -> dict[str, PodInfo]:
        """The pods, brought up to date: those evicted dropped, those bound since added.

        A round that finds no source never looks at a pod, so the pods are made only
        when the planner first does. The result is the one of updating every round:
        a slot's PodInfo is made of its state now (its generation, node and binding
        change only with a record that touches it again), and the map's order is that
        of the rounds each slot was last touched in, by slot within a round."""
        touched = self._touched_in
        if not touched:
            return self._pods
        for slot in sorted(touched, key=lambda slot: (touched[slot], slot)):
            key = self._key_of.pop(slot, None)
            if key is not None:
                del self._pods[key]
                del self._slot_of[key]
            if self._cluster.node_of[slot] >= 0:
                info = self._pod(slot)
                self._pods[info.key] = info
                self._key_of[slot] = info.key
                self._slot_of[info.key] = slot
        touched.clear()
        return self._pods

    def _with_pending(self, t_s: float) -> dict[str, PodInfo]:
        """The bound pods (``_pods_now``) and, after them, the pods pending at ``t_s``
        (created, not bound yet): the descheduler's pod cache lists them too, and the
        planner counts where kube-scheduler would put them (``PendingPods``)."""
        pods = self._pods_now()
        pending = self._cluster.pending(t_s)
        if not len(pending):
            return pods
        return {**pods, **{(info := self._pod(slot)).key: info for slot in pending.tolist()}}

    def _pod(self, slot: int) -> PodInfo:
        """The slot's pod as the API server has it: Running on its node, or Pending."""
        cluster = self._cluster
        workload_index = int(cluster.usage.workload_of[slot])
        workload = cluster.scenario.workloads[workload_index]
        generation = int(self._generation[slot])
        requests, limits = self._requests[workload_index], self._limits[workload_index]
        node = int(cluster.node_of[slot])
        return PodInfo(
            namespace=NAMESPACE,
            name=f"{workload.name}-{slot}-{generation}",
            uid=f"{slot}-{generation}",
            node_name=cluster.node_names[node] if node >= 0 else None,
            phase="Running" if node >= 0 else "Pending",
            ready=node >= 0,
            terminating=False,
            created_s=cluster.pipeline.epoch_s + float(cluster.created_at_s[slot]),
            priority=workload.priority,
            qos=_qos(requests, limits),
            requests=requests,
            limits=limits,
            labels={**workload.labels, "app": workload.name, "pod-template-hash": TEMPLATE_HASH},
            annotations=workload.annotations,
            owner=owner_of(workload.kind, workload.name),
            bound_at_s=cluster.pipeline.epoch_s + float(cluster.bound_at_s[slot])
            if node >= 0
            else None,
        )

    def _pod_usage(self, t_s: float) -> Mapping[str, Resources]:
        """Per pod: mean CPU over the rate window since it was bound, last memory; worked
        out when the planner first asks (a round without a source never does, and each
        step's usage is a function of the step alone, drawn whenever)."""
        cluster = self._cluster
        step_s = cluster.scenario.step_s
        steps = max(1, round(RATE_WINDOW_S / step_s))
        now_step = round(t_s / step_s)
        window = range(max(0, now_step - steps), now_step)
        if not window:
            return {}
        return _PodUsage(self._pods_now, self._slot_of, lambda: self._series(t_s, window))

    def _demand(self, step: int) -> tuple[FloatArray, FloatArray]:
        """Each slot's demand at ``step`` (cores, bytes), drawn once (``_series``)."""
        if step not in self._usage_by_step:
            self._usage_by_step[step] = self._cluster.usage.at(
                step, step * self._cluster.scenario.step_s
            )
        return self._usage_by_step[step]

    def _series(
        self, t_s: float, window: range
    ) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
        """Per slot: whether its pod has a series, its mean CPU and its last memory."""
        cluster = self._cluster
        step_s = cluster.scenario.step_s
        for step in window:  # each step's usage is drawn once, not once per round
            if step not in self._usage_by_step:
                self._usage_by_step[step] = cluster.usage.at(step, step * step_s)
        self._usage_by_step = {s: u for s, u in self._usage_by_step.items() if s in window}
        cpu = np.stack([self._usage_by_step[s][0] for s in window])
        starts_s = np.array([s * step_s for s in window])[:, np.newaxis]
        running = cluster.bound_at_s[np.newaxis, :] <= starts_s  # NaN (not bound): False
        cpu_sum = np.sum(np.where(running, cpu, 0.0), axis=0)
        cpu_steps = np.sum(running, axis=0)
        memory = self._usage_by_step[window[-1]][1]  # the working set at the last scrape
        scrape_s = cluster.scenario.metrics.scrape_interval_s
        has_series = (cluster.bound_at_s <= t_s - 2 * scrape_s) & (cpu_steps > 0)
        mean_cpu = np.where(has_series, cpu_sum / np.maximum(cpu_steps, 1), 0.0)
        return has_series, mean_cpu, memory


class _Annotations(Mapping[str, str]):
    """A node's annotations as the simulated annotator keeps them at the moment they
    are read (``SimulatedMonitoring.annotations``, the same dict while the node is not
    rewritten). The planner reads them within one ``plan`` call, on one state, and
    keeps no node past it: the same as a snapshot made as the round began, without
    a ``NodeInfo`` remade per node and round."""

    __slots__ = ("_monitoring", "_node", "_own")

    def __init__(
        self, monitoring: SimulatedMonitoring, node: int, own: Mapping[str, str]
    ) -> None:
        self._monitoring = monitoring
        self._node = node
        self._own = own  # the node's own (the scenario's), never the load metrics'

    def __getitem__(self, key: str) -> str:
        text = self.get(key)
        if text is None:
            raise KeyError(key)
        return str(text)

    def get(self, key: str, default: Any = None) -> Any:
        """One annotation, made alone (``SimulatedMonitoring.annotation``): the planner
        reads two of every node each round, and a node's whole map is never read."""
        text = self._monitoring.annotation(self._node, key)
        if text is None:
            text = self._own.get(key)
        return default if text is None else text

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter({**self._own, **self._monitoring.annotations(self._node)})

    def __len__(self) -> int:
        return len({**self._own, **self._monitoring.annotations(self._node)})


class _Pods(Mapping[str, PodInfo]):
    """The view's pods, made up to date on the planner's first look (``_pods_now``)."""

    def __init__(self, pods_now: Callable[[], dict[str, PodInfo]]) -> None:
        self._pods_now = pods_now
        self._pods: dict[str, PodInfo] | None = None

    @property
    def _all(self) -> dict[str, PodInfo]:
        if self._pods is None:
            self._pods = self._pods_now()
        return self._pods

    def __getitem__(self, key: str) -> PodInfo:
        return self._all[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: object) -> bool:
        return key in self._all

    def get(self, key: str, default: Any = None) -> Any:
        return self._all.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._all.keys()

    def values(self) -> ValuesView[PodInfo]:
        return self._all.values()

    def items(self) -> ItemsView[str, PodInfo]:
        return self._all.items()


class _Budgets(Sequence[PodDisruptionBudgetView]):
    """The view's PDBs, made on the planner's first look: a round that finds no source
    and destinations never reads them (``plan`` stops before its ``RunBudget``), and a
    round is one ``plan`` call on one state, so when they are made does not matter."""

    def __init__(self, make: Callable[[], tuple[PodDisruptionBudgetView, ...]]) -> None:
        self._make = make
        self._budgets: tuple[PodDisruptionBudgetView, ...] | None = None

    @property
    def _all(self) -> tuple[PodDisruptionBudgetView, ...]:
        if self._budgets is None:
            self._budgets = self._make()
        return self._budgets

    @overload
    def __getitem__(self, index: int) -> PodDisruptionBudgetView: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[PodDisruptionBudgetView]: ...

    def __getitem__(
        self, index: int | slice
    ) -> PodDisruptionBudgetView | Sequence[PodDisruptionBudgetView]:
        return self._all[index]

    def __iter__(self) -> Iterator[PodDisruptionBudgetView]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)


class _PodUsage(Mapping[str, Resources]):
    """Pod key -> usage, for the pods with a series; made only for the pods looked up
    (the planner asks about the pods on source nodes, not about every pod)."""

    def __init__(
        self,
        pods_now: Callable[[], object],
        slot_of: Mapping[str, int],
        series: Callable[[], tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]],
    ) -> None:
        self._pods_now = pods_now  # brings slot_of up to date
        self._slot_of = slot_of
        self._series = series  # (has a series, mean CPU cores, memory bytes) per slot
        self._made: tuple[npt.NDArray[np.bool_], FloatArray, FloatArray] | None = None

    def _per_slot(self) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
        self._pods_now()
        if self._made is None:
            self._made = self._series()
        return self._made

    def __getitem__(self, key: str) -> Resources:
        usage = self._usage(key)
        if usage is None:
            raise KeyError(key)
        return usage

    def get(self, key: str, default: Any = None) -> Any:
        """The planner asks each pod on a source this way: no KeyError raised and caught
        for every pod without a series yet."""
        usage = self._usage(key)
        return default if usage is None else usage

    def _usage(self, key: str) -> Resources | None:
        has_series, cpu_cores, memory_bytes = self._per_slot()
        slot = self._slot_of.get(key)
        if slot is None or not has_series[slot]:
            return None
        return Resources(float(cpu_cores[slot]), float(memory_bytes[slot]))

    def __iter__(self) -> Iterator[str]:
        has_series = self._per_slot()[0]
        return (key for key, slot in self._slot_of.items() if has_series[slot])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def budgets_now(cluster: ClusterState, t_s: float) -> tuple[PodDisruptionBudgetView, ...]:
    """Each PDB's ``disruptionsAllowed`` now: made when the planner first reads the
    budgets (``_Budgets``), within this round's ``plan`` call, on the same state."""
    views = []
    for index, workload in enumerate(cluster.scenario.workloads):
        allowed = cluster.disruptions_allowed(index, t_s)
        if allowed is None:
            continue
        views.append(
            PodDisruptionBudgetView(
                namespace=NAMESPACE,
                name=workload.name,
                selector=LabelSelector(match_labels={"app": workload.name}),
                disruptions_allowed=allowed,
            )
        )
    return tuple(views)


def _qos(requests: Resources, limits: Resources) -> str:
    if requests == Resources() and limits == Resources():
        return "BestEffort"
    if requests == limits:
        return "Guaranteed"
    return "Burstable"

"""Classes of pods in the simulator (``app/policy/classes.py``): the annotator's usage
by class, and what each class's scheduler reads.

* ``SimulatedClassUsage`` is the annotator's per-class publishing: every shortest sync
  period, per node and class, what the class's pods used over the last 5 minutes (CPU,
  as the per-pod ``rate(...[5m])`` reads it; memory at the last step, as the working
  set), a fraction of allocatable, written as ``loadaware.io/class-usage.<class>.<r>``.
  It reads what each pod *got* of its CPU (``contention.cpu_got``), as cAdvisor does.
* ``ClassMonitoring`` is a class's view of the metrics pipeline: the node's annotations
  with the class usages read in (``app.load.class_annotations``), versions that change
  when either does, and hot-value changes of its own.
* ``SharedChanges`` hands each class's load filter the nodes the burst estimate changed
  (``UnsampledUsage.changed_nodes`` answers each change once).

A pod's class is its workload's, by its ``priority`` and ``labels``; the ``loadaware``
policies judge it by its class's policy (``cluster.SimulatedCluster``), ``default``,
``crane`` and the soft taints ignore classes (the taints are one per node, not per pod).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from app.load import PlacedPod, class_annotations, format_usage
from app.policy import PodClasses, Policy, class_usage_key, pod_classes
from app.simulate.contention import Binding
from app.simulate.profiles import SlotUsage
from app.simulate.recording_rules import SimulatedMonitoring, is_due
from app.simulate.scenario import Scenario
from app.simulate.scheduling import LoadFilter, NodeRequests, Scheduler, UnsampledUsage


class MeasuredRun(Protocol):
    """What ``class_measures`` reads of a run (``cluster.Run``)."""

    scenario: Scenario
    throttled_core_s_by_workload: FloatArray | None
    pending_steps_by_workload: IntArray | None

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# The per-pod CPU query is a 5-minute rate.
RATE_WINDOW_S = 300.0


def workload_classes(
    classes: PodClasses, workloads: Sequence[tuple[int, Mapping[str, str]]]
) -> list[str | None]:
    """Each workload's class, from its (priority, labels)."""
    return [classes.class_of(priority, labels) for priority, labels in workloads]


@dataclass(frozen=True, slots=True)
class ClassMeasures:
    """What one class's pods went through in a run (``SimulatedCluster(by_workload=True)``)."""

    throttled_cpu_minutes: float  # core-minutes its pods asked for and did not get
    pending_pod_minutes: float  # its pods waiting for a node, summed over time


def class_measures(classes_of: Scenario, run: MeasuredRun, name: str) -> ClassMeasures:
    """The measures of class ``name``, as ``classes_of``'s policy draws the classes (a run
    of the same scenario without classes is measured by the classes it would have had)."""
    classes = pod_classes(classes_of.scheduling_policy())
    throttled, pending = run.throttled_core_s_by_workload, run.pending_steps_by_workload
    if throttled is None or pending is None:
        raise ValueError("the run was not measured by workload: SimulatedCluster(by_workload=True)")
    minutes = pod_minutes = 0.0
    step_min = run.scenario.step_s / 60.0
    for index, workload in enumerate(classes_of.workloads):
        if classes.class_of(workload.priority, workload.labels) == name:
            minutes += float(throttled[index]) / 60.0
            pod_minutes += float(pending[index]) * step_min
    return ClassMeasures(minutes, pod_minutes)


class SimulatedClassUsage:
    """The annotator's usage by class (module doc), driven by the cluster each step."""

    def __init__(
        self,
        names: Sequence[str],
        slot_class: IntArray,  # each slot's class index, -1 for none
        allocatable: tuple[FloatArray, FloatArray],
        *,
        epoch_s: float,
        period_s: float,
        step_s: float,
    ) -> None:
        self.names = tuple(names)
        self._slot_class = slot_class
        self._allocatable = allocatable
        self._epoch_s = epoch_s
        self._period_s = period_s
        nodes = len(allocatable[0])
        self._nodes = nodes
        self._window = max(1, round(RATE_WINDOW_S / step_s))
        # The last ``_window`` steps' CPU per class and node (cores), and memory now.
        self._cpu_steps: list[FloatArray] = []
        self._memory: FloatArray = np.zeros((len(self.names), nodes))
        self.values: FloatArray = np.full((len(self.names), nodes, 2), math.nan)
        self.written_at_s = math.nan
        self.version = 0  # bumps at each publication
        self.node_version: IntArray = np.zeros(nodes, dtype=np.int64)
        self._texts: dict[int, dict[str, str]] = {}

    def account(self, bins: IntArray, cpu_got: FloatArray, memory: FloatArray) -> None:
        """One step's usage: ``bins`` each slot's node + 1 (0: none), what each slot's pod
        got of its CPU, and its memory."""
        classes, nodes = len(self.names), self._nodes
        bound = bins > 0
        index = np.where(bound & (self._slot_class >= 0), self._slot_class * (nodes + 1) + bins, 0)
        size = classes * (nodes + 1)
        cpu = np.bincount(index, weights=cpu_got, minlength=size).reshape(classes, nodes + 1)
        mem = np.bincount(index, weights=memory, minlength=size).reshape(classes, nodes + 1)
        # Index 0 of class 0 took every slot of no class: column 0 is dropped for all.
        self._cpu_steps.append(cpu[:, 1:].astype(np.float64))
        if len(self._cpu_steps) > self._window:
            del self._cpu_steps[0]
        self._memory = mem[:, 1:].astype(np.float64)

    def advance(self, t_s: float) -> None:
        """Publish, when due, what was accounted up to ``t_s``."""
        if not self._cpu_steps or not is_due(t_s, self._period_s):
            return
        cpu_cores = np.mean(self._cpu_steps, axis=0)
        allocatable_cpu, allocatable_memory = self._allocatable
        self.values = np.stack(
            (
                np.minimum(cpu_cores / allocatable_cpu, 1.0),
                np.minimum(self._memory / allocatable_memory, 1.0),
            ),
            axis=-1,
        )
        self.written_at_s = t_s
        self.version += 1
        self.node_version += 1
        self._texts.clear()

    def annotations(self, node: int) -> Mapping[str, str]:
        """The node's class-usage annotations, as the annotator writes them."""
        texts = self._texts.get(node)
        if texts is not None:
            return texts
        texts = {}
        if not math.isnan(self.written_at_s):
            at_s = self._epoch_s + self.written_at_s
            for index, name in enumerate(self.names):
                cpu, memory = self.values[index, node]
                texts[class_usage_key(name, "cpu")] = format_usage(float(cpu), at_s)
                texts[class_usage_key(name, "memory")] = format_usage(float(memory), at_s)
        self._texts[node] = texts
        return texts

    def fractions(self, node: int) -> Mapping[str, tuple[float, float]]:
        """Per class, the (cpu, memory) fractions last published on the node."""
        return {
            name: (float(self.values[i, node, 0]), float(self.values[i, node, 1]))
            for i, name in enumerate(self.names)
        }


class ClassMonitoring:
    """One class's view of the metrics pipeline (module doc): what ``LoadFilter`` reads."""

    def __init__(
        self, pipeline: SimulatedMonitoring, usage: SimulatedClassUsage, classes: PodClasses
    ) -> None:
        self._pipeline = pipeline
        self._usage = usage
        self._classes = classes
        self.epoch_s = pipeline.epoch_s
        self.hot_changed: set[int] = set()
        pipeline.hot_listeners.append(self.hot_changed)
        self._annotations: dict[int, tuple[int, Mapping[str, str]]] = {}

    @property
    def sync_version(self) -> int:
        return self._pipeline.sync_version + self._usage.version

    @property
    def node_version(self) -> IntArray:
        return self._pipeline.node_version + self._usage.node_version

    def annotations(self, node: int) -> Mapping[str, str]:
        version = int(self._pipeline.node_version[node] + self._usage.node_version[node])
        kept = self._annotations.get(node)
        if kept is not None and kept[0] == version:
            return kept[1]
        merged = {**self._pipeline.annotations(node), **self._usage.annotations(node)}
        made = class_annotations(merged, self._classes)
        self._annotations[node] = (version, made)
        return made


class SharedChanges:
    """The burst estimate shared by several load filters: each is told every node the
    estimate changed, though the estimate answers each change once."""

    def __init__(self, estimate: UnsampledUsage) -> None:
        self._estimate = estimate
        self._pending: list[set[int]] = []

    def view(self) -> UnsampledUsage:
        pending: set[int] = set()
        self._pending.append(pending)
        return _EstimateView(self, pending)

    def changed_nodes(self, t_s: float, pending: set[int]) -> set[int]:
        changed = self._estimate.changed_nodes(t_s)
        if changed:
            for each in self._pending:
                each |= changed
        taken = set(pending)
        pending.clear()
        return taken

    @property
    def estimate(self) -> UnsampledUsage:
        return self._estimate


class _EstimateView:
    def __init__(self, shared: SharedChanges, pending: set[int]) -> None:
        self._shared = shared
        self._pending = pending

    def unsampled(
        self, node: int, t_s: float, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        return self._shared.estimate.unsampled(node, t_s, partly_sampled)

    def unsampled_after(
        self, node: int, t_s: float, sample_at_s: float | None, partly_sampled: bool = False
    ) -> Mapping[str, float] | None:
        return self._shared.estimate.unsampled_after(node, t_s, sample_at_s, partly_sampled)

    def changed_nodes(self, t_s: float) -> set[int]:
        return self._shared.changed_nodes(t_s, self._pending)

    def recent_pods(self, t_s: float) -> list[PlacedPod]:
        return self._shared.estimate.recent_pods(t_s)



class Cluster(Protocol):
    """What ``ClassSide`` reads of its cluster (``cluster.ClusterState``)."""

    scenario: Scenario
    policy: Policy
    plan: Any  # cluster.PolicyPlan: load_aware, crane
    pipeline: SimulatedMonitoring
    requests: NodeRequests
    usage: SlotUsage
    run: Any  # cluster.Run, a MeasuredRun

    def pending(self, t_s: float) -> IntArray: ...


class ClassSide:
    """What classes of pods add to a cluster: with the extender's policies, a scheduler
    per class (its own load filter and policy, sharing the node requests and the burst
    estimate with the cluster's own scheduler, which takes the pods in no class) and the
    annotator's usage by class; and, with classes or when asked (``by_workload``), each
    workload's throttled CPU and pending pods. Without either it only hands out the
    cluster's own scheduler and load filter, as before."""

    def __init__(
        self, cluster: Cluster, estimate: UnsampledUsage | None, by_workload: bool
    ) -> None:
        self._cluster = cluster
        self._estimate = estimate
        policy, plan, scenario = cluster.policy, cluster.plan, cluster.scenario
        classes = pod_classes(policy)
        judged = bool(classes) and plan.load_aware and not plan.crane
        self.measures = by_workload or bool(classes)
        self._shared = SharedChanges(estimate) if judged and estimate is not None else None
        self.usage: SimulatedClassUsage | None = None
        # Each class's load filter; its scheduler is made beside the cluster's own at
        # the first pod of the class (it shares that one's soft taints, if any).
        self.filters: dict[str, LoadFilter] = {}
        # The load filter of each class with limits on its own usage, without them
        # (``PodClasses.yielding``): its pods' nodes where no node passes under its own.
        self.yielding: dict[str, LoadFilter] = {}
        self.schedulers: dict[str, Scheduler] = {}
        self._class_of: list[str | None] = []
        if not judged:
            return
        names = list(classes.policies)
        self._class_of = workload_classes(
            classes, [(w.priority, w.labels) for w in scenario.workloads]
        )
        class_index = np.array(
            [-1 if name is None else names.index(name) for name in self._class_of],
            dtype=np.int64,
        )
        requests = cluster.requests
        self.usage = SimulatedClassUsage(
            names,
            class_index[cluster.usage.workload_of],
            (requests.allocatable_cpu, requests.allocatable_memory),
            epoch_s=cluster.pipeline.epoch_s,
            period_s=min(entry.period_s for entry in policy.spec.sync_policy),
            step_s=scenario.step_s,
        )
        for name in names:
            view = ClassMonitoring(cluster.pipeline, self.usage, classes)
            self.filters[name] = LoadFilter(
                classes.policies[name],
                view,
                len(requests.allocatable_cpu),
                self._burst(),
                scenario.node_labels,  # a class's limits, under each node pool's
            )
            relaxed = classes.yielding.get(name)
            if relaxed is not None:
                self.yielding[name] = LoadFilter(
                    relaxed,
                    ClassMonitoring(cluster.pipeline, self.usage, classes),
                    len(requests.allocatable_cpu),
                    self._burst(),
                    scenario.node_labels,
                )

    def _burst(self) -> UnsampledUsage | None:
        """The burst estimate for one more load filter (each is told every change)."""
        return self._shared.view() if self._shared is not None else self._estimate

    def base_filter(self) -> LoadFilter | None:
        """The load filter of the cluster's own scheduler (None: the policy has none)."""
        cluster = self._cluster
        if not cluster.plan.load_aware:
            return None
        nodes = len(cluster.requests.allocatable_cpu)
        return LoadFilter(
            cluster.policy, cluster.pipeline, nodes, self._burst(), cluster.scenario.node_labels
        )

    def scheduler(self, workload: int, t_s: float, base: Scheduler) -> Scheduler:
        """The scheduler of the workload's pods (its class's, or ``base``: the cluster's
        own), its load filter refreshed for ``t_s``."""
        name = self._class_of[workload] if self._class_of else None
        scheduler = base if name is None else self._class_scheduler(name, base)
        if self.filters:  # they share the node requests: each ranks every node afresh
            scheduler.forget_ranks()
        if scheduler.load_filter is not None:
            scheduler.load_filter.refresh(t_s)
        if scheduler.yielding is not None:
            scheduler.yielding.refresh(t_s)
        return scheduler

    def _class_scheduler(self, name: str, base: Scheduler) -> Scheduler:
        made = self.schedulers.get(name)
        if made is None:
            scenario = self._cluster.scenario
            made = self.schedulers[name] = Scheduler(
                base.requests,
                self.filters[name],
                base.extender_weight,
                np.random.default_rng([scenario.seed, 2, list(self.filters).index(name)]),
                soft_tainted=base.soft_tainted,
                soft_warm=base.soft_warm,
                estimate_filters=True,  # a class's pod never takes a node past its limits
                yielding=self.yielding.get(name),
            )
        return made

    def account(
        self,
        binding: Binding,
        cpu: FloatArray,
        memory: FloatArray,
        cpu_got: FloatArray | None,
        t_s: float,
        step_s: float,
    ) -> None:
        """The step ``[t_s, t_s + step_s)``: the usage by class (published at its end when
        due), and each workload's throttled CPU and pending pods."""
        if cpu_got is None:
            return
        if self.usage is not None:
            self.usage.account(binding.bins, cpu_got, memory)
            self.usage.advance(t_s + step_s)
        if not self.measures:
            return
        cluster = self._cluster
        run, workload_of = cluster.run, cluster.usage.workload_of
        if run.throttled_core_s_by_workload is None:
            workloads = len(cluster.scenario.workloads)
            run.throttled_core_s_by_workload = np.zeros(workloads)
            run.pending_steps_by_workload = np.zeros(workloads, dtype=np.int64)
        count_throttled(run, workload_of, binding, cpu, cpu_got, step_s)
        if run.pending and run.pending[-1]:
            count_pending(run, workload_of[cluster.pending(t_s)])


def count_pending(run: MeasuredRun, waiting_workloads: IntArray) -> None:
    """Add one step's pending pods (their workloads) to the run's per-workload count."""
    pending = run.pending_steps_by_workload
    if pending is not None:
        pending += np.bincount(waiting_workloads, minlength=len(pending))


def count_throttled(
    run: MeasuredRun,
    workload_of: IntArray,
    binding: Binding,
    cpu: FloatArray,
    cpu_got: FloatArray,
    step_s: float,
) -> None:
    """Add one step's CPU asked for and not got (core-seconds) to each workload's."""
    throttled = run.throttled_core_s_by_workload
    if throttled is not None:
        asked = np.where(binding.bound, cpu - cpu_got, 0.0)
        throttled += np.bincount(workload_of, weights=asked, minlength=len(throttled)) * step_s


def class_table(scenario: Scenario, runs: Sequence[MeasuredRun], policies: Sequence[str]) -> str:
    """Per policy, each class's throttled CPU-minutes and pending pod-minutes (Markdown),
    for a scenario whose policy has classes; "" for one without."""
    names = list(pod_classes(scenario.scheduling_policy()).policies)
    if not names:
        return ""
    header = ["policy"]
    for name in names:
        header += [f"{name} throttled CPU-min", f"{name} pending pod-min"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for policy, run in zip(policies, runs, strict=True):
        cells = [policy]
        for name in names:
            measured = class_measures(scenario, run, name)
            cells.append(f"{measured.throttled_cpu_minutes:.1f}")
            cells.append(f"{measured.pending_pod_minutes:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

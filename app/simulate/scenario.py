"""Scenario files: the cluster, its workloads and the clock of one simulation.

A scenario is YAML, validated with pydantic; every error names the field
(``workloads.2.usage.cpu: ...``). Field names are camelCase, as in Kubernetes
manifests. Durations are Go durations (``30s``, ``5m``, ``24h``) and amounts are
Kubernetes quantities (``500m``, ``16``, ``64Gi``). ``docs/simulate.md`` documents
every field.
"""

from __future__ import annotations

import functools
import math
import os
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from app.documents import MAX_SCENARIO_BYTES, parse_yaml, read_file, validate
from app.objects import Demand, Resources, effective_demand, parse_quantity, requests_and_limits
from app.policy import DurationS, Policy, PolicyError, default_policy, policy_from_mapping
from app.rebalance import DeschedulerConfig, config_from_mapping

# What the package's front offers; the simulator's own modules import the rest by name.
__all__ = ["ScenarioError", "scenario_from_mapping"]

BUILTIN_PACKAGE = "app.simulate.scenarios"
# Bounds that a file (a tenant's capture, a mutated file) cannot pass: checked at load,
# before any per-node or per-pod list is built. Far above what a cluster runs (Kubernetes
# is tested to 5,000 nodes and 150,000 pods).
MAX_NODES = 100_000
MAX_PODS = 1_000_000


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file and the field."""


def _quantity(value: Any) -> float:
    return parse_quantity(value)


Quantity = Annotated[float, BeforeValidator(_quantity)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Amounts(_Strict):
    cpu: Quantity = 0.0  # cores
    memory: Quantity = 0.0  # bytes


class NodeGroup(_Strict):
    name: str = Field(min_length=1, description="node names are <name>-<index>")
    count: int = Field(ge=1, le=MAX_NODES)
    cpu: Quantity = Field(gt=0)
    memory: Quantity = Field(gt=0)
    # A captured cluster names its nodes (one name per node, in place of <name>-<index>)
    # and records their labels and taints; placement does not model those (the
    # `default` policy is an approximation, docs/simulate.md). The labels put a node
    # in its node pools (the policy's and the descheduler configuration's).
    names: tuple[str, ...] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    # The Nodes' annotations the descheduler honours (Karpenter's
    # ``karpenter.sh/do-not-disrupt: "true"``: no pod leaves such a node).
    annotations: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_name_per_node(self) -> NodeGroup:
        if self.names is not None and len(self.names) != self.count:
            raise ValueError(f"names: {len(self.names)} names for {self.count} nodes")
        return self

    @property
    def node_names(self) -> list[str]:
        if self.names is not None:
            return list(self.names)
        return [f"{self.name}-{i}" for i in range(self.count)]


class ConstantUsage(_Strict):
    profile: Literal["constant"]
    cpu: Quantity
    memory: Quantity
    jitter: float = Field(0.0, ge=0.0, le=1.0)


class DiurnalUsage(_Strict):
    """``mean * (1 + amplitude * cos(2 pi (t - peakAt) / period))``."""

    profile: Literal["diurnal"]
    cpu: Quantity
    memory: Quantity
    amplitude: float = Field(0.5, ge=0.0, le=1.0)
    peak_at_s: DurationS = Field(14 * 3600.0, alias="peakAt", ge=0)
    period_s: DurationS = Field(24 * 3600.0, alias="period", gt=0)
    memory_amplitude: float = Field(0.0, alias="memoryAmplitude", ge=0.0, le=1.0)
    jitter: float = Field(0.0, ge=0.0, le=1.0)


class SpikyUsage(_Strict):
    """The base usage, plus ``spike`` on a random ``spikeFraction`` of each pod's steps."""

    profile: Literal["spiky"]
    cpu: Quantity
    memory: Quantity
    spike: Amounts
    spike_fraction: float = Field(alias="spikeFraction", gt=0.0, le=1.0)
    jitter: float = Field(0.0, ge=0.0, le=1.0)


class GrowingUsage(_Strict):
    """``start`` until ``from``, a straight line to ``end`` at ``until``, then ``end``."""

    profile: Literal["growing"]
    start: Amounts
    end: Amounts
    from_s: DurationS = Field(alias="from", ge=0)
    until_s: DurationS = Field(alias="until", ge=0)
    jitter: float = Field(0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> GrowingUsage:
        if self.until_s < self.from_s:
            raise ValueError("'until' must not be before 'from'")
        return self


class UsagePoint(_Strict):
    at_s: DurationS = Field(alias="at", ge=0)
    cpu: Quantity
    memory: Quantity


class PointsUsage(_Strict):
    """Straight lines between the points; the first and last values hold outside them."""

    profile: Literal["points"]
    points: tuple[UsagePoint, ...] = Field(min_length=1)
    jitter: float = Field(0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> PointsUsage:
        times = [point.at_s for point in self.points]
        if times != sorted(times):
            raise ValueError("points must be in time order")
        return self


def _finite_non_negative(values: tuple[float, ...], field: str) -> None:
    for i, value in enumerate(values):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{field}[{i}] must be a finite number >= 0, got {value!r}")


def _paired_series(cpu: tuple[float, ...], memory: tuple[float, ...]) -> None:
    """A recording: as many CPU points as memory points, each a usage."""
    if len(cpu) != len(memory):
        raise ValueError(f"cpu has {len(cpu)} points and memory {len(memory)}")
    _finite_non_negative(cpu, "cpu")
    _finite_non_negative(memory, "memory")


class ReplicaSpread(_Strict):
    """Each replica slot's usage over the workload's mean, in slot order (1 = the mean);
    slots past the end use 1."""

    cpu: tuple[float, ...] = ()
    memory: tuple[float, ...] = ()

    @model_validator(mode="after")
    def _valid(self) -> ReplicaSpread:
        _finite_non_negative(self.cpu, "cpu")
        _finite_non_negative(self.memory, "memory")
        return self


class HistoryUsage(_Strict):
    """Recorded usage (``loadaware capture``): the mean per replica every ``interval``
    from the start (cores, bytes; straight lines between points, the last one holds),
    times each replica slot's ``spread`` factor."""

    profile: Literal["history"]
    interval_s: DurationS = Field(alias="interval", gt=0)
    cpu: tuple[float, ...] = Field(min_length=1)
    memory: tuple[float, ...] = Field(min_length=1)
    spread: ReplicaSpread = Field(default_factory=lambda: ReplicaSpread.model_validate({}))
    jitter: float = Field(0.0, ge=0.0, le=0.0)  # the spread is measured, not drawn

    @model_validator(mode="after")
    def _valid(self) -> HistoryUsage:
        _paired_series(self.cpu, self.memory)
        return self


Usage = Annotated[
    ConstantUsage | DiurnalUsage | SpikyUsage | GrowingUsage | PointsUsage | HistoryUsage,
    Field(discriminator="profile"),
]


class Arrival(_Strict):
    """Replicas created evenly over ``over`` starting at ``at``; ``over: 0s`` = all at once."""

    at_s: DurationS = Field(0.0, alias="at", ge=0)
    over_s: DurationS = Field(0.0, alias="over", ge=0)


class ScaleUp(_Strict):
    at_s: DurationS = Field(alias="at", ge=0)
    replicas: int = Field(ge=1, le=MAX_PODS, description="the new replica count")
    over_s: DurationS = Field(0.0, alias="over", ge=0)


class ReplicaCount(_Strict):
    """From ``at`` on, the workload wants ``replicas`` pods: the highest slots go first on a
    scale-down and come back (new pods, pending) on a scale-up."""

    at_s: DurationS = Field(alias="at", ge=0)
    replicas: int = Field(ge=0, le=MAX_PODS)


WorkloadKind = Literal["Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "Pod"]


class DisruptionBudget(_Strict):
    min_available: int | None = Field(None, alias="minAvailable", ge=0)
    max_unavailable: int | None = Field(None, alias="maxUnavailable", ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> DisruptionBudget:
        if (self.min_available is None) == (self.max_unavailable is None):
            raise ValueError("set exactly one of minAvailable and maxUnavailable")
        return self


class InitContainer(_Strict):
    """An init container; ``restartPolicy: Always`` makes it a sidecar."""

    requests: Amounts = Amounts()
    limits: Amounts = Amounts()
    restart_policy: Literal["Always"] | None = Field(None, alias="restartPolicy")


class Workload(_Strict):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    replicas: int = Field(ge=0, le=MAX_PODS)
    requests: Amounts = Amounts()  # the app containers', summed
    limits: Amounts = Amounts()
    init_containers: tuple[InitContainer, ...] = Field((), alias="initContainers")
    overhead: Amounts = Amounts()
    usage: Usage
    arrival: Arrival = Field(default_factory=lambda: Arrival.model_validate({}))
    scale_ups: tuple[ScaleUp, ...] = Field((), alias="scaleUps")
    pdb: DisruptionBudget | None = None
    priority: int = 0
    # What owns the pods (the descheduler treats a DaemonSet's or a bare pod's
    # differently); Deployment unless said.
    kind: WorkloadKind = "Deployment"
    # The node of each of the first len(placement) replicas at the start: bound there
    # already (a captured cluster starts as it was). The others are created by arrival.
    placement: tuple[str, ...] = ()
    # Replica counts over time (kube-state-metrics); step-hold from each ``at``.
    replica_history: tuple[ReplicaCount, ...] = Field((), alias="replicaHistory")
    # Its pods' annotations, as the descheduler reads them: the opt-outs
    # (``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``,
    # ``karpenter.sh/do-not-disrupt: "true"``) and ordering hints
    # (``descheduler.alpha.kubernetes.io/prefer-no-eviction``).
    annotations: dict[str, str] = Field(default_factory=dict)
    # Its pods' labels, as a policy's class selector reads them (app/policy/classes.py).
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _placement_and_history(self) -> Workload:
        if len(self.placement) > self.replicas:
            raise ValueError(
                f"placement names {len(self.placement)} nodes for {self.replicas} replicas"
            )
        times = [entry.at_s for entry in self.replica_history]
        if times != sorted(times):
            raise ValueError("replicaHistory must be in time order")
        if self.replica_history and self.scale_ups:
            raise ValueError("set replicaHistory or scaleUps, not both")
        return self

    @property
    def max_replicas(self) -> int:
        return max(
            [
                self.replicas,
                *(scale.replicas for scale in self.scale_ups),
                *(entry.replicas for entry in self.replica_history),
            ]
        )

    @property
    def pod_requests_and_limits(self) -> tuple[Resources, Resources]:
        """Each pod's effective requests and limits, as Kubernetes counts them
        (``app.objects.demand``: sidecars, init containers and overhead)."""
        return requests_and_limits(
            effective_demand(
                (_demand(self.requests, self.limits),),
                [
                    (_demand(c.requests, c.limits), c.restart_policy == "Always")
                    for c in self.init_containers
                ],
                (self.overhead.cpu, self.overhead.memory),
            )
        )


def _demand(requests: Amounts, limits: Amounts) -> Demand:
    return (requests.cpu, requests.memory, limits.cpu, limits.memory)


class MetricsTiming(_Strict):
    """How far the load model's view lags reality (the annotator's periods come from the policy)."""

    scrape_interval_s: DurationS = Field(30.0, alias="scrapeInterval", gt=0)
    rule_interval_s: DurationS = Field(60.0, alias="ruleInterval", gt=0)
    # The annotator's default is 15s; 30s is the nearest multiple of the default step.
    hot_value_interval_s: DurationS = Field(30.0, alias="hotValueInterval", gt=0)


class SchedulerSettings(_Strict):
    # 8: the weight every shipped scheduler configuration gives the extender (issue 45).
    extender_weight: int = Field(8, alias="extenderWeight", ge=1)


class CraneSettings(_Strict):
    """How the ``crane`` policies run; the defaults are crane-scheduler's shipped ones.
    Each switch turns one difference from loadaware off (docs/simulate.md)."""

    # crane writes node_hot_value only in its node sync, every shortest syncPolicy
    # period (3m by default); false: every metrics.hotValueInterval, as loadaware.
    hot_value_on_node_sync: bool = Field(True, alias="hotValueOnNodeSync")
    # crane runs as an in-tree Score plugin: 0..100 at this weight (3 in its shipped
    # KubeSchedulerConfiguration); 0: scored as an extender, 0..10 x 10 x extenderWeight.
    plugin_weight: int = Field(3, alias="pluginWeight", ge=0, le=100)
    # crane scores a metric without fresh data as fully used; false: at its filter
    # limit, loadaware's rule.
    missing_data_as_full: bool = Field(True, alias="missingDataAsFull")


class ObservedNode(_Strict):
    """What Prometheus recorded for one node: its pods' usage every ``interval``."""

    name: str = Field(min_length=1)
    cpu: tuple[float, ...] = Field(min_length=1)  # cores
    memory: tuple[float, ...] = Field(min_length=1)  # bytes

    @model_validator(mode="after")
    def _valid(self) -> ObservedNode:
        _paired_series(self.cpu, self.memory)
        return self


class Observed(_Strict):
    """The per-node usage the cluster really had, for the fidelity check; and how many
    nodes it ran every ``interval`` (``nodeCount``), for its node-hours beside the
    ``+autoscaler`` policies'."""

    interval_s: DurationS = Field(alias="interval", gt=0)
    nodes: tuple[ObservedNode, ...] = ()
    node_count: tuple[Annotated[float, Field(ge=0)], ...] = Field((), alias="nodeCount")

    def node_hours(self, duration_s: float) -> float | None:
        """The node-hours the cluster ran over ``duration_s`` (each point held for one
        interval); None without ``nodeCount``."""
        if not self.node_count:
            return None
        points = min(len(self.node_count), math.ceil(duration_s / self.interval_s - 1e-9))
        return sum(self.node_count[:points]) * self.interval_s / 3600


AutoscalerPreset = Literal["cluster-autoscaler", "karpenter"]


class AutoscalerSpec(_Strict):
    """The node autoscaler of the ``+autoscaler`` policies (``app/simulate/autoscaling.py``).

    Every node of the scenario is one the autoscaler may remove, and each node's group is
    its template for a scale-up: the scenario's node count is the most it ever runs. A
    setting left unset takes the preset's value (docs/simulate.md)."""

    preset: AutoscalerPreset = "cluster-autoscaler"
    # A node whose pods request less than this fraction of its allocatable (the larger
    # of CPU and memory) and can all move elsewhere is unneeded; 0 empty nodes only.
    scale_down_utilization_threshold: float | None = Field(
        None, alias="scaleDownUtilizationThreshold", ge=0.0, le=1.0
    )
    # How long a node must stay unneeded before it is removed (CA's
    # --scale-down-unneeded-time, Karpenter's consolidateAfter).
    scale_down_unneeded_s: DurationS | None = Field(None, alias="scaleDownUnneeded", ge=0)
    # No scale-down this long after a scale-up (CA's --scale-down-delay-after-add).
    scale_down_delay_after_add_s: DurationS | None = Field(
        None, alias="scaleDownDelayAfterAdd", ge=0
    )
    # How long a pod waits unschedulable before it triggers a scale-up.
    scale_up_after_pending_s: DurationS | None = Field(None, alias="scaleUpAfterPending", ge=0)
    # From the scale-up decision to a node that pods can bind to (it costs from the start).
    provisioning_delay_s: DurationS | None = Field(None, alias="provisioningDelay", ge=0)
    min_nodes: int = Field(1, alias="minNodes", ge=0)


# Parsed scenario policies, by scenario name and policy document (``repr``: YAML's
# types kept apart); bounded, for a process that loads many scenario files.
_POLICIES: dict[tuple[str, str], Policy] = {}
_POLICIES_KEPT = 64


class Scenario(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    duration_s: DurationS = Field(alias="duration", gt=0)
    step_s: DurationS = Field(30.0, alias="step", gt=0)
    seed: int = Field(1, ge=0, lt=2**63)
    policy: dict[str, Any] | None = None
    metrics: MetricsTiming = Field(default_factory=lambda: MetricsTiming.model_validate({}))
    scheduler: SchedulerSettings = Field(
        default_factory=lambda: SchedulerSettings.model_validate({})
    )
    crane: CraneSettings = Field(default_factory=lambda: CraneSettings.model_validate({}))
    # A DeschedulerConfiguration (app/rebalance/config.py), for the +desched policies.
    descheduler: dict[str, Any] | None = None
    # The node autoscaler of the +autoscaler policies; None: the cluster autoscaler's
    # defaults.
    autoscaler: AutoscalerSpec | None = None
    nodes: tuple[NodeGroup, ...] = Field(min_length=1)
    workloads: tuple[Workload, ...] = ()
    # A captured cluster: when the history starts (RFC 3339) and what it recorded.
    start: str | None = None
    observed: Observed | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        _require_multiple("metrics.scrapeInterval", self.metrics.scrape_interval_s, self.step_s)
        _require_multiple("metrics.ruleInterval", self.metrics.rule_interval_s, self.step_s)
        hot_s = self.metrics.hot_value_interval_s
        _require_multiple("metrics.hotValueInterval", hot_s, self.step_s)
        nodes = sum(group.count for group in self.nodes)
        if nodes > MAX_NODES:  # before any per-node list is built
            raise ValueError(f"nodes: {nodes:,} nodes in all, more than the {MAX_NODES:,} allowed")
        pods = sum(workload.max_replicas for workload in self.workloads)
        if pods > MAX_PODS:
            raise ValueError(
                f"workloads: {pods:,} replicas in all, more than the {MAX_PODS:,} allowed"
            )
        names = [group.name for group in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("nodes: group names must be unique")
        workloads = [workload.name for workload in self.workloads]
        if len(set(workloads)) != len(workloads):
            raise ValueError("workloads: names must be unique")
        node_names = self.node_names
        known = set(node_names)
        if len(known) != len(node_names):
            raise ValueError("nodes: node names must be unique")
        for index, workload in enumerate(self.workloads):
            unknown = sorted(set(workload.placement) - known)
            if unknown:
                raise ValueError(
                    f"workloads.{index}.placement: no such node {', '.join(unknown[:3])}"
                )
        if self.observed is not None:
            unknown = sorted({n.name for n in self.observed.nodes} - known)
            if unknown:
                raise ValueError(f"observed.nodes: no such node {', '.join(unknown[:3])}")
        return self

    @property
    def node_names(self) -> list[str]:
        return [name for group in self.nodes for name in group.node_names]

    @property
    def node_labels(self) -> list[dict[str, str]]:
        """Each node's labels (its group's), in node order: what node pools select."""
        return [group.labels for group in self.nodes for _ in range(group.count)]

    @property
    def steps(self) -> int:
        return math.floor(self.duration_s / self.step_s + 1e-9)

    def descheduler_config(self) -> DeschedulerConfig:
        """The scenario's DeschedulerConfiguration, or the descheduler's defaults."""
        return config_from_mapping(self.descheduler, "descheduler")

    def scheduling_policy(self) -> Policy:
        """The scenario's policy. Parsed once per scenario name and document (a Policy is
        immutable): every run, and every summary of a run, asks for it."""
        key = (self.name, repr(self.policy))
        policy = _POLICIES.get(key)
        if policy is None:
            if self.policy is None:
                policy = default_policy()
            else:
                policy = policy_from_mapping(self.policy, f"scenario {self.name}: policy")
            if len(_POLICIES) >= _POLICIES_KEPT:
                _POLICIES.clear()
            _POLICIES[key] = policy
        return policy

    @property
    def crane_node_sync_s(self) -> float:
        """crane's node sync period: the policy's shortest sync period (3m by default),
        on the step grid."""
        periods = [entry.period_s for entry in self.scheduling_policy().spec.sync_policy]
        shortest = min(periods, default=180.0)
        return math.ceil(shortest / self.step_s - 1e-9) * self.step_s


SIZE_HINT = "shorten duration, lengthen step or use fewer nodes"
# What one policy's run keeps for every node and step: CPU and memory as float32 (the
# heat maps), plus the metrics pipeline's and the scheduler's working copies.
BYTES_PER_NODE_STEP = 16


def available_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # not on this platform
        return None


def check_size(scenario: Scenario, runs: int, available: int | None = None) -> None:
    """Refuse, before any work, a scenario whose runs cannot fit in memory."""
    nodes = sum(group.count for group in scenario.nodes)
    needed = runs * scenario.steps * nodes * BYTES_PER_NODE_STEP
    limit = available_memory_bytes() if available is None else available
    if limit is not None and needed > limit:
        raise ScenarioError(
            f"{scenario.name}: {runs} run(s) of {scenario.steps:,} steps x {nodes:,} nodes "
            f"need about {needed / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB "
            f"available; {SIZE_HINT}"
        )


def _require_multiple(field: str, value_s: float, step_s: float) -> None:
    # Events happen at step boundaries; a period that is no multiple of the step would
    # silently round, so the lag would not be what the file says.
    ratio = value_s / step_s
    if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
        raise ValueError(f"{field} ({value_s:g}s) must be a whole multiple of step ({step_s:g}s)")


def scenario_from_mapping(document: Any, source: str) -> Scenario:
    scenario = validate(Scenario, document, source, "scenario", ScenarioError)
    try:
        policy = scenario.scheduling_policy()
    except PolicyError as error:
        raise ScenarioError(f"{source}: {error}") from None
    _check_metrics_simulated(policy, source)
    try:
        interval_s = scenario.descheduler_config().interval
        _require_multiple("descheduler.interval", interval_s, scenario.step_s)
    except ValueError as error:  # ConfigError names the field under "descheduler"
        raise ScenarioError(f"{source}: {error}") from None
    for entry in policy.spec.sync_policy:
        try:
            field = f"policy syncPolicy {entry.name} period"
            _require_multiple(field, entry.period_s, scenario.step_s)
        except ValueError as error:
            raise ScenarioError(f"{source}: {error}") from None
    return scenario


def _check_metrics_simulated(policy: Policy, source: str) -> None:
    from app.simulate.recording_rules import rule_of  # the one place that knows the rules

    unknown = [metric for metric in policy.metrics if rule_of(metric) is None]
    if unknown:
        raise ScenarioError(
            f"{source}: policy: the simulator has no recording rule for {', '.join(unknown)}; "
            "it simulates cpu_ and mem_usage_avg_5m, _max_avg_<window> (crane's 1h, 1d) and "
            "_p<1-99>_avg_<window> (such as cpu_usage_p95_avg_1h), windows up to 7d"
        )


def scenario_from_yaml(text: str, source: str) -> Scenario:
    return scenario_from_mapping(parse_yaml(text, source, ScenarioError), source)


def builtin_names() -> list[str]:
    folder = resources.files(BUILTIN_PACKAGE)
    names = (entry.name for entry in folder.iterdir())
    return sorted(name.removesuffix(".yaml") for name in names if name.endswith(".yaml"))


@functools.cache
def _builtin_scenario(name: str) -> Scenario:
    """A built-in scenario, validated once: it ships with the code (a Scenario is frozen)."""
    return scenario_from_yaml(builtin_text(name), f"built-in scenario {name}")


def builtin_text(name: str) -> str:
    return resources.files(BUILTIN_PACKAGE).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a scenario file by path (read anew each time)."""
    if name_or_path in builtin_names():
        return _builtin_scenario(name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise ScenarioError(
            f"{name_or_path}: no such built-in scenario or file "
            f"(built-in: {', '.join(builtin_names())}; see 'loadaware simulate --list')"
        )
    return scenario_from_yaml(*read_file(path, "scenario file", ScenarioError, MAX_SCENARIO_BYTES))

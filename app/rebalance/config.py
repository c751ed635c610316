"""The descheduler's configuration file, validated.

Field names follow kubernetes-sigs/descheduler's LowNodeUtilization and DefaultEvictor
where the meaning is the same, so that its users recognise them. Thresholds are
*real-usage* percentages of allocatable, read from the node annotations the
extender filters on (not requests).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from app.documents import parse_yaml, validate
from app.objects import LabelSelector, NodeInfo, at_least, format_duration
from app.policy import (
    MAX_NODE_POOLS,
    DurationS,
    Number,
    PoolSelector,
    Switch,
    WholeNumber,
    duplicate_name,
    label_selector,
    overlap_problem,
    resource_of_metric,
)

__all__ = [
    "DEFAULT_CPU_QUERY",
    "DEFAULT_MEMORY_QUERY",
    "ConfigError",
    "DeschedulerConfig",
    "ReplacementScheduler",
    "config_from_mapping",
    "config_from_yaml",
    "pool_of",
    "state_window_s",
]

API_VERSION = "loadaware.io/v1alpha1"
KIND = "DeschedulerConfiguration"

Resource = Literal["cpu", "memory"]
# The scheduler that places the replacements of evicted pods (``scheduler``):
# loadaware's extender; a request-based kube-scheduler that loadaware's soft taints
# steer; or a request-based kube-scheduler alone. ``app/rebalance/replacement_scheduler.py`` says
# what each changes in a plan.
ReplacementScheduler = Literal["extender", "soft-taints", "requests"]

# The one definition of the default per-pod usage queries (app/prom/pod_usage.py says
# why they drop container="" and container="POD").
# They keep ``node``: a pod's usage counts only from the node it runs on (ibid.).
DEFAULT_CPU_QUERY = (
    'sum by (namespace, pod, node) (rate(container_cpu_usage_seconds_total{container!="",'
    'container!="POD"}[5m]))'
)
DEFAULT_MEMORY_QUERY = (
    "sum by (namespace, pod, node) "
    '(container_memory_working_set_bytes{container!="",container!="POD"})'
)

DEFAULT_THRESHOLDS: dict[Resource, float] = {"cpu": 40.0, "memory": 50.0}
DEFAULT_TARGET_THRESHOLDS: dict[Resource, float] = {"cpu": 65.0, "memory": 75.0}
CONSOLIDATION_THRESHOLDS: dict[Resource, float] = {"cpu": 30.0, "memory": 40.0}
CONSOLIDATION_REQUEST_THRESHOLDS: dict[Resource, float] = {"cpu": 60.0, "memory": 60.0}
CONSOLIDATION_MIN_SPARE: dict[Resource, float] = {"cpu": 15.0, "memory": 15.0}
DEFAULT_METRICS: dict[Resource, str] = {"cpu": "cpu_usage_avg_5m", "memory": "mem_usage_avg_5m"}


# Slower than this, one run's evictions would outlast many intervals; faster, the rate
# limit no longer paces anything (the API server's own limits would).
MIN_EVICTIONS_PER_SECOND = 0.01
# A loop faster than this would put the API server and Prometheus under a busy loop
# (an ``interval: 1ns`` ran 787 rounds in 5 s); the metrics it reads are 5-minute means.
MIN_INTERVAL_S = 1.0
MAX_EVICTIONS_PER_SECOND = 100.0


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file, field and problem."""


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )


class Namespaces(_Section):
    """Which namespaces' pods may be evicted. Give ``include`` or ``exclude``, not both.

    By default only ``kube-system`` is excluded; giving ``include`` drops that default.
    """

    include: tuple[str, ...] = Field(
        default=(), description="Only pods in these namespaces may be evicted (empty: all)."
    )
    exclude: tuple[str, ...] = Field(
        default=("kube-system",), description="Pods in these namespaces are never evicted."
    )

    @model_validator(mode="before")
    @classmethod
    def _include_replaces_the_default_exclude(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("include") and "exclude" not in data:
            return {**data, "exclude": ()}
        return data

    @model_validator(mode="after")
    def _one_of(self) -> Namespaces:
        if self.include and self.exclude:
            raise ValueError(
                "give either include or exclude, not both (include lists every namespace "
                "that may be evicted; set exclude: [] when you use it)"
            )
        return self

    def allows(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


def _label_map(value: Any) -> Any:
    """descheduler writes nodeSelector as a label selector string; equality terms map
    onto labels. Set-based terms ('in', 'notin', '!key') are refused, not ignored."""
    if not isinstance(value, str):
        return value
    labels: dict[str, str] = {}
    for term in filter(None, (part.strip() for part in value.split(","))):
        key, equals, label = term.replace("==", "=").partition("=")
        if not equals or not key.strip() or "!" in key or " " in key.strip():
            raise ValueError(
                f"cannot read {term!r}: write equality terms 'key=value' joined by commas, "
                "or a map of labels"
            )
        labels[key.strip()] = label.strip()
    return labels


class PriorityThreshold(_Section):
    """Pods with a priority at or above ``value`` are never evicted."""

    value: WholeNumber = Field(description="The priority value from which pods are protected.")


class PodUsageQuerySection(_Section):
    """PromQL for real per-pod usage: one query per resource for the whole cluster.

    Each must return one series per pod labelled ``namespace`` and ``pod``: CPU in
    cores, memory in bytes.
    """

    cpu: str = Field(default=DEFAULT_CPU_QUERY, pattern=r"\S", description="CPU cores per pod.")
    memory: str = Field(
        default=DEFAULT_MEMORY_QUERY, pattern=r"\S", description="Working-set bytes per pod."
    )


def _count_or_percent(value: Any) -> str:
    """'10%' or a whole count >= 1; refused otherwise, saying what is meant."""
    hint = "give a count such as 1 or a percentage such as '10%'"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(hint)
    text = str(value).strip()
    number = text.removesuffix("%")
    if not number.isdigit():
        raise ValueError(f"{value!r}: {hint}")
    if text.endswith("%") and not 0 < int(number) <= 100:
        raise ValueError(f"{value!r}: a percentage must be from 1% to 100%")
    if not text.endswith("%") and int(number) < 1:
        raise ValueError(f"{value!r}: a count must be at least 1 (0 would evict nothing)")
    return text


def unavailable_allowed(setting: str, replicas: int) -> int:
    """How many of ``replicas`` pods may be unavailable at once: a count, or a
    percentage rounded down but at least 1."""
    if setting.endswith("%"):
        return max(1, replicas * int(setting[:-1]) // 100)
    return int(setting)


def _percentages(value: Mapping[Resource, float], field: str) -> None:
    for resource, percent in value.items():
        if not 0 <= percent <= 100:
            raise ValueError(f"{field}.{resource} is {percent}: give a percentage from 0 to 100")


class Consolidation(_Section):
    """Drain nodes that real usage shows idle, so that a node autoscaler removes them
    (``app/rebalance/consolidation.py``; docs/tuning.md)."""

    enabled: Switch = Field(
        default=False,
        description="Drain underused nodes (opt-in): the descheduler taints the node "
        "(loadaware.io/draining:NoSchedule) and evicts its pods, for the node autoscaler to "
        "remove it; the simulator's +consolidate policies run the same planner.",
    )
    thresholds: dict[Resource, Number] = Field(
        default_factory=lambda: dict(CONSOLIDATION_THRESHOLDS),
        description="Real usage, % of allocatable, at or below which (every resource) a "
        "node may be drained.",
    )
    request_thresholds: dict[Resource, Number] = Field(
        default_factory=lambda: dict(CONSOLIDATION_REQUEST_THRESHOLDS),
        description="Requests, % of allocatable, at or below which (every resource) a "
        "node may be drained.",
    )
    min_spare: dict[Resource, Number] = Field(
        default_factory=lambda: dict(CONSOLIDATION_MIN_SPARE),
        description="Unrequested capacity, % of the allocatable of the nodes left, that "
        "every drain must leave (the floor of spare capacity).",
    )
    rise_lookback: DurationS = Field(
        default=86400.0,
        ge=0,
        description="How far back the descheduler remembers the demand of the pods "
        "that need a node (their requests, bound or waiting), for the rise to keep room "
        "for (app/rebalance/rise.py); 0 keeps no history and minSpare alone holds.",
    )
    rise_within: DurationS = Field(
        default=300.0,
        gt=0,
        description="The node autoscaler's time to bring a node (its scan plus "
        "provisioning): every drain leaves unrequested room for the largest rise in demand "
        "seen within this long over riseLookback, since pods of a faster rise would wait "
        "for a node.",
    )
    max_nodes_per_run: WholeNumber = Field(
        default=1, ge=1, description="Nodes drained in one run at most."
    )
    max_candidates_per_run: WholeNumber = Field(
        default=50,
        ge=1,
        description="Candidates a run tries at most (a bound on its work at thousands of "
        "nodes): the first half in the order tried (the smallest nodes, the least requested "
        "first), then a window over the others that moves each run.",
    )
    abandon_after: DurationS = Field(
        default=1800.0,
        gt=0,
        description="A drain not finished by the node autoscaler (the node still there) "
        "this long after it began is given up: the drain taint goes and the node takes "
        "pods again. Longer than the autoscaler's scale-down delay plus the drain itself.",
    )

    @model_validator(mode="after")
    def _check(self) -> Consolidation:
        _percentages(self.thresholds, "thresholds")
        _percentages(self.request_thresholds, "requestThresholds")
        _percentages(self.min_spare, "minSpare")
        return self


class NodePool(_Section):
    """One node pool with its own thresholds (koordinator LowNodeLoad's ``nodePools``):
    the nodes ``nodeSelector`` selects are classified by these in place of the
    configuration's own, resource by resource (a resource left out keeps them)."""

    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="The pool's name, as logs and `explain node` show it.",
    )
    node_selector: PoolSelector = Field(
        description="The pool's nodes: a label selector (matchLabels, matchExpressions), as "
        "in the policy's nodePools."
    )
    thresholds: dict[Resource, Number] = Field(
        default_factory=dict,
        description="As thresholds, for the pool's nodes (a resource left out keeps the "
        "configuration's).",
    )
    target_thresholds: dict[Resource, Number] = Field(
        default_factory=dict,
        description="As targetThresholds, for the pool's nodes (a resource left out keeps "
        "the configuration's).",
    )

    @cached_property
    def selector(self) -> LabelSelector:
        """``node_selector`` as the matching rule, made once."""
        return label_selector(self.node_selector)

    @model_validator(mode="after")
    def _check(self) -> NodePool:
        _percentages(self.thresholds, "thresholds")
        _percentages(self.target_thresholds, "targetThresholds")
        if not self.thresholds and not self.target_thresholds:
            raise ValueError(
                f"node pool {self.name!r} sets neither thresholds nor targetThresholds"
            )
        return self


@dataclass(frozen=True, slots=True)
class PoolOf:
    """A node's pool under the configuration's ``nodePools``."""

    pool: NodePool | None  # None: in no pool, or in several (``overlap``)
    overlap: tuple[str, ...] = ()  # the pools that all select it: it gets the defaults

    @property
    def name(self) -> str | None:
        return None if self.pool is None else self.pool.name


NO_POOL = PoolOf(None)


class DeschedulerCompatible(_Section):
    """The fields of the configuration that kubernetes-sigs/descheduler's users already
    know, under its names and with its meaning: the document's kind, LowNodeUtilization's
    thresholds (on real usage here) and DefaultEvictor's rules of which pods may go; and
    the rules the thresholds keep among themselves. ``DeschedulerConfig`` adds loadaware's
    own fields to these (pydantic lists a base's fields first: the file's order)."""

    api_version: str = Field(default=API_VERSION, description=f"Always {API_VERSION!r}.")
    kind: str = Field(default=KIND, description=f"Always {KIND!r}.")
    thresholds: dict[Resource, Number] = Field(
        default_factory=lambda: dict(DEFAULT_THRESHOLDS),
        description="Real usage, % of allocatable, at or below which (every resource) a node "
        "is underutilized and may receive evicted pods; it must stay at or below with their "
        "real usage added. With useDeviationThresholds: the distance below the mean.",
    )
    target_thresholds: dict[Resource, Number] = Field(
        default_factory=lambda: dict(DEFAULT_TARGET_THRESHOLDS),
        description="Real usage, % of allocatable, above which (any resource) a node is hot. "
        "Pods are evicted until it is back at or below, or as far as the limits allow when "
        "that set still gains minimumGain. With useDeviationThresholds: the distance above "
        "the mean.",
    )
    use_deviation_thresholds: Switch = Field(
        default=False,
        description="Measure thresholds from the mean usage of the nodes with fresh data.",
    )
    number_of_nodes: WholeNumber = Field(
        default=0,
        ge=0,
        description="Act only when more than this many nodes are underutilized.",
    )
    metrics: dict[Resource, str] = Field(
        default_factory=lambda: dict(DEFAULT_METRICS),
        description="The node annotation (a policy syncPolicy metric) that stands for each "
        "resource's usage.",
    )
    evictable_namespaces: Namespaces = Field(
        default_factory=Namespaces, description="Namespaces whose pods may be evicted."
    )
    node_selector: Annotated[dict[str, str], BeforeValidator(_label_map)] = Field(
        default_factory=dict,
        description="Only nodes with all these labels are sources or destinations: a map, "
        "or descheduler's string form 'key=value,key2=value2'.",
    )
    max_no_of_pods_to_evict_per_node: WholeNumber | None = Field(
        default=None, ge=0, description="At most this many evictions per node per run."
    )
    max_no_of_pods_to_evict_per_namespace: WholeNumber | None = Field(
        default=None, ge=0, description="At most this many evictions per namespace per run."
    )
    max_no_of_pods_to_evict_total: WholeNumber | None = Field(
        default=None, ge=0, description="At most this many evictions per run."
    )
    evict_local_storage_pods: Switch = Field(
        default=False, description="Allow evicting pods with emptyDir or hostPath volumes."
    )
    evict_system_critical_pods: Switch = Field(
        default=False,
        description="Allow evicting pods with priority >= 2000000000 (system-critical).",
    )
    ignore_pvc_pods: Switch = Field(
        default=True,
        description="Never evict pods with PersistentVolumeClaims. Unlike descheduler, on by "
        "default: a pod bound to a zonal volume often cannot move to the chosen node.",
    )
    evict_bare_pods: Switch = Field(
        default=False, description="Allow evicting running pods without an owner (not recreated)."
    )
    evict_failed_bare_pods: Switch = Field(
        default=False,
        description="Accepted for descheduler compatibility. Failed pods use no CPU or memory, "
        "so the real-load planner never picks them either way.",
    )
    priority_threshold: PriorityThreshold | None = Field(
        default=None, description="Never evict pods at or above this priority."
    )
    min_pod_age: DurationS = Field(
        default=0.0, ge=0, description="Never evict pods younger than this (Go duration)."
    )
    min_replicas: WholeNumber = Field(
        default=0,
        ge=0,
        description="Never evict pods whose controller owns fewer than this many pods.",
    )
    evict_last_replica: Switch = Field(
        default=False,
        description="Allow evicting the last Ready pod of a controller (off: such a pod is "
        "never evicted, which is what single-replica workloads need).",
    )

    @model_validator(mode="after")
    def _check_thresholds(self) -> DeschedulerCompatible:
        if self.api_version != API_VERSION:
            raise ValueError(f"apiVersion is {self.api_version!r}, expected {API_VERSION!r}")
        if self.kind != KIND:
            raise ValueError(f"kind is {self.kind!r}, expected {KIND!r}")
        _percentages(self.thresholds, "thresholds")
        _percentages(self.target_thresholds, "targetThresholds")
        if set(self.thresholds) != set(self.target_thresholds):
            raise ValueError(
                "thresholds and targetThresholds must name the same resources "
                f"(got {sorted(self.thresholds)} and {sorted(self.target_thresholds)})"
            )
        if not self.target_thresholds:
            raise ValueError("targetThresholds is empty: name cpu, memory or both")
        if not self.use_deviation_thresholds:
            for resource, low in self.thresholds.items():
                if low > self.target_thresholds[resource]:
                    raise ValueError(
                        f"thresholds.{resource} ({low:g}) is above targetThresholds."
                        f"{resource} ({self.target_thresholds[resource]:g})"
                    )
        return self


class DeschedulerConfig(DeschedulerCompatible):
    """``loadaware descheduler``'s configuration (``apiVersion: loadaware.io/v1alpha1``):
    the fields descheduler's users know (``DeschedulerCompatible``), then loadaware's own:
    the scheduler it plans for, the loop's pace, cooldowns and bounds per workload, the
    per-pod usage queries, consolidation and node pools."""

    scheduler: ReplacementScheduler = Field(
        default="extender",
        description="The scheduler that places the evicted pods' replacements. "
        "'extender': kube-scheduler calls loadaware's extender, which filters out hot "
        "nodes; the plan sends each pod to the roomiest destination. 'soft-taints': a "
        "kube-scheduler without the extender, steered by the annotator's soft taints: a "
        "hot node is a source only while it carries the taint (deploy/overlays/"
        "soft-taints sets it, with the annotator's soft taints), and a pod moves only "
        "where the default profile, the taint scored, would place its replacement off "
        "the source, on nodes that on average it leaves under targetThresholds (skip "
        "codes back_on_source, no_destination, hot_landing, wave_ahead). 'requests': a "
        "kube-scheduler that places by requests alone: a pod moves only where every node "
        "kube-scheduler would choose for its replacement is off the source and provably "
        "stays under targetThresholds, every pod there at its limit (a pod without "
        "limits: no proof; skip code unproven_landing), since beside that scheduler a "
        "landing that heats later cannot be undone; else the run stands down and says "
        "so. Not detected: "
        "the descheduler cannot see kube-scheduler's configuration, and a cluster "
        "without taints may simply have no hot node.",
    )
    dry_run: Switch = Field(default=False, description="Plan and print, evict nothing.")
    interval: DurationS = Field(
        default=300.0,
        description=f"Time between runs, at least {format_duration(MIN_INTERVAL_S)}.",
    )
    consecutive_hot_rounds: WholeNumber = Field(
        default=3,
        ge=1,
        description="A node must be seen above targetThresholds in this many consecutive "
        "runs before pods are evicted from it. The count is kept in the descheduler's memory "
        "(its state ConfigMap), so it survives restarts and counts across "
        "--once runs; a count older than twice interval restarts at 0, so with --once set "
        "interval to the CronJob's schedule.",
    )
    settle_time: DurationS = Field(
        default=300.0,
        ge=0,
        description="After an eviction, a node's sample must be this much newer than the "
        "eviction before it is trusted to show it; until then the evicted usage is "
        "subtracted from the source and added to the destination.",
    )
    workload_cooldown: DurationS = Field(
        default=900.0,
        ge=0,
        description="After evicting a pod of a workload, leave the workload alone this long.",
    )
    return_cooldown: DurationS = Field(
        default=3600.0,
        ge=0,
        description="A workload evicted from a node is not sent back to it for this long: "
        "the node is no destination for the workload's pods; and a replacement is not "
        "evicted again from the node the plan sent it to, or the source the scheduler put "
        "it back on. Within workloadCooldown the "
        "workload is not moved at all, so this matters when it is longer.",
    )
    minimum_gain: Number = Field(
        default=2.0,
        ge=0,
        le=100,
        allow_inf_nan=False,
        description="Judged per source over all the evictions a run plans from it: they "
        "must bring it to or below targetThresholds, or lower its usage of a resource it is "
        "hot on by at least this many percentage points of allocatable; else none of them "
        "is made (a smaller gain is not worth restarting pods), and the plan says why.",
    )
    max_migrating_per_workload: WholeNumber = Field(
        default=5,
        ge=1,
        le=1000,
        description="At most this many pods of one workload (a Deployment, StatefulSet, "
        "... as workloadCooldown names it) are evicted in one run (koordinator's "
        "maxMigratingPerWorkload). maxUnavailablePerWorkload bounds it further for "
        "workloads of fewer than 50 pods.",
    )
    max_unavailable_per_workload: Annotated[str, BeforeValidator(_count_or_percent)] = Field(
        default="10%",
        description="At most this many of a workload's pods may be unavailable at once, "
        "counting its pods not Ready (a replacement still starting included) and those "
        "this run evicts: a count ('2') or a percentage of its pods ('10%', rounded down, "
        "at least 1). A workload with this many pods already not Ready loses none "
        "(koordinator's maxUnavailablePerWorkload).",
    )
    evictions_per_second: Number = Field(
        default=1.0,
        ge=MIN_EVICTIONS_PER_SECOND,
        le=MAX_EVICTIONS_PER_SECOND,
        allow_inf_nan=False,
        description="Rate limit on eviction calls, between "
        f"{MIN_EVICTIONS_PER_SECOND:g} (one every {1 / MIN_EVICTIONS_PER_SECOND:g}s) and "
        f"{MAX_EVICTIONS_PER_SECOND:g} per second.",
    )
    pod_usage_queries: PodUsageQuerySection = Field(
        default_factory=PodUsageQuerySection, description="PromQL for per-pod usage."
    )
    consolidation: Consolidation = Field(
        default_factory=Consolidation,
        description="Drain underused nodes for a node autoscaler to remove (opt-in).",
    )
    node_pools: tuple[NodePool, ...] = Field(
        default=(),
        max_length=MAX_NODE_POOLS,
        description=(
            "Node pools, each a label selector with its own thresholds and targetThresholds; a "
            "node in no pool, or in two (an error, logged), gets the configuration's own."
        ),
    )

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, seconds: float) -> float:
        because = "each run lists every node and pod and queries Prometheus"
        return at_least(seconds, MIN_INTERVAL_S, "interval", because)

    @model_validator(mode="after")
    def _check(self) -> DeschedulerConfig:
        """After ``_check_thresholds`` (pydantic runs a base's validators first)."""
        _check_node_pools(self)
        for resource in self.target_thresholds:
            metric = self.metrics.get(resource)
            if metric is None:
                raise ValueError(f"metrics.{resource} is missing: name the annotation to read")
            if resource_of_metric(metric) != resource:
                raise ValueError(
                    f"metrics.{resource} is {metric!r}, which does not measure {resource} "
                    f"(crane's names start with cpu_ or mem_)"
                )
        return self

    def metrics_missing_from(self, synced: Collection[str]) -> list[str]:
        """Each metric read here that syncPolicy (``synced``) lacks: no data, no moves."""
        return [
            f"metrics.{resource} is {self.metric_for(resource)!r}, which the policy does not "
            f"sync (its syncPolicy has {', '.join(sorted(synced)) or 'nothing'})"
            for resource in self.resources
            if self.metric_for(resource) not in synced
        ]

    def metric_for(self, resource: str) -> str:
        """The annotation read for a balanced resource."""
        return self.metrics["cpu" if resource == "cpu" else "memory"]

    @cached_property
    def resources(self) -> tuple[Resource, ...]:
        """The resources the planner balances, in a fixed order."""
        ordered: tuple[Resource, ...] = ("cpu", "memory")
        return tuple(r for r in ordered if r in self.target_thresholds)


def pool_of(config: DeschedulerConfig, node: NodeInfo) -> PoolOf:
    """Which of the node pools ``node`` is in (app/policy/pools.py says why a node two
    pools select gets the defaults)."""
    if not config.node_pools:
        return NO_POOL
    labels = node.labels
    found = [pool for pool in config.node_pools if pool.selector.matches(labels)]
    if len(found) == 1:
        return PoolOf(found[0])
    if not found:
        return NO_POOL
    return PoolOf(None, tuple(pool.name for pool in found))


def pool_thresholds(
    config: DeschedulerConfig, pool: NodePool
) -> tuple[dict[Resource, float], dict[Resource, float]]:
    """A pool's thresholds and targetThresholds (percent), the configuration's own where
    the pool leaves a resource out."""
    return (
        {r: pool.thresholds.get(r, config.thresholds[r]) for r in config.target_thresholds},
        {
            r: pool.target_thresholds.get(r, config.target_thresholds[r])
            for r in config.target_thresholds
        },
    )


def _check_node_pools(config: DeschedulerConfig) -> None:
    problem = _node_pools_problem(config)
    if problem is not None:
        raise ValueError(problem)


def _node_pools_problem(config: DeschedulerConfig) -> str | None:
    twice = duplicate_name(pool.name for pool in config.node_pools)
    if twice is not None:
        return f"nodePools names pool {twice!r} twice"
    for pool in config.node_pools:
        for field, values in (
            ("thresholds", pool.thresholds),
            ("targetThresholds", pool.target_thresholds),
        ):
            unknown = sorted(set(values) - set(config.target_thresholds))
            if unknown:
                return (
                    f"nodePools {pool.name!r}: {field} names {', '.join(unknown)}, which "
                    f"targetThresholds does not balance"
                )
        if not config.use_deviation_thresholds:
            low, high = pool_thresholds(config, pool)
            for resource, value in low.items():
                if value > high[resource]:
                    return (
                        f"nodePools {pool.name!r}: thresholds.{resource} ({value:g}) is "
                        f"above targetThresholds.{resource} ({high[resource]:g})"
                    )
    return overlap_problem((pool.name, pool.node_selector) for pool in config.node_pools)


def state_window_s(config: DeschedulerConfig) -> float:
    """How far back the descheduler's state of evictions must reach: settling, the
    cooldowns, and one more interval."""
    longest = max(config.settle_time, config.workload_cooldown, config.return_cooldown)
    return longest + config.interval


def config_from_mapping(document: Any, source: str = "<memory>") -> DeschedulerConfig:
    if document is None:
        document = {}
    if isinstance(document, Mapping) and document.get("kind", KIND) != KIND:
        # Checked before the fields, so that a policy or a ConfigMap passed by mistake is
        # named as such (as `policy check` names it), not as a list of unknown fields.
        hint = ""
        if document.get("kind") == "DynamicSchedulerPolicy":
            hint = ": that is a policy; pass it with --policy"
        elif document.get("kind") == "ConfigMap":
            hint = ": pass the configuration file it holds instead (one of its data keys)"
        raise ConfigError(f"{source}: kind is {document.get('kind')!r}, expected {KIND!r}{hint}")
    return validate(DeschedulerConfig, document, source, KIND, ConfigError)


def config_from_yaml(text: str, source: str = "<memory>") -> DeschedulerConfig:
    """Validate a YAML document; raise ConfigError naming each bad field."""
    return config_from_mapping(parse_yaml(text, source, ConfigError), source)

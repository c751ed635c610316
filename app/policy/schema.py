"""The scheduling policy: crane's ``DynamicSchedulerPolicy`` file format, validated.

A crane policy file loads unchanged, including crane's misspelled ``maxLimitPecent``.
Durations use Go's syntax (``90s``, ``3m``, ``1h30m``) because that is what crane
files contain.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Protocol

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from app.documents import parse_yaml, read_file, validate
from app.objects import (
    MAX_DURATION_S,
    at_least,
    duration_range_problem,
    format_duration,
    parse_duration_s,
    parse_quantity,
)
from app.policy.metric_names import class_unsampled_key, percentile_problem, split_class_metric
from app.policy.pools import (
    NodePools,
    PoolMatch,
    duplicate_name,
    label_selector,
    merged,
    overlap_problem,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_POLICY_YAML",
    "FRESHNESS_GRACE_S",
    "HOT_VALUE_VALID_S",
    "KIND",
    "MAX_NODE_POOLS",
    "DurationS",
    "DynamicSchedulerPolicy",
    "EstimationPolicy",
    "HotValuePolicy",
    "NodePoolPolicy",
    "Number",
    "Policy",
    "PolicyError",
    "PolicySpec",
    "PoolSelector",
    "PredicatePolicy",
    "PriorityPolicy",
    "Switch",
    "SyncPolicy",
    "WholeNumber",
    "default_policy",
    "load_policy",
    "policy_from_mapping",
    "policy_from_yaml",
    "resource_of_metric",
]

API_VERSION = "scheduler.policy.crane.io/v1alpha1"
KIND = "DynamicSchedulerPolicy"

# crane treats a metric as fresh for one sync period plus this grace, so that a
# sync that runs a little late does not make every node's data stale at once.
FRESHNESS_GRACE_S = 5 * 60.0

# crane's hot value annotation counts for this long after it was written.
HOT_VALUE_VALID_S = 5 * 60.0

# Upper bounds that no sensible policy reaches; beyond them a value is a typo or an
# attack (``weight: 1e308`` overflows the score's sum to infinity). Every float field
# also refuses NaN and infinity. Durations lie from 1ms to 720h, as on the command line
# (MIN_DURATION_S, MAX_DURATION_S in app/objects/durations.py).
MAX_WEIGHT = 1e6
MAX_HOT_VALUE_COUNT = 1_000_000
MAX_ESTIMATION_FACTOR = 10.0
MAX_DEFAULT_CPU_CORES = 10_000.0
MAX_DEFAULT_MEMORY_BYTES = 2.0**50  # 1 PiB


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file, field and problem."""


def _duration_field(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a duration string such as '3m'")
    if isinstance(value, int | float):
        # Bare numbers are ambiguous (seconds? nanoseconds, as Go would read them?).
        raise ValueError(f"expected a duration string such as '3m', got the number {value}")
    if not isinstance(value, str):
        raise ValueError("expected a duration string such as '3m'")
    seconds = parse_duration_s(value)
    problem = duration_range_problem(seconds, value)
    if problem is not None:
        raise ValueError(problem)
    return seconds


def _bounded_duration(seconds: float) -> float:
    # A duration given as a float (by a caller in Python, not a file) is bounded too.
    if seconds > MAX_DURATION_S:
        raise ValueError(
            f"duration {format_duration(seconds)} is longer than the maximum "
            f"{format_duration(MAX_DURATION_S)}"
        )
    return seconds


DurationS = Annotated[float, BeforeValidator(_duration_field), AfterValidator(_bounded_duration)]


def _number(value: Any) -> Any:
    """Booleans are not numbers: YAML's ``yes`` and ``true`` are refused where pydantic
    would read them as 1. (A string that spells a number stays a number: PyYAML reads
    ``1e-3``, without a dot, as a string.)"""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {_described(value)}")
    return value


def _switch(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_described(value)}")
    return value


def _described(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {value} (YAML reads yes, no, on and off as booleans)"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return f"a {type(value).__name__}"


# Typed values in a file: a boolean is neither a number nor read from one (``enabled: 1``).
Number = Annotated[float, BeforeValidator(_number)]
WholeNumber = Annotated[int, BeforeValidator(_number)]
Switch = Annotated[bool, BeforeValidator(_switch)]

# A metric's name is a node annotation's key (the annotator writes it, the extender reads
# it) and, by crane's convention, a Prometheus recording rule's name: it must be one or
# the other (a name such as ``cpu_usage_avg_5m`` is both). Kubernetes' qualified names:
# an optional DNS-subdomain prefix and ``/``, then at most 63 characters.
_PROMETHEUS_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ANNOTATION_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_METRIC_NAME_CHARS = 253 + 1 + 63


def is_annotation_key(name: str) -> bool:
    prefix, slash, rest = name.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(_ANNOTATION_NAME.fullmatch(rest))


def _metric_name(name: str) -> str:
    if len(name) > MAX_METRIC_NAME_CHARS or not (
        _PROMETHEUS_NAME.fullmatch(name) or is_annotation_key(name)
    ):
        raise ValueError(
            f"metric name {name[:80]!r} is neither a Prometheus metric name nor a node "
            f"annotation key: use letters, digits and '_', such as cpu_usage_avg_5m"
        )
    problem = percentile_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


MetricName = Annotated[str, AfterValidator(_metric_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class _MetricEntry(_Strict):
    name: MetricName = Field(min_length=1, strict=True)


# The annotator queries Prometheus for a metric and patches every node once a period (and
# publishes workload usage on the shortest one): a shorter period is a busy loop against
# both, as the descheduler's ``interval`` (MIN_INTERVAL_S, app/rebalance/config.py), and
# the recording rules it reads change once a scrape interval anyway.
MIN_SYNC_PERIOD_S = 1.0


class SyncPolicy(_MetricEntry):
    period_s: DurationS = Field(validation_alias=AliasChoices("period", "period_s"), gt=0)

    @field_validator("period_s")
    @classmethod
    def _at_least_the_minimum(cls, seconds: float) -> float:
        because = "the annotator queries Prometheus and patches every node each period"
        return at_least(seconds, MIN_SYNC_PERIOD_S, "period", because)


class PredicatePolicy(_MetricEntry):
    # crane's field is spelled maxLimitPecent; both spellings are accepted.
    max_limit_fraction: Number = Field(
        validation_alias=AliasChoices("maxLimitPecent", "maxLimitPercent", "max_limit_fraction"),
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="usage fraction (0..1) above which a node is rejected; 0 disables",
    )

    @model_validator(mode="before")
    @classmethod
    def _explain_percent_values(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            if "maxLimitPecent" in data and "maxLimitPercent" in data:
                raise ValueError(
                    "both maxLimitPecent (crane's spelling) and maxLimitPercent are set: "
                    "keep one of them"
                )
            for key in ("maxLimitPecent", "maxLimitPercent"):
                value = data.get(key)
                if isinstance(value, float) and not math.isfinite(value):
                    continue  # the field says so, as every number field does: "finite"
                if isinstance(value, int | float) and not isinstance(value, bool) and value > 1:
                    raise ValueError(
                        f"{key} is {value}, but it is a fraction of 1 despite its name: "
                        f"write {value / 100:g} for {value:g} %"
                    )
        return data


class PriorityPolicy(_MetricEntry):
    weight: Number = Field(ge=0.0, le=MAX_WEIGHT, allow_inf_nan=False)


# Node pools (loadaware's addition, issue 45): the models of the file's
# ``spec.nodePools``; what they mean (which pool a node is in, a pool's policy, the
# overlaps) is ``app/policy/pools.py``.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_POOL_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_NODE_POOLS = 64
MAX_SELECTOR_TERMS = 32


def _label_key(key: str) -> str:
    if not is_annotation_key(key):
        raise ValueError(f"{key[:80]!r} is not a label key (such as node.kubernetes.io/pool)")
    return key


def _label_value(value: str) -> str:
    if not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not a label value (at most 63 letters, digits, '-', '_', '.')"
        )
    return value


LabelKey = Annotated[str, Field(strict=True), AfterValidator(_label_key)]
LabelValue = Annotated[str, Field(strict=True), AfterValidator(_label_value)]


class SelectorRequirement(_Strict):
    """One ``matchExpressions`` entry, as in a Kubernetes label selector."""

    key: LabelKey
    operator: str = Field(strict=True)
    values: tuple[LabelValue, ...] = Field(default=(), max_length=MAX_SELECTOR_TERMS)

    @model_validator(mode="after")
    def _check(self) -> SelectorRequirement:
        if self.operator not in SELECTOR_OPERATORS:
            raise ValueError(
                f"operator {self.operator[:40]!r} is not one of {', '.join(SELECTOR_OPERATORS)}"
            )
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class LabelSelectorPolicy(_Strict):
    """A Kubernetes label selector, as a file writes one (``matchLabels``,
    ``matchExpressions``): a node pool's over node labels, a class's over pod labels."""

    match_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("matchLabels", "match_labels"),
        max_length=MAX_SELECTOR_TERMS,
    )
    match_expressions: tuple[SelectorRequirement, ...] = Field(
        default=(),
        validation_alias=AliasChoices("matchExpressions", "match_expressions"),
        max_length=MAX_SELECTOR_TERMS,
    )


class PoolSelector(LabelSelectorPolicy):
    """A node pool's ``nodeSelector``: a label selector over node labels, not empty."""

    @model_validator(mode="after")
    def _not_empty(self) -> PoolSelector:
        if not self.match_labels and not self.match_expressions:
            raise ValueError(
                "nodeSelector is empty, which would select every node: give matchLabels "
                "or matchExpressions (the nodes in no pool already get the policy's own limits)"
            )
        return self


class NodePoolPolicy(_Strict):
    """One node pool: the nodes ``node_selector`` selects are judged with these
    predicates in place of the policy's own, metric by metric (app/policy/pools.py)."""

    name: str = Field(strict=True, pattern=f"^{_POOL_NAME.pattern}$", max_length=63)
    node_selector: PoolSelector = Field(
        validation_alias=AliasChoices("nodeSelector", "node_selector")
    )
    predicate: tuple[PredicatePolicy, ...]  # at least one (``_pool_problem``)


class HotValuePolicy(_Strict):
    time_range_s: DurationS = Field(
        validation_alias=AliasChoices("timeRange", "time_range_s"), gt=0
    )
    count: WholeNumber = Field(gt=0, le=MAX_HOT_VALUE_COUNT)


Quantity = Annotated[float, BeforeValidator(parse_quantity)]


class EstimationFactors(_Strict):
    """The share of ``max(request, limit)`` a new pod is assumed to use, per resource."""

    cpu: Number = Field(default=0.85, ge=0.0, le=MAX_ESTIMATION_FACTOR, allow_inf_nan=False)
    memory: Number = Field(default=0.70, ge=0.0, le=MAX_ESTIMATION_FACTOR, allow_inf_nan=False)


class DefaultPodUsage(_Strict):
    """The usage assumed for a pod that declares neither a request nor a limit for a
    resource (kube-scheduler's own non-zero defaults for scoring: 100m CPU, 200Mi)."""

    cpu_cores: Quantity = Field(
        default=0.1,
        validation_alias=AliasChoices("cpu", "cpu_cores"),
        ge=0.0,
        le=MAX_DEFAULT_CPU_CORES,
        allow_inf_nan=False,
    )
    memory_bytes: Quantity = Field(
        default=200 * 2.0**20,
        validation_alias=AliasChoices("memory", "memory_bytes"),
        ge=0.0,
        le=MAX_DEFAULT_MEMORY_BYTES,
        allow_inf_nan=False,
    )


class EstimationPolicy(_Strict):
    """loadaware's addition to crane's format: usage of pods placed since a node's last
    sample (see app/load/estimate.py). Optional, and on when absent."""

    enabled: Switch = True
    factors: EstimationFactors = Field(default_factory=EstimationFactors)
    default_pod_usage: DefaultPodUsage = Field(
        default_factory=DefaultPodUsage,
        validation_alias=AliasChoices("defaultPodUsage", "default_pod_usage"),
    )
    max_age_s: DurationS = Field(
        default=5 * 60.0, validation_alias=AliasChoices("maxAge", "max_age_s"), gt=0
    )
    # A sample covers a pod only when taken this long after its binding: the usage
    # metrics are 5-minute averages, and a pod just bound is still starting. At least
    # a second, so that equal timestamps (1-second resolution) always count the pod.
    covered_after_s: DurationS = Field(
        default=5 * 60.0,
        validation_alias=AliasChoices("coveredAfter", "covered_after_s"),
        ge=1.0,
    )
    # A pod bound through the scheduler is estimated at least at what its workload's
    # running pods are observed to use, one pod (app/load/estimate.py, README).
    workload_usage: Switch = Field(
        default=True, validation_alias=AliasChoices("workloadUsage", "workload_usage")
    )


class PackingPolicy(_Strict):
    """loadaware's addition to crane's format: score nodes toward a target real usage
    (as Trimaran's TargetLoadPacking does, on every priority metric): a node's score for
    a metric rises with its usage up to ``target`` and falls above it, so that new pods
    fill used nodes instead of waking idle ones (app/load/model.py, ``priority_share``).
    Optional, and off unless enabled: crane's score (the free fraction) applies."""

    enabled: Switch = False
    target: Number = Field(default=0.4, gt=0.0, lt=1.0, allow_inf_nan=False)


def check_metric_lists(
    lists: Iterable[tuple[str, Iterable[_MetricEntry]]], priority: tuple[PriorityPolicy, ...]
) -> None:
    """No list (``priority`` among them) names a metric twice, and some weight is above 0
    where ``priority`` names any (the spec's lists, and a class's)."""
    for field, entries in (*lists, ("priority", priority)):
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                raise ValueError(f"{field} lists metric {entry.name!r} twice")
            seen.add(entry.name)
    if priority and not any(p.weight > 0 for p in priority):
        raise ValueError("priority weights are all 0: give at least one metric a weight > 0")


class PolicySpec(_Strict):
    sync_policy: tuple[SyncPolicy, ...] = Field(
        default=(), validation_alias=AliasChoices("syncPolicy", "sync_policy")
    )
    predicate: tuple[PredicatePolicy, ...] = ()
    priority: tuple[PriorityPolicy, ...] = ()
    hot_value: tuple[HotValuePolicy, ...] = Field(
        default=(), validation_alias=AliasChoices("hotValue", "hot_value")
    )
    estimation: EstimationPolicy = Field(default_factory=EstimationPolicy)
    packing: PackingPolicy = Field(default_factory=PackingPolicy)
    node_pools: tuple[NodePoolPolicy, ...] = Field(
        default=(),
        validation_alias=AliasChoices("nodePools", "node_pools"),
        max_length=MAX_NODE_POOLS,
    )
    # loadaware's classes of pods (app/policy/classes.py, which builds on this module:
    # the package's front resolves the name, so that no import runs both ways); none:
    # every pod is judged alike. Checked against the spec as a whole there.
    classes: PodClassesField = ()  # type: ignore[name-defined]  # noqa: F821

    @model_validator(mode="after")
    def _check_consistency(self) -> PolicySpec:
        if not self.sync_policy:
            raise ValueError(
                "syncPolicy is empty: name at least one metric (such as cpu_usage_avg_5m), "
                "or the annotator syncs nothing and the extender filters and scores nothing"
            )
        check_metric_lists(
            (("syncPolicy", self.sync_policy), ("predicate", self.predicate)), self.priority
        )
        problem = _pool_problem(self) if self.node_pools else None
        if problem is not None:
            raise ValueError(problem)
        return self


def _pool_problem(spec: PolicySpec) -> str | None:
    """What is wrong with ``spec``'s node pools that the file alone shows, or None
    (app/policy/pools.py)."""
    twice = duplicate_name(pool.name for pool in spec.node_pools)
    if twice is not None:
        return f"nodePools names pool {twice!r} twice"
    synced = {entry.name for entry in spec.sync_policy}
    for pool in spec.node_pools:
        if not pool.predicate:
            return f"nodePools {pool.name!r}: predicate is empty: name the limits it changes"
        twice = duplicate_name(entry.name for entry in pool.predicate)
        if twice is not None:
            return f"nodePools {pool.name!r}: predicate lists metric {twice!r} twice"
        for entry in pool.predicate:
            if entry.name not in synced:
                return (
                    f"nodePools {pool.name!r}: predicate metric {entry.name!r} is not in "
                    f"syncPolicy, so its values never count as fresh and the limit holds "
                    f"nothing: add it to syncPolicy"
                )
    return overlap_problem((pool.name, pool.node_selector) for pool in spec.node_pools)


class DynamicSchedulerPolicy(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    api_version: str = Field(
        default=API_VERSION,
        validation_alias=AliasChoices("apiVersion", "api_version"),
        strict=True,
    )
    kind: str = Field(default=KIND, strict=True)
    spec: PolicySpec

    @model_validator(mode="after")
    def _check_kind(self) -> DynamicSchedulerPolicy:
        if self.kind != KIND:
            raise ValueError(f"kind is {self.kind!r}, expected {KIND!r}")
        return self

    @field_validator("api_version")
    @classmethod
    def _check_api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(
                f"apiVersion is {value!r}, expected {API_VERSION!r} (crane's, the only "
                f"version of this format)"
            )
        return value


class LimitsAbove(Protocol):
    """A class's policy's ``limits_above`` (``ClassLimitsAbove`` in ``app/policy/classes.py``,
    which builds on this module): the higher classes whose limits hold where their pods
    run."""

    @property
    def others(self) -> tuple[tuple[str, tuple[str, str], Mapping[str, float]], ...]: ...
    def in_pool(self, pool_predicate: tuple[PredicatePolicy, ...]) -> LimitsAbove: ...
    def judged(self, policy: Policy, present: frozenset[str]) -> Policy: ...


@dataclass(frozen=True)  # no slots: the lookups below are cached on the instance
class Policy:
    """The policy in the form the load model uses: lookups computed once per policy
    (cached properties: a reload makes a new Policy, so nothing can go stale),
    warnings collected."""

    spec: PolicySpec
    source: str
    warnings: tuple[str, ...]
    metrics: tuple[str, ...]  # every metric named anywhere, in first-mention order
    freshness_windows_s: Mapping[str, float]  # how long after its timestamp a value counts
    # crane-scheduler's scoring of a metric without fresh data: as fully used (free 0),
    # not at its filter limit. Never set from a file: the simulator's ``crane`` sets it.
    missing_scored_as_full: bool = False
    # A class's policy (app/policy/classes.py): the other classes whose limits hold where
    # their pods run (``app.load.judged_by``); None for every other policy.
    limits_above: LimitsAbove | None = None

    @classmethod
    def from_spec(cls, spec: PolicySpec, source: str) -> Policy:
        names: dict[str, None] = {}
        for entry in (*spec.sync_policy, *spec.predicate, *spec.priority):
            names.setdefault(entry.name, None)
        windows = {entry.name: entry.period_s + FRESHNESS_GRACE_S for entry in spec.sync_policy}
        return cls(spec, source, _warnings_for(spec), tuple(names), windows)

    def freshness_window_s(self, metric: str) -> float | None:
        return self.freshness_windows_s.get(metric)

    def resource_of(self, metric: str) -> str | None:
        """The resource a metric measures: "cpu" for ``cpu_*``, "memory" for ``mem_*``."""
        return resource_of_metric(metric)

    @cached_property
    def metric_windows(self) -> tuple[tuple[str, float | None], ...]:
        """Every metric with its freshness window (None: not synced), in policy order."""
        return tuple((metric, self.freshness_window_s(metric)) for metric in self.metrics)

    @cached_property
    def metric_resources(self) -> Mapping[str, str]:
        """Metric → the resource it measures, for the metrics that measure one."""
        return MappingProxyType(
            {m: r for m in self.metrics if (r := self.resource_of(m)) is not None}
        )

    @cached_property
    def unsampled_keys(self) -> Mapping[str, str]:
        """Metric → the key of a node's ``unsampled`` usage added to it
        (``app.load.assess``): a node metric's resource ("cpu", "memory"); a class
        usage's ``class_unsampled_key`` (``production:cpu_usage`` reads
        ``production:cpu``: the class's own pods placed since the sample, as koordinator
        adds the estimates of production pods not yet reported to production's usage)."""
        keys = dict(self.metric_resources)
        for metric in self.metrics:
            owner = split_class_metric(metric)
            if owner is not None:
                keys[metric] = class_unsampled_key(*owner)
        return MappingProxyType(keys)

    @cached_property
    def limits(self) -> tuple[tuple[str, float], ...]:
        """(metric, maxLimitPercent) of the predicates that set a limit, in policy order."""
        return tuple(
            (p.name, p.max_limit_fraction) for p in self.spec.predicate if p.max_limit_fraction > 0
        )

    @cached_property
    def priority_ceilings(self) -> tuple[tuple[str, float, float], ...]:
        """(metric, weight, ceiling) of each priority, in policy order: the ceiling is the
        metric's filter limit, or 1.0 (fully used) where no predicate limits it, or
        always 1.0 under crane's rule (``missing_scored_as_full``)."""
        limits = {} if self.missing_scored_as_full else dict(self.limits)
        return tuple((p.name, p.weight, limits.get(p.name, 1.0)) for p in self.spec.priority)

    @cached_property
    def packing_target(self) -> float | None:
        """The usage fraction priority scores pack toward (``spec.packing``), or None for
        crane's free-fraction score."""
        return self.spec.packing.target if self.spec.packing.enabled else None

    @cached_property
    def node_pools(self) -> NodePools[Policy]:
        """The policy's node pools, each with the policy its nodes are judged by: this
        one with the pool's predicates in place of its own (``app/policy/pools.py``);
        empty (and false) for a policy without ``nodePools``."""
        return NodePools(
            PoolMatch(self, None),
            tuple(
                (p.name, label_selector(p.node_selector), PoolMatch(self._in(p), p.name))
                for p in self.spec.node_pools
            ),
        )

    def _in(self, pool: NodePoolPolicy) -> Policy:
        predicate = merged(self.spec.predicate, pool.predicate)
        spec = self.spec.model_copy(update={"predicate": predicate, "node_pools": ()})
        limits_above = (
            self.limits_above.in_pool(pool.predicate) if self.limits_above is not None else None
        )
        return replace(self, spec=spec, limits_above=limits_above)

    def for_node(self, labels: Mapping[str, str]) -> Policy:
        """The policy a node with these labels is judged by (``node_pools``: its pool's,
        or this one)."""
        return self.node_pools.match(labels).judged_by if self.spec.node_pools else self

    def as_crane_scores(self) -> Policy:
        """This policy with crane-scheduler's rule for missing data (scored as full)."""
        return replace(self, missing_scored_as_full=True)


def resource_of_metric(metric: str) -> str | None:
    """crane's metric names start with the resource they measure (``cpu_``, ``mem_``)."""
    if metric.startswith("cpu_"):
        return "cpu"
    if metric.startswith(("mem_", "memory_")):
        return "memory"
    return None


def _warnings_for(spec: PolicySpec) -> tuple[str, ...]:
    synced = {entry.name for entry in spec.sync_policy}
    warnings = []
    for field, entries in (("predicate", spec.predicate), ("priority", spec.priority)):
        for entry in entries:
            if entry.name not in synced:
                warnings.append(
                    f"{field} metric {entry.name!r} has no syncPolicy entry, so its values can "
                    f"never count as fresh: it rejects no node and scores as missing data (as in "
                    f"crane); add it to syncPolicy"
                )
    for sync in spec.sync_policy:
        if not _PROMETHEUS_NAME.fullmatch(sync.name):
            warnings.append(
                f"syncPolicy metric {sync.name!r} is a node annotation key but no Prometheus "
                f"metric name: loadaware's annotator cannot sync it (it refuses this policy); "
                f"something else must write that annotation"
            )
    if not spec.hot_value:
        warnings.append("hotValue is empty: recent bindings will not lower any node's score")
    return tuple(warnings)


def policy_from_mapping(document: Any, source: str = "<memory>") -> Policy:
    """Validate a parsed policy document; raise PolicyError naming each bad field."""
    if isinstance(document, Mapping) and document.get("kind", KIND) != KIND:
        hint = ""
        if document.get("kind") == "ConfigMap":
            hint = (
                ": pass the policy file it holds instead (one of its data keys, for example "
                "kubectl get configmap NAME -o jsonpath='{.data.policy\\.yaml}')"
            )
        raise PolicyError(f"{source}: kind is {document.get('kind')!r}, expected {KIND!r}{hint}")
    parsed = validate(DynamicSchedulerPolicy, document, source, KIND, PolicyError)
    for entry in parsed.spec.predicate:
        if math.isnan(entry.max_limit_fraction):
            raise PolicyError(f"{source}: predicate {entry.name!r} has a NaN limit")
    return Policy.from_spec(parsed.spec, source)


def policy_from_yaml(text: str, source: str = "<memory>") -> Policy:
    return policy_from_mapping(parse_yaml(text, source, PolicyError), source)


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file."""
    return policy_from_yaml(*read_file(path, "policy file", PolicyError))


DEFAULT_POLICY_YAML = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - name: cpu_usage_avg_5m
      period: 3m
    - name: cpu_usage_max_avg_1h
      period: 15m
    - name: cpu_usage_max_avg_1d
      period: 3h
    - name: mem_usage_avg_5m
      period: 3m
    - name: mem_usage_max_avg_1h
      period: 15m
    - name: mem_usage_max_avg_1d
      period: 3h
  predicate:
    - name: cpu_usage_avg_5m
      maxLimitPecent: 0.65
    - name: cpu_usage_max_avg_1h
      maxLimitPecent: 0.75
    - name: mem_usage_avg_5m
      maxLimitPecent: 0.65
    - name: mem_usage_max_avg_1h
      maxLimitPecent: 0.75
  priority:
    - name: cpu_usage_avg_5m
      weight: 0.2
    - name: cpu_usage_max_avg_1h
      weight: 0.3
    - name: cpu_usage_max_avg_1d
      weight: 0.5
    - name: mem_usage_avg_5m
      weight: 0.2
    - name: mem_usage_max_avg_1h
      weight: 0.3
    - name: mem_usage_max_avg_1d
      weight: 0.5
  hotValue:
    - timeRange: 5m
      count: 5
    - timeRange: 1m
      count: 2
"""


def default_policy() -> Policy:
    """crane's default policy, used by the demo and when no file is given."""
    return policy_from_yaml(DEFAULT_POLICY_YAML, "<built-in default policy>")

"""Classes of pods: loadaware's optional ``spec.classes`` section of a policy (issue 45).

A class names the pods whose priority lies in a range (and, optionally, whose labels
match a selector), and gives them limits and weights of their own::

    classes:
      - name: production
        minPriority: 9000
        maxPriority: 9999
        predicate:
          - name: production:cpu_usage        # what production pods use on the node
            maxLimitPercent: 0.45
      - name: batch
        minPriority: 5000
        maxPriority: 5999
        predicate:
          - name: cpu_usage_avg_5m            # the node's own metric, stricter for batch
            maxLimitPercent: 0.55
          - name: production:cpu_usage        # and no batch where production is busy
            maxLimitPercent: 0.35
        priority:
          - name: production:cpu_usage
            weight: 1

What a pod of a class is judged by (``class_spec``): the policy's predicates with the
class's own entries in place of those of the same metric (and its class-usage entries
added), and the class's weights in place of the policy's when it gives any. A pod in
no class, and every pod of a policy without ``classes``, is judged by the policy alone,
exactly as before: nothing is assumed when the section is absent.

A class-usage metric is ``<class>:cpu_usage`` or ``<class>:mem_usage``: what the pods
of that class use on the node, a fraction of its allocatable, as the annotator
publishes it from the per-pod usage queries (the CPU rate over 5 minutes, the memory
working set) under the annotation ``loadaware.io/class-usage.<class>.<resource>``. It
counts as fresh for the policy's shortest sync period (the annotator's publishing
period) plus the usual grace. A class may name any class's usage (a batch class that
keeps off nodes where production is busy names ``production:cpu_usage``).

Bad input is refused at load, in one line naming the class: a class-usage metric of
an unknown class, priority ranges that overlap, a metric that is neither synced nor a
class usage, two classes of one name. The koordinator bands (prod 9000-9999, mid
7000-7999, batch 5000-5999, free 3000-3999) are a suggestion in docs/tuning.md only.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.objects import LabelSelector
from app.policy.metric_names import (
    CLASS_NAME,
    CLASS_USAGE_METRICS,
    split_class_metric,
)
from app.policy.pools import label_selector
from app.policy.schema import (
    FRESHNESS_GRACE_S,
    LabelSelectorPolicy,
    Policy,
    PolicySpec,
    PredicatePolicy,
    PriorityPolicy,
    SyncPolicy,
    WholeNumber,
    _Strict,
    check_metric_lists,
)

# Few classes are meaningful (koordinator has four bands); the bound keeps the
# annotations the annotator writes per node, and the tables the extender keeps, small.
MAX_CLASSES = 8
# Kubernetes' priority is an int32; the system-critical band starts at 2,000,000,000.
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1

CLASS_USAGE_KEY_PREFIX = "loadaware.io/class-usage."


class PodSelector(LabelSelectorPolicy):
    """A class's ``selector``: a label selector over the pod's labels (empty: every pod
    in the class's priority range)."""

    def selector(self) -> LabelSelector:
        return label_selector(self)


class PodClassPolicy(_Strict):
    """One ``spec.classes`` entry (module doc)."""

    name: str = Field(strict=True)
    min_priority: WholeNumber = Field(
        validation_alias=AliasChoices("minPriority", "min_priority"),
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
    )
    max_priority: WholeNumber = Field(
        validation_alias=AliasChoices("maxPriority", "max_priority"),
        ge=MIN_PRIORITY,
        le=MAX_PRIORITY,
    )
    selector: PodSelector = Field(default_factory=lambda: PodSelector.model_validate({}))
    predicate: tuple[PredicatePolicy, ...] = ()
    priority: tuple[PriorityPolicy, ...] = ()

    @field_validator("name")
    @classmethod
    def _class_name(cls, name: str) -> str:
        if not CLASS_NAME.fullmatch(name):
            raise ValueError(
                f"class name {name[:40]!r}: use 1 to 32 lower-case letters, digits and '_', "
                f"starting with a letter (such as production or batch)"
            )
        return name

    @model_validator(mode="after")
    def _range_and_entries(self) -> PodClassPolicy:
        if self.min_priority > self.max_priority:
            raise ValueError(
                f"minPriority {self.min_priority} is above maxPriority {self.max_priority}"
            )
        check_metric_lists((("predicate", self.predicate),), self.priority)
        return self

    def holds(self, priority: int) -> bool:
        return self.min_priority <= priority <= self.max_priority


def class_usage_key(class_name: str, resource: str) -> str:
    """The node annotation the annotator writes a class's usage of a resource under."""
    return f"{CLASS_USAGE_KEY_PREFIX}{class_name}.{resource}"


def class_problems(
    classes: tuple[PodClassPolicy, ...], synced: Collection[str] | None
) -> list[str]:
    """What is wrong with ``spec.classes``, whose ``syncPolicy`` names ``synced`` (module
    doc; None: a syncPolicy that did not validate, reported on its own)."""
    if len(classes) > MAX_CLASSES:
        return [f"classes lists {len(classes)} classes; at most {MAX_CLASSES}"]
    problems: list[str] = []
    names = [c.name for c in classes]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"classes: two classes are named {name!r}")
    ordered = sorted(classes, key=lambda c: (c.min_priority, c.max_priority))
    for lower, upper in itertools.pairwise(ordered):
        if upper.min_priority <= lower.max_priority:
            problems.append(
                f"classes {lower.name!r} ({lower.min_priority}-{lower.max_priority}) and "
                f"{upper.name!r} ({upper.min_priority}-{upper.max_priority}) overlap: a pod's "
                f"priority must name one class at most"
            )
    known = set(names)
    for pod_class in classes:
        lists = (("predicate", pod_class.predicate), ("priority", pod_class.priority))
        for field, entries in lists:
            for entry in entries:
                usage = split_class_metric(entry.name)
                if usage is not None:
                    if usage[0] not in known:
                        problems.append(
                            f"class {pod_class.name!r} {field} {entry.name!r} names the usage of "
                            f"an unknown class {usage[0]!r} (classes: {', '.join(names)})"
                        )
                elif ":" in entry.name and entry.name.partition(":")[2] not in CLASS_USAGE_METRICS:
                    problems.append(
                        f"class {pod_class.name!r} {field} {entry.name!r}: a class-usage metric "
                        f"is <class>:cpu_usage or <class>:mem_usage"
                    )
                elif synced is not None and entry.name not in synced:
                    problems.append(
                        f"class {pod_class.name!r} {field} metric {entry.name!r} has no "
                        f"syncPolicy entry: add it there, or name a class usage such as "
                        f"{pod_class.name}:cpu_usage"
                    )
    return problems


def _checked_against_spec(
    classes: tuple[PodClassPolicy, ...], info: ValidationInfo
) -> tuple[PodClassPolicy, ...]:
    sync_policy = info.data.get("sync_policy")
    synced = {entry.name for entry in sync_policy} if sync_policy is not None else None
    # A syncPolicy that did not validate is reported on its own: metrics go unchecked.
    problems = class_problems(classes, synced)
    if problems:
        raise ValueError("; ".join(problems))
    return classes


PodClassesField = Annotated[tuple[PodClassPolicy, ...], AfterValidator(_checked_against_spec)]
"""``spec.classes``: the classes, checked against one another and the spec's syncPolicy
(``PolicySpec`` is declared before this module; the package's front resolves the name)."""


def _class_predicate(spec: PolicySpec, pod_class: PodClassPolicy) -> list[PredicatePolicy]:
    """The policy's predicates with the class's in place of those of the same metric,
    then the class's others."""
    overrides = {entry.name: entry for entry in pod_class.predicate}
    predicate = [overrides.pop(p.name, p) for p in spec.predicate]
    predicate.extend(overrides.values())
    return predicate


def node_limits(predicate: Iterable[PredicatePolicy]) -> dict[str, float]:
    """The limits (above 0) of ``predicate`` on the node's own metrics, not on class usages."""
    return {
        p.name: p.max_limit_fraction
        for p in predicate
        if p.max_limit_fraction > 0 and split_class_metric(p.name) is None
    }


def higher_classes(
    classes: Iterable[PodClassPolicy], pod_class: PodClassPolicy
) -> tuple[PodClassPolicy, ...]:
    """The classes of a higher priority than ``pod_class`` (ranges never overlap)."""
    return tuple(c for c in classes if c.min_priority > pod_class.max_priority)


def presence_metrics(class_name: str) -> tuple[str, str]:
    """The class usages that tell whether the class's pods run on a node (either above 0)."""
    return f"{class_name}:cpu_usage", f"{class_name}:mem_usage"


def class_spec(spec: PolicySpec, pod_class: PodClassPolicy) -> PolicySpec:
    """The policy a pod of ``pod_class`` is judged by (module doc): a plain spec without
    classes, whose class-usage metrics are synced on the shortest sync period: those its
    limits and weights name, and those that tell where the other classes' pods run
    (``ClassLimitsAbove``)."""
    predicate = _class_predicate(spec, pod_class)
    priority = pod_class.priority or spec.priority
    period_s = min(entry.period_s for entry in spec.sync_policy)
    above = (c.name for c in higher_classes(spec.classes, pod_class))
    used = dict.fromkeys(
        (
            *(e.name for e in (*predicate, *priority) if split_class_metric(e.name) is not None),
            *(metric for name in above for metric in presence_metrics(name)),
        )
    )
    sync = (
        *spec.sync_policy,
        *(SyncPolicy.model_construct(name=m, period_s=period_s) for m in used),
    )
    return spec.model_copy(
        update={
            "sync_policy": sync,
            "predicate": tuple(predicate),
            "priority": tuple(priority),
            "classes": (),
        }
    )


@dataclass(frozen=True)
class ClassLimitsAbove:
    """The classes of a higher priority whose pods a node may run, for a pod of one
    class (its policy's ``limits_above``): where such a class's pods run on the node (one of
    its class usages is fresh and above 0: ``app.load.judged_by``), that class's limits
    on the node's own metrics hold for the pod too, wherever they are stricter than its
    own. A pod never pushes a node past the limits of a higher class running there:
    batch allowed 92 % of the CPU stops at production's 65 % on a node where
    production runs. A higher class is not held back by a lower one's limits."""

    # (class, the class usages that show its pods, its limits on the node's own metrics)
    others: tuple[tuple[str, tuple[str, str], Mapping[str, float]], ...]
    # The policy judged beside each set of classes present, made once each.
    _judged: dict[frozenset[str], Policy] = dataclass_field(default_factory=dict, compare=False)

    def in_pool(self, pool_predicate: Iterable[PredicatePolicy]) -> ClassLimitsAbove:
        """The same in a node pool, whose predicates replace every class's of the same
        metric (``Policy.for_node``)."""
        pool = {p.name: p.max_limit_fraction for p in pool_predicate}
        others = tuple(
            (name, shown_by, {m: v for m, v in {**limits, **pool}.items() if v > 0})
            for name, shown_by, limits in self.others
        )
        return ClassLimitsAbove(others)

    def judged(self, policy: Policy, present: frozenset[str]) -> Policy:
        """``policy`` (the pod's class's, whose ``limits_above`` this is) with each limit on a
        node metric lowered to the strictest of the ``present`` classes' (module doc)."""
        kept = self._judged.get(present)
        if kept is not None:
            return kept
        limits = {p.name: p.max_limit_fraction for p in policy.spec.predicate}
        for name, _, theirs in self.others:
            if name in present:
                for metric, limit in theirs.items():
                    own = limits.get(metric, 0.0)
                    limits[metric] = limit if own <= 0 else min(own, limit)
        predicate = tuple(
            PredicatePolicy.model_construct(name=metric, max_limit_fraction=limit)
            for metric, limit in limits.items()
        )
        spec = policy.spec.model_copy(update={"predicate": predicate})
        made = self._judged[present] = replace(policy, spec=spec, limits_above=None)
        return made


@dataclass(frozen=True)
class PodClasses:
    """A policy's classes, ready for the verdict: each class's policy made once."""

    classes: tuple[PodClassPolicy, ...]
    policies: Mapping[str, Policy]  # class name -> the policy its pods are judged by
    selectors: Mapping[str, LabelSelector]
    # Every class-usage metric some class names -> its annotation key.
    annotation_keys: Mapping[str, str]
    freshness_window_s: float  # how long a published class usage counts
    # Class name -> its policy without its limits on its own usage (``yielding_policy``),
    # for the classes that have such a limit: what a pod of the class is judged by
    # where no node passes it under its own policy.
    yielding: Mapping[str, Policy] = dataclass_field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.classes)

    def class_of(self, priority: Any, labels: Mapping[str, str] | None) -> str | None:
        """The class of a pod of this priority and these labels; None: no class (a
        priority that is no integer, a bool included, is in none)."""
        if not isinstance(priority, int) or isinstance(priority, bool):
            return None
        for pod_class in self.classes:
            if pod_class.holds(priority):
                selector = self.selectors.get(pod_class.name)
                if selector is not None and not selector.matches(labels or {}):
                    return None
                return pod_class.name
        return None


def pod_classes(policy: Policy) -> PodClasses:
    """``PodClasses`` of a policy, made once and kept on it (a Policy is immutable and
    keeps its derived lookups on itself, as its cached properties do)."""
    kept = policy.__dict__.get("_pod_classes")
    if isinstance(kept, PodClasses):
        return kept
    made = _pod_classes(policy)
    policy.__dict__["_pod_classes"] = made
    return made


def _pod_classes(policy: Policy) -> PodClasses:
    spec = policy.spec
    policies: dict[str, Policy] = {}
    keys: dict[str, str] = {}
    selectors: dict[str, LabelSelector] = {}
    yielding: dict[str, Policy] = {}
    limits = {c.name: node_limits(_class_predicate(spec, c)) for c in spec.classes}
    for pod_class in spec.classes:
        source = f"{policy.source} class {pod_class.name}"
        derived = Policy.from_spec(class_spec(spec, pod_class), source)
        others = tuple(
            (c.name, presence_metrics(c.name), MappingProxyType(limits[c.name]))
            for c in higher_classes(spec.classes, pod_class)
        )
        if others:
            derived = replace(derived, limits_above=ClassLimitsAbove(others))
        policies[pod_class.name] = derived
        relaxed = yielding_policy(derived, pod_class.name)
        if relaxed is not None:
            yielding[pod_class.name] = relaxed
        for metric in derived.metrics:
            usage = split_class_metric(metric)
            if usage is not None:
                keys[metric] = class_usage_key(*usage)
        selector = pod_class.selector
        if selector.match_labels or selector.match_expressions:
            selectors[pod_class.name] = selector.selector()
    shortest_s = min((e.period_s for e in spec.sync_policy), default=0.0)
    return PodClasses(
        spec.classes,
        MappingProxyType(policies),
        MappingProxyType(selectors),
        MappingProxyType(keys),
        shortest_s + FRESHNESS_GRACE_S,
        MappingProxyType(yielding),
    )


def yielding_policy(policy: Policy, class_name: str) -> Policy | None:
    """A class's ``policy`` without its limits on its own usage (``<class>:cpu_usage``,
    ``<class>:mem_usage``); None where it has none. Such a limit is room the class keeps
    for its own peak, not a ceiling on its growth: where no node passes a pod of the
    class under its policy, the nodes that pass every other limit of it (the node's
    own, with the pod; the other classes' usages) take the pod rather than let it wait
    (docs/tuning.md, "Classes of pods"). Without classes such a pod would have been
    placed wherever the node's usage allowed (issue 45: production's scale-up waited
    twice as long with classes on a shape whose production nodes had room)."""
    own = presence_metrics(class_name)
    predicate = policy.spec.predicate
    kept = tuple(p for p in predicate if not (p.name in own and p.max_limit_fraction > 0))
    if len(kept) == len(predicate):
        return None
    return replace(policy, spec=policy.spec.model_copy(update={"predicate": kept}))


__all__ = [
    "CLASS_USAGE_KEY_PREFIX",
    "MAX_CLASSES",
    "ClassLimitsAbove",
    "PodClassPolicy",
    "PodClasses",
    "PodClassesField",
    "PodSelector",
    "class_problems",
    "class_spec",
    "class_usage_key",
    "pod_classes",
]

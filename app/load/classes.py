"""Classes of pods in the load model: which class a pod is in, what its class's usage
is on a node, and the policy its verdict is judged by (``app/policy/classes.py``).

A pod of a class is judged by ``node_verdict`` (``app/load/verdict.py``) like any
other, under its class's policy (``policy_for_pod``) and over the node's annotations
with the class usages the annotator published read in as metrics
(``class_annotations``). A policy without classes answers None and the node's own
annotations at once: the callers keep their one-policy path untouched.

The annotator's side is ``class_usage``: each node's usage by class, from the per-pod
usage it already reads, as fractions of the node's allocatable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from app.objects import Resources
from app.policy import PodClasses, Policy, class_usage_key, pod_classes

__all__ = [
    "class_annotations",
    "class_usage",
    "class_usage_annotations",
    "pod_class",
    "pod_labels",
    "policy_for_pod",
]

MAX_LABELS = 64  # a pod's labels read for a class selector; more is garbage


def pod_labels(pod: Mapping[str, Any]) -> dict[str, str]:
    """A pod's labels from its JSON, bounded; anything that is not str -> str is left out."""
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    found: dict[str, str] = {}
    for key, value in labels.items():
        if isinstance(key, str) and isinstance(value, str):
            found[key] = value
            if len(found) >= MAX_LABELS:
                break
    return found


def pod_class(pod: Mapping[str, Any], classes: PodClasses) -> str | None:
    """The class of a pod given as its JSON (a kube-scheduler request's Pod): by its
    ``spec.priority``, the API server's word (its Priority admission resolves
    ``priorityClassName``), and its labels. None: no class, or no classes at all."""
    if not classes:
        return None
    spec = pod.get("spec")
    priority = spec.get("priority") if isinstance(spec, Mapping) else None
    return classes.class_of(priority, pod_labels(pod))


def policy_for_pod(policy: Policy, pod: Mapping[str, Any]) -> Policy:
    """The policy a pod is judged by: its class's, or ``policy`` itself."""
    classes = pod_classes(policy)
    if not classes:
        return policy
    name = pod_class(pod, classes)
    return policy if name is None else classes.policies[name]


def class_annotations(annotations: Mapping[str, str], classes: PodClasses) -> Mapping[str, str]:
    """The node's annotations with each class usage a class names read in under its
    metric name (``production:cpu_usage``), for ``measure`` under a class's policy."""
    keys = classes.annotation_keys
    if not keys:
        return annotations
    found = {m: v for m, key in keys.items() if (v := annotations.get(key)) is not None}
    if not found:
        return annotations
    return {**annotations, **found}


def class_usage(
    usage: Mapping[str, Resources],
    class_of_pod: Mapping[str, str],
    node_of_pod: Mapping[str, str],
    allocatable: Mapping[str, Resources],
    class_names: Iterable[str],
) -> dict[str, dict[str, Resources]]:
    """Per node (with a known, non-zero allocatable), per class, the usage of the
    class's pods as fractions of the node's allocatable (0 for a class without a
    measured pod there). Pods in no class, or on an unknown node, count for none."""
    names = tuple(class_names)
    sums: dict[str, dict[str, list[float]]] = {}  # node -> class -> [cores, bytes]
    for pod, used in usage.items():
        name, node = class_of_pod.get(pod), node_of_pod.get(pod)
        if name is None or node is None or node not in allocatable:
            continue
        per_class = sums.setdefault(node, {})
        total = per_class.setdefault(name, [0.0, 0.0])
        total[0] += used.cpu_cores
        total[1] += used.memory_bytes
    fractions: dict[str, dict[str, Resources]] = {}
    for node, node_allocatable in allocatable.items():
        cpu, memory = node_allocatable.cpu_cores, node_allocatable.memory_bytes
        if not (cpu > 0 and memory > 0):
            continue
        per_class = sums.get(node, {})
        fractions[node] = {
            name: Resources(
                _fraction(per_class.get(name, _NONE)[0] / cpu),
                _fraction(per_class.get(name, _NONE)[1] / memory),
            )
            for name in names
        }
    return fractions


_NONE = (0.0, 0.0)


def _fraction(value: float) -> float:
    """A usage fraction as the annotator writes one: within 0..1 (NaN: 0)."""
    return min(1.0, value) if value > 0 else 0.0


def class_usage_annotations(
    fractions: Mapping[str, Resources], format_value: Callable[[float], str]
) -> dict[str, str]:
    """A node's class-usage annotations, ``format_value(fraction)`` each."""
    annotations: dict[str, str] = {}
    for name, used in fractions.items():
        annotations[class_usage_key(name, "cpu")] = format_value(used.cpu_cores)
        annotations[class_usage_key(name, "memory")] = format_value(used.memory_bytes)
    return annotations

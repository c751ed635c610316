"""Label selectors with Kubernetes semantics (``matchLabels`` and ``matchExpressions``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "LabelRequirement",
    "LabelSelector",
]


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes semantics; an empty selector matches every pod (as in a PDB)."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(_holds(requirement, labels) for requirement in self.match_expressions)


def _holds(requirement: LabelRequirement, labels: Mapping[str, str]) -> bool:
    present = requirement.key in labels
    if requirement.operator == "In":
        return present and labels[requirement.key] in requirement.values
    if requirement.operator == "NotIn":
        return not present or labels[requirement.key] not in requirement.values
    if requirement.operator == "Exists":
        return present
    if requirement.operator == "DoesNotExist":
        return not present
    return False  # an operator we do not know matches nothing: the safe side for a PDB

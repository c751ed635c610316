"""The labels a captured workload keeps for the policy's classes of pods.

A class may name its pods by a label ``selector`` as well as by priority
(``app/policy/classes.py``). The captured scenario keeps each workload's ``priority``;
here, for a policy with class selectors, it keeps the template labels those selectors
read, so the replay puts each workload in the class the live policy puts its pods in.
Only the selectors' keys are kept. Anonymized, a value the policy's selectors do not
name is written as ``other`` (``In``, ``NotIn`` and ``matchLabels`` compare named values
only, ``Exists`` and ``DoesNotExist`` the key): membership is the same, and no label
value of a tenant's leaves the cluster that the policy did not already name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.policy import pod_classes, policy_from_mapping

UNNAMED_VALUE = "other"


def class_labels(
    policy: Mapping[str, Any] | None, anonymous: bool
) -> Callable[[Mapping[str, str]], dict[str, str]] | None:
    """The labels to keep of a workload's, or None when no class selector reads any."""
    if policy is None:
        return None
    classes = pod_classes(policy_from_mapping(policy, "the captured policy"))
    keys: set[str] = set()
    named: dict[str, set[str]] = {}
    for selector in classes.selectors.values():
        for key, value in selector.match_labels.items():
            keys.add(key)
            named.setdefault(key, set()).add(value)
        for requirement in selector.match_expressions:
            keys.add(requirement.key)
            named.setdefault(requirement.key, set()).update(requirement.values)
    if not keys:
        return None

    def kept(labels: Mapping[str, str]) -> dict[str, str]:
        found = {k: v for k, v in labels.items() if k in keys}
        if anonymous:
            found = {k: v if v in named.get(k, ()) else UNNAMED_VALUE for k, v in found.items()}
        return dict(sorted(found.items()))

    return kept

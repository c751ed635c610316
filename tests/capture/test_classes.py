"""capture keeps the labels the policy's class selectors read, and no other."""

from __future__ import annotations

from typing import Any

from app.capture.classes import class_labels
from app.policy import pod_classes, policy_from_mapping

POLICY: dict[str, Any] = {
    "spec": {
        "syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}],
        "classes": [
            {
                "name": "batch",
                "minPriority": 5000,
                "maxPriority": 5999,
                "selector": {
                    "matchLabels": {"tier": "batch"},
                    "matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["ml"]}],
                },
            }
        ],
    }
}
LABELS = {"tier": "batch", "team": "finance", "app": "etl", "pod-template-hash": "7d9f"}


def test_only_the_selectors_keys_are_kept() -> None:
    kept = class_labels(POLICY, anonymous=False)
    assert kept is not None
    assert kept(LABELS) == {"team": "finance", "tier": "batch"}


def test_anonymized_a_value_the_policy_does_not_name_is_other_and_membership_holds() -> None:
    kept = class_labels(POLICY, anonymous=True)
    assert kept is not None
    classes = pod_classes(policy_from_mapping(POLICY))
    for labels in (LABELS, {**LABELS, "team": "ml"}, {"team": "x"}):
        written = kept(labels)
        assert "finance" not in written.values()
        assert classes.class_of(5500, written) == classes.class_of(5500, labels)


def test_no_selector_or_no_policy_keeps_no_label() -> None:
    assert class_labels(None, anonymous=False) is None
    plain = {"spec": {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "3m"}]}}
    assert class_labels(plain, anonymous=True) is None

"""Policies with node pools for the tests (``spec.nodePools``, app/policy/pools.py)."""

from __future__ import annotations

from collections.abc import Mapping

from app.policy import DEFAULT_POLICY_YAML, Policy, policy_from_yaml


def policy_with_pools(pools: Mapping[str, tuple[Mapping[str, str], float]]) -> Policy:
    """The default policy with a node pool per entry: its name, the labels its selector
    matches, and its limit on ``cpu_usage_avg_5m`` (every other limit the policy's)."""
    text = "".join(
        f"    - name: {name}\n"
        f"      nodeSelector: {{matchLabels: {dict(labels)}}}\n"
        f"      predicate: [{{name: cpu_usage_avg_5m, maxLimitPercent: {limit}}}]\n"
        for name, (labels, limit) in pools.items()
    )
    return policy_from_yaml(DEFAULT_POLICY_YAML + "  nodePools:\n" + text)

"""The packing score (``spec.packing``, issue 43): a priority metric's share rises with
the node's usage up to the target and falls above it, so the extender prefers the used
node nearest the target from below over an idle one, and a node over the target less
the further over it is; without ``packing`` the score is crane's, unchanged."""

from __future__ import annotations

import pytest

from app.load.model import evaluate_node, priority_share, score_parts
from app.load.samples import format_usage
from app.policy import PolicyError, default_policy, policy_from_yaml

NOW = 1_700_000_000.0
NAMES = ("usage_avg_5m", "usage_max_avg_1h", "usage_max_avg_1d")


def packing(target: float = 0.4) -> str:
    return f"""apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - {{name: cpu_usage_avg_5m, period: 3m}}
  predicate:
    - {{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}}
  priority:
    - {{name: cpu_usage_avg_5m, weight: 1}}
  packing: {{enabled: true, target: {target}}}
"""


def at(cpu: float) -> dict[str, str]:
    return {"cpu_usage_avg_5m": format_usage(cpu, NOW - 10)}


@pytest.mark.parametrize(
    ("usage", "share"),
    [(0.0, 0.4), (0.2, 0.7), (0.4, 1.0), (0.7, 0.5), (1.0, 0.0), (1.3, 0.0)],
)
def test_the_share_rises_to_the_target_then_falls(usage: float, share: float) -> None:
    assert priority_share(usage, 0.4) == pytest.approx(share)


def test_without_packing_the_share_is_the_free_fraction() -> None:
    assert priority_share(0.3, None) == pytest.approx(0.7)


def test_the_extender_prefers_the_used_node_nearest_the_target_from_below() -> None:
    policy = policy_from_yaml(packing(), "packing.yaml")
    scores = {
        cpu: evaluate_node(at(cpu), policy, NOW).load_score for cpu in (0.05, 0.3, 0.38, 0.5, 0.6)
    }
    assert scores[0.38] > scores[0.3] > scores[0.05]  # fuller below the target: higher
    assert scores[0.38] > scores[0.5] > scores[0.6]  # past it: lower the further over
    crane = {cpu: evaluate_node(at(cpu), default_policy(), NOW).load_score for cpu in (0.05, 0.38)}
    assert crane[0.05] > crane[0.38]  # crane's score spreads instead
    # explain's parts add up to the same score
    load = evaluate_node(at(0.3), policy, NOW)
    parts = score_parts({r.metric: r for r in load.readings}, policy)
    assert int(sum(p.points for p in parts)) == load.load_score


@pytest.mark.parametrize("target", [0.0, 1.0, 1.5, -0.1])
def test_a_target_outside_0_to_1_is_refused(target: float) -> None:
    with pytest.raises(PolicyError, match="packing"):
        policy_from_yaml(packing(target), "packing.yaml")


def test_policy_check_says_packing_is_on() -> None:
    from app.policy_check.main import describe

    assert "packing: on; each priority metric scores highest at 40% usage" in describe(
        policy_from_yaml(packing(), "packing.yaml")
    )
    assert "packing" not in describe(default_policy())

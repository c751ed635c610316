"""Node pools in the policy (app/policy/pools.py): which pool a node is in, the limits
it is judged by, and every bad input refused in one line at load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.load import evaluate_node, format_usage
from app.policy import DEFAULT_POLICY_YAML, PolicyError, policy_from_mapping, policy_from_yaml

NOW_S = 1_700_000_000.0


def pools_policy(*pools: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    document["spec"]["nodePools"] = list(pools)
    return document


GPU = {
    "name": "gpu",
    "nodeSelector": {"matchLabels": {"pool": "gpu"}},
    "predicate": [
        {"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.4},
        {"name": "cpu_usage_max_avg_1d", "maxLimitPercent": 0.5},
    ],
}
GENERAL = {
    "name": "general",
    "nodeSelector": {
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["general"]}]
    },
    "predicate": [
        {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.9},
        {"name": "mem_usage_avg_5m", "maxLimitPercent": 0},
    ],
}


def test_a_policy_without_pools_judges_every_node_by_its_own_limits() -> None:
    policy = policy_from_yaml(DEFAULT_POLICY_YAML)
    assert not policy.node_pools
    assert policy.for_node({"pool": "gpu"}) is policy


def test_a_pool_replaces_the_policy_s_limits_metric_by_metric() -> None:
    policy = policy_from_mapping(pools_policy(GPU, GENERAL))
    gpu = policy.for_node({"pool": "gpu"})
    general = policy.for_node({"pool": "general", "zone": "a"})
    assert gpu.limits == (
        ("cpu_usage_avg_5m", 0.4),
        ("cpu_usage_max_avg_1h", 0.75),
        ("mem_usage_avg_5m", 0.65),
        ("mem_usage_max_avg_1h", 0.75),
        ("cpu_usage_max_avg_1d", 0.5),  # a limit the policy's own predicates do not set
    )
    # 0 turns a limit off in the pool, as it does in the policy.
    assert general.limits == (
        ("cpu_usage_avg_5m", 0.9),
        ("cpu_usage_max_avg_1h", 0.75),
        ("mem_usage_max_avg_1h", 0.75),
    )
    # Everything else is the policy's.
    assert gpu.spec.priority == policy.spec.priority
    assert gpu.freshness_windows_s == policy.freshness_windows_s


@pytest.mark.parametrize(
    ("labels", "pool", "limit"),
    [
        ({"pool": "gpu"}, "gpu", 0.4),
        ({"pool": "general"}, "general", 0.9),
        ({"pool": "other"}, None, 0.65),
        ({}, None, 0.65),
    ],
)
def test_a_node_is_judged_by_its_pool_s_limit(
    labels: dict[str, str], pool: str | None, limit: float
) -> None:
    policy = policy_from_mapping(pools_policy(GPU, GENERAL))
    match = policy.node_pools.match(labels)
    assert (match.pool, match.overlap) == (pool, ())
    just_above = {"cpu_usage_avg_5m": format_usage(limit + 0.01, NOW_S)}
    just_below = {"cpu_usage_avg_5m": format_usage(limit - 0.01, NOW_S)}
    node_policy = policy.for_node(labels)
    assert evaluate_node(just_above, node_policy, NOW_S).reason == (
        f"Load[cpu_usage_avg_5m] is too high (> {limit:g})"
    )
    assert evaluate_node(just_below, node_policy, NOW_S).reason is None


def test_a_node_two_pools_select_is_judged_by_the_policy_s_own_limits() -> None:
    zone = {
        "name": "zone-a",
        "nodeSelector": {"matchLabels": {"zone": "a"}},
        "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.2}],
    }
    policy = policy_from_mapping(pools_policy(GPU, zone))
    match = policy.node_pools.match({"pool": "gpu", "zone": "a"})
    assert (match.pool, match.overlap) == (None, ("gpu", "zone-a"))
    assert match.judged_by is policy
    assert "gpu, zone-a" in match.described
    assert policy.node_pools.match({"pool": "gpu", "zone": "b"}).pool == "gpu"


def test_the_score_s_ceiling_for_missing_data_follows_the_pool_s_limit() -> None:
    policy = policy_from_mapping(pools_policy(GPU))
    # No data at all: each metric is scored at its limit, the pool's on a pool node.
    default_score = evaluate_node({}, policy, NOW_S).load_score
    gpu_score = evaluate_node({}, policy.for_node({"pool": "gpu"}), NOW_S).load_score
    assert gpu_score > default_score


_STRICT = {"name": "a", "nodeSelector": {"matchLabels": {"pool": "gpu"}},
           "predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.4}]}  # fmt: skip


def _pool(**changes: Any) -> dict[str, Any]:
    return {**_STRICT, **changes}


@pytest.mark.parametrize(
    ("pools", "says"),
    [
        # Overlaps the file shows: the same selector, in either form ...
        (
            [_pool(), _pool(name="b", nodeSelector={"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["gpu"]}]})],
            "'a' and 'b' have the same nodeSelector",
        ),
        # ... or one asking a part of what the other asks.
        (
            [_pool(), _pool(name="b", nodeSelector={"matchLabels": {"pool": "gpu", "z": "a"}})],
            "'a' selects every node that 'b' selects",
        ),
        ([_pool(), _pool()], "names pool 'a' twice"),
        ([_pool(nodeSelector={})], "nodeSelector is empty"),
        ([_pool(nodeSelector={"matchLabels": {}})], "nodeSelector is empty"),
        ([_pool(predicate=[])], "predicate is empty"),
        ([_pool(predicate=[{"name": "gpu_usage", "maxLimitPercent": 0.4}])],
         "'gpu_usage' is not in syncPolicy"),
        ([_pool(predicate=[{"name": "cpu_usage_avg_5m", "maxLimitPercent": 0.4}] * 2)],
         "lists metric 'cpu_usage_avg_5m' twice"),
        ([_pool(predicate=[{"name": "cpu_usage_avg_5m", "maxLimitPercent": 40}])],
         "write 0.4 for 40 %"),
        ([_pool(name="GPU pool")], "should match pattern"),
        ([_pool(nodeSelector={"matchExpressions": [
            {"key": "pool", "operator": "Near", "values": ["gpu"]}]})], "'Near' is not one of"),
        ([_pool(nodeSelector={"matchExpressions": [{"key": "pool", "operator": "In"}]})],
         "needs at least one value"),
        ([_pool(nodeSelector={"matchExpressions": [
            {"key": "pool", "operator": "Exists", "values": ["x"]}]})], "takes no values"),
        ([_pool(nodeSelector={"matchLabels": {"bad key!": "x"}})], "is not a label key"),
        ([_pool(nodeSelector={"matchLabels": {"pool": "no spaces"}})], "is not a label value"),
        ([_pool(nodeSelector={"matchLabels": {"pool": 7}})], "string"),
        ([_pool(nodeSelector="pool=gpu")], "nodeSelector"),
        ([_pool(extra=1)], "extra"),
        ([{**_pool(), "name": f"p{i}", "nodeSelector": {"matchLabels": {"n": str(i)}}}
          for i in range(65)], "at most 64"),
    ],
)
def test_bad_pools_are_refused_at_load_in_one_line(pools: list[Any], says: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping(pools_policy(*pools), "policy.yaml")
    message = str(raised.value)
    assert says in message
    assert message.startswith("policy.yaml: ")
    assert "\n" not in message


def test_pools_that_may_overlap_on_some_labels_load() -> None:
    """Not decidable from the file: a node with both labels is an error at run time."""
    zone = _pool(name="zone-a", nodeSelector={"matchLabels": {"zone": "a"}})
    policy = policy_from_mapping(pools_policy(_pool(), zone))
    assert [name for name, _, _ in policy.node_pools.pools] == ["a", "zone-a"]


def test_policy_check_reports_the_pools_and_their_limits(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(pools_policy(GPU, GENERAL)))
    shown = _policy_check(path)
    assert shown.returncode == 0, shown.stderr
    assert "node pools: 2" in shown.stdout
    assert (
        "pool gpu: nodes with pool=gpu; reject above: cpu_usage_avg_5m 0.4, "
        "cpu_usage_max_avg_1d 0.5" in shown.stdout
    )
    assert (
        "pool general: nodes with pool in (general); reject above: cpu_usage_avg_5m 0.9, "
        "mem_usage_avg_5m off" in shown.stdout
    )


def test_policy_check_refuses_overlapping_pools_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    same = {**GENERAL, "nodeSelector": GPU["nodeSelector"]}
    path.write_text(yaml.safe_dump(pools_policy(GPU, same)))
    shown = _policy_check(path)
    assert shown.returncode == 2
    assert shown.stdout == ""
    assert shown.stderr.count("\n") == 1
    assert "'gpu' and 'general' have the same nodeSelector" in shown.stderr
    assert "Traceback" not in shown.stderr


def _policy_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "policy", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

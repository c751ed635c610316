"""spec.classes: classes of pods by priority, each with its own limits and weights."""

from __future__ import annotations

import pytest

from app.policy import (
    DEFAULT_POLICY_YAML,
    PolicyError,
    class_usage_key,
    default_policy,
    pod_classes,
    policy_from_yaml,
    split_class_metric,
)

CLASSES = """\
  classes:
    - name: production
      minPriority: 9000
      maxPriority: 9999
      predicate:
        - name: production:cpu_usage
          maxLimitPercent: 0.45
    - name: batch
      minPriority: 5000
      maxPriority: 5999
      selector:
        matchExpressions:
          - {key: team, operator: NotIn, values: [ml]}
      predicate:
        - name: cpu_usage_avg_5m
          maxLimitPercent: 0.55
        - name: production:cpu_usage
          maxLimitPercent: 0.35
      priority:
        - name: production:cpu_usage
          weight: 1
"""


def classed(extra: str = CLASSES) -> str:
    return DEFAULT_POLICY_YAML + extra


def test_a_policy_without_classes_has_none_and_judges_every_pod_alike() -> None:
    classes = pod_classes(default_policy())
    assert not classes
    assert classes.class_of(9500, {}) is None
    assert classes.policies == {}


def test_a_pod_is_in_the_class_its_priority_and_labels_name() -> None:
    classes = pod_classes(policy_from_yaml(classed()))
    assert classes.class_of(9000, {}) == "production"
    assert classes.class_of(9999, {}) == "production"
    assert classes.class_of(5500, {"team": "web"}) == "batch"
    assert classes.class_of(5500, {"team": "ml"}) is None  # the selector excludes it
    assert classes.class_of(7000, {}) is None
    assert classes.class_of(True, {}) is None  # a bool is no priority
    assert classes.class_of("9500", {}) is None


def test_a_class_policy_overrides_limits_by_metric_and_replaces_weights() -> None:
    policy = policy_from_yaml(classed())
    batch = pod_classes(policy).policies["batch"]
    limits = dict(batch.limits)
    assert limits["cpu_usage_avg_5m"] == 0.55  # its own
    assert limits["cpu_usage_max_avg_1h"] == 0.75  # the policy's, kept
    assert limits["production:cpu_usage"] == 0.35  # a class usage, added
    assert [(p.name, p.weight) for p in batch.spec.priority] == [("production:cpu_usage", 1.0)]
    # A class usage is fresh for the shortest sync period (3m) plus the grace (5m).
    assert batch.freshness_window_s("production:cpu_usage") == 480.0
    production = pod_classes(policy).policies["production"]
    assert production.spec.priority == policy.spec.priority  # no weights: the policy's
    assert dict(production.limits)["production:cpu_usage"] == 0.45
    # The base policy is untouched: the annotator syncs only what it syncs today.
    assert policy.metrics == default_policy().metrics


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("maxPriority: 5999", "maxPriority: 9100"),
            "classes 'batch' (5000-9100) and 'production' (9000-9999) overlap",
        ),
        (
            (
                "name: production:cpu_usage\n          maxLimitPercent: 0.35",
                "name: prod:cpu_usage\n          maxLimitPercent: 0.35",
            ),
            "names the usage of an unknown class 'prod' (classes: production, batch)",
        ),
        (
            (
                "name: cpu_usage_avg_5m\n          maxLimitPercent: 0.55",
                "name: cpu_usage_p95_avg_1h\n          maxLimitPercent: 0.55",
            ),
            "metric 'cpu_usage_p95_avg_1h' has no syncPolicy entry",
        ),
        (("name: batch", "name: production"), "two classes are named 'production'"),
        (("name: batch", "name: Batch-1"), "class name 'Batch-1'"),
        (("minPriority: 5000", "minPriority: 6000"), "minPriority 6000 is above maxPriority 5999"),
        (
            (
                "name: production:cpu_usage\n          weight: 1",
                "name: production:gpu_usage\n          weight: 1",
            ),
            "a class-usage metric is <class>:cpu_usage or <class>:mem_usage",
        ),
    ],
)
def test_bad_classes_are_one_clear_error_at_load(change: tuple[str, str], message: str) -> None:
    with pytest.raises(PolicyError) as error:
        policy_from_yaml(classed(CLASSES.replace(*change)), "policy.yaml")
    assert message in str(error.value)
    assert str(error.value).startswith("policy.yaml: invalid DynamicSchedulerPolicy:")


def test_more_classes_than_the_bound_are_refused() -> None:
    many = "  classes:\n" + "".join(
        f"    - {{name: c{i}, minPriority: {i * 10}, maxPriority: {i * 10 + 5}}}\n"
        for i in range(9)
    )
    with pytest.raises(PolicyError, match="at most 8"):
        policy_from_yaml(classed(many))


def test_class_metric_names_are_told_apart_from_node_metrics() -> None:
    assert split_class_metric("production:cpu_usage") == ("production", "cpu")
    assert split_class_metric("batch:mem_usage") == ("batch", "memory")
    assert split_class_metric("cpu_usage_avg_5m") is None
    assert split_class_metric("production:cpu_usage_avg_5m") is None
    assert split_class_metric("Prod:cpu_usage") is None


def test_policy_check_tells_each_class_and_where_its_usage_is_read() -> None:
    from app.policy_check.main import describe

    text = describe(policy_from_yaml(classed(), "policy.yaml"))
    assert "  batch: priority 5000..5999 and labels team NotIn ['ml']" in text
    assert "cpu_usage_avg_5m > 0.55" in text
    assert "scores by (its own weights): production:cpu_usage 100%" in text
    assert "production:cpu_usage <- loadaware.io/class-usage.production.cpu" in text
    # Batch is held to production's limits where production's pods run; production to none.
    limits_above = "    where pods of production run: their limits on the node's metrics too"
    assert text.count(limits_above) == 1
    assert text.index(limits_above) > text.index("  batch: priority")
    assert "production:mem_usage <- loadaware.io/class-usage.production.memory" in text
    assert "classes of pods" not in describe(default_policy())


HOT_BATCH = """\
  classes:
    - name: production
      minPriority: 9000
      maxPriority: 9999
    - name: batch
      minPriority: 5000
      maxPriority: 5999
      predicate:
        - {name: cpu_usage_avg_5m, maxLimitPercent: 0.92}
        - {name: cpu_usage_max_avg_1h, maxLimitPercent: 0}
"""


def test_a_lower_class_is_held_to_a_higher_class_s_limits_where_its_pods_run() -> None:
    classes = pod_classes(policy_from_yaml(classed(HOT_BATCH)))
    production, batch = classes.policies["production"], classes.policies["batch"]
    assert production.limits_above is None  # the highest class is held back by none
    assert batch.limits_above is not None
    # What shows production's pods on a node is read with batch's other metrics.
    assert {"production:cpu_usage", "production:mem_usage"} <= set(batch.metrics)
    assert classes.annotation_keys["production:mem_usage"] == class_usage_key(
        "production", "memory"
    )
    assert dict(batch.limits)["cpu_usage_avg_5m"] == 0.92
    limits_above = dict(batch.limits_above.judged(batch, frozenset({"production"})).limits)
    # Production's limits on the node's metrics (the policy's) where stricter, and
    # where batch turned one off; batch's own where it is the stricter (none here).
    assert limits_above["cpu_usage_avg_5m"] == 0.65
    assert limits_above["cpu_usage_max_avg_1h"] == 0.75
    assert limits_above["mem_usage_avg_5m"] == 0.65
    # Made once per set of classes present.
    assert batch.limits_above.judged(batch, frozenset({"production"})) is batch.limits_above.judged(
        batch, frozenset({"production"})
    )


def test_beside_a_higher_class_a_node_pool_s_limits_count_for_both() -> None:
    pools = """\
  nodePools:
    - name: gpu
      nodeSelector: {matchLabels: {pool: gpu}}
      predicate:
        - {name: cpu_usage_avg_5m, maxLimitPercent: 0.4}
"""
    policy = policy_from_yaml(classed(HOT_BATCH + pools))
    batch = pod_classes(policy).policies["batch"]
    in_gpu = batch.for_node({"pool": "gpu"})
    assert dict(in_gpu.limits)["cpu_usage_avg_5m"] == 0.4  # the pool's, for batch too
    assert in_gpu.limits_above is not None
    judged = dict(in_gpu.limits_above.judged(in_gpu, frozenset({"production"})).limits)
    assert judged["cpu_usage_avg_5m"] == 0.4
    assert judged["cpu_usage_max_avg_1h"] == 0.75


def test_without_classes_no_policy_is_judged_beside_anything() -> None:
    from app.load import judged_by, measure

    policy = default_policy()
    assert policy.limits_above is None
    for pool_policy in (policy, policy_from_yaml(classed(HOT_BATCH)).for_node({})):
        measured = measure({}, pool_policy, 0.0)
        assert judged_by(pool_policy, measured) is pool_policy


def test_a_class_with_a_limit_on_its_own_usage_has_a_policy_without_it() -> None:
    classes = pod_classes(policy_from_yaml(classed()))
    assert set(classes.yielding) == {"production"}  # batch limits no usage of its own
    production, yielding = classes.policies["production"], classes.yielding["production"]
    assert "production:cpu_usage" in dict(production.limits)
    assert dict(yielding.limits) == {
        m: v for m, v in production.limits if m != "production:cpu_usage"
    }
    assert yielding.spec.priority == production.spec.priority
    assert not pod_classes(default_policy()).yielding

"""The node table keeps its indexes equal to what the load model says, as time passes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.table import NodeTable
from app.load.model import evaluate_node
from app.load.samples import format_hot_value, format_usage
from app.policy import default_policy

NOW = 1_800_000_000.0
POLICY = default_policy()


class Clock:
    def __init__(self) -> None:
        self.now_s = NOW

    def __call__(self) -> float:
        return self.now_s


def test_hot_value_expiry_raises_the_score_without_a_node_update() -> None:
    clock = Clock()
    table = NodeTable(POLICY, clock)
    annotations = {
        "cpu_usage_avg_5m": format_usage(0.1, NOW),
        "node_hot_value": format_hot_value(4, NOW),
    }
    table.upsert("n1", annotations)
    before = table.index.get("n1")
    clock.now_s = NOW + 300  # the hot value is valid for 5 minutes
    table.refresh(clock())
    after = table.index.get("n1")
    assert before is not None
    assert after is not None
    assert after[0] > before[0]
    entry = table.get("n1")
    assert entry is not None
    assert entry.load.hot_value == 0


def test_removed_node_leaves_every_index() -> None:
    table = NodeTable(POLICY, Clock())
    table.upsert("n1", {"cpu_usage_avg_5m": format_usage(0.9, NOW)})
    assert "n1" in table.rejected_metric
    assert table.index.get("n1") is not None
    table.remove("n1")
    assert ("n1" in table.rejected_metric, table.index.get("n1"), table.get("n1")) == (
        False,
        None,
        None,
    )
    table.refresh(NOW + 10_000)  # its leftover recheck is skipped, not resurrected
    assert table.get("n1") is None


def test_recheck_heap_stays_bounded_under_constant_updates() -> None:
    clock = Clock()
    table = NodeTable(POLICY, clock)
    for step in range(5000):
        clock.now_s = NOW + step
        table.upsert(f"n{step % 10}", {"cpu_usage_avg_5m": format_usage(0.5, clock.now_s)})
    assert len(table._verdicts.rechecks) <= 4 * len(table) + 1024


@settings(max_examples=60, deadline=None)
@given(
    ages=st.lists(st.floats(-120, 4 * 3600), min_size=1, max_size=12),
    values=st.lists(st.floats(0, 1), min_size=12, max_size=12),
    hops=st.lists(st.floats(0, 3600), min_size=1, max_size=6),
)
def test_indexes_match_a_fresh_evaluation_at_every_instant(
    ages: list[float], values: list[float], hops: list[float]
) -> None:
    clock = Clock()
    table = NodeTable(POLICY, clock)
    metrics = POLICY.metrics
    nodes = {}
    for index, age in enumerate(ages):
        annotations = {metrics[index % len(metrics)]: format_usage(values[index], NOW - age)}
        if index % 3 == 0:
            annotations["node_hot_value"] = format_hot_value(index, NOW - age)
        nodes[f"n{index}"] = annotations
        table.upsert(f"n{index}", annotations)
    for hop in hops:
        clock.now_s += hop
        table.refresh(clock())
        for name, annotations in nodes.items():
            truth = evaluate_node(annotations, POLICY, clock())
            assert table.index.get(name) == (truth.extender_score, truth.reason)
            entry = table.get(name)
            assert entry is not None
            assert entry.load.extender_score == truth.extender_score


def test_policy_swap_recomputes_every_index() -> None:
    table = NodeTable(POLICY, Clock())
    names = [f"n{i}" for i in range(50)]
    for name in names:
        table.upsert(name, {"cpu_usage_avg_5m": format_usage(random.uniform(0.5, 0.8), NOW)})
    stricter = POLICY.spec.model_copy(
        update={
            "predicate": tuple(
                p.model_copy(update={"max_limit_fraction": 0.4}) for p in POLICY.spec.predicate
            )
        }
    )
    table.set_policy(type(POLICY).from_spec(stricter, "stricter"))
    assert set(table.rejected_metric) == set(names)
    verdicts = [table.index.get(name) for name in names]
    assert {v[1] for v in verdicts if v is not None} == {
        "Load[cpu_usage_avg_5m] is too high (> 0.4)"
    }

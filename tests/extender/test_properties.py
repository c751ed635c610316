"""Properties of filter and prioritize that must hold for any nodes and any annotations."""

from __future__ import annotations

import time
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.extender import Extender
from app.extender.verbs import Outcome, parse_args
from app.load.samples import format_usage
from app.policy import default_policy
from tests.extender.nodes import METRICS

NOW = time.time()
# One parse for the 600 examples below (~2 ms each): a Policy is frozen, and what it
# caches on itself follows from its fields alone. Each example gets a fresh Extender.
POLICY = default_policy()

annotation_value = st.one_of(
    st.builds(
        format_usage,
        st.floats(0, 1),
        st.floats(NOW - 4 * 3600, NOW + 600),
    ),
    st.text(max_size=12),
    st.sampled_from(["nan,2026-01-01T00:00:00Z", "-1,2026-01-01T00:00:00Z", "0.5,garbage"]),
)
node_annotations = st.dictionaries(
    st.sampled_from([*METRICS, "node_hot_value", "other"]), annotation_value
)
node_names = st.lists(st.text(min_size=1, max_size=8), max_size=30)


@st.composite
def cluster(draw: st.DrawFn) -> tuple[dict[str, dict[str, str]], list[str], bool]:
    known = draw(st.dictionaries(st.text(min_size=1, max_size=8), node_annotations, max_size=20))
    asked = draw(node_names) + draw(st.lists(st.sampled_from(sorted(known) or ["x"]), max_size=20))
    return known, list(dict.fromkeys(asked)), draw(st.booleans())


def run(verb: str, body: dict[str, Any], extender: Extender) -> Any:
    handler = extender.verbs.filter if verb == "filter" else extender.verbs.prioritize
    return orjson.loads(handler(parse_args(orjson.dumps(body)), Outcome()))


@settings(max_examples=200, deadline=None)
@given(data=cluster())
def test_cache_mode_filter_partitions_the_input(
    data: tuple[dict[str, dict[str, str]], list[str], bool],
) -> None:
    known, asked, daemonset = data
    extender = Extender(POLICY, mode="test")
    for name, values in known.items():
        extender.table.upsert(name, values)
    owners = [{"kind": "DaemonSet", "controller": True}] if daemonset else []
    pod: dict[str, Any] = {"metadata": {"ownerReferences": owners}}
    answer = run("filter", {"Pod": pod, "NodeNames": asked}, extender)
    passed, failed = answer["NodeNames"], answer["FailedAndUnresolvableNodes"]
    assert set(passed) <= set(asked)
    assert set(failed) <= set(asked)
    assert sorted([*passed, *failed]) == sorted(asked)  # each input node exactly once
    assert answer["FailedNodes"] == {}
    if daemonset:
        assert failed == {}


@settings(max_examples=200, deadline=None)
@given(nodes=st.dictionaries(st.text(min_size=1, max_size=8), node_annotations, max_size=20))
def test_full_mode_filter_partitions_the_input(nodes: dict[str, dict[str, str]]) -> None:
    items = [{"metadata": {"name": n, "annotations": a}, "status": {}} for n, a in nodes.items()]
    answer = run("filter", {"Pod": {}, "Nodes": {"items": items}}, Extender(POLICY))
    passed = answer["Nodes"]["items"]
    failed = answer["FailedAndUnresolvableNodes"]
    assert all(node in items for node in passed)
    assert sorted([n["metadata"]["name"] for n in passed] + list(failed)) == sorted(nodes)


@settings(max_examples=200, deadline=None)
@given(data=cluster())
def test_every_score_is_an_integer_from_0_to_10(
    data: tuple[dict[str, dict[str, str]], list[str], bool],
) -> None:
    known, asked, _ = data
    extender = Extender(POLICY, mode="test")
    for name, values in known.items():
        extender.table.upsert(name, values)
    answer = run("prioritize", {"Pod": {}, "NodeNames": asked}, extender)
    assert [item["Host"] for item in answer] == asked
    assert all(type(item["Score"]) is int and 0 <= item["Score"] <= 10 for item in answer)


def test_verdicts_follow_the_clock_without_a_node_update() -> None:
    clock = [NOW]
    extender = Extender(default_policy(), mode="test", clock=lambda: clock[0])
    # cpu_usage_avg_5m syncs every 3m and counts for 3m + 5m.
    hot = {"cpu_usage_avg_5m": format_usage(0.9, NOW)}
    extender.table.upsert("n1", hot)
    body = {"Pod": {}, "NodeNames": ["n1"]}
    assert run("filter", body, extender)["NodeNames"] == []
    clock[0] = NOW + 8 * 60
    assert run("filter", body, extender)["NodeNames"] == ["n1"]

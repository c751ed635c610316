"""A node-cache body read in parts (of the Pod only the exemption's fields parsed, or
the Pod whole; NodeNames left as text for the native index) is answered exactly as the
body parsed whole, and refused alike."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.extender import Extender
from app.extender.index import split_args
from app.extender.verbs import BadRequest, Outcome, parse_args, parse_whole, whole_pod
from app.load.samples import format_usage
from app.policy import default_policy
from tests.extender.nodes import METRICS, damaged

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-scheduler"
NODECACHE_BODIES = ("filter-nodecache.json", "prioritize-nodecache.json")
POLICY = default_policy()
NOW = time.time()
NAMES = ["node-a", "node-b", "node-c", "node-d", "ü-node", 'q"node']


def extender() -> Extender:
    """Two hot nodes (one for each verb to reject or rank low) and two cool ones."""
    made = Extender(POLICY, mode="test")
    for position, name in enumerate(NAMES):
        usage = 0.9 if position % 3 == 0 else 0.1 * position
        made.table.upsert(name, {metric: format_usage(usage, NOW - 30) for metric in METRICS})
    return made


def answer(verb: str, made: Extender, parse: Any, body: bytes) -> tuple[Any, ...]:
    """What a verb answers and records for the body, or the 400 it refuses it with."""
    outcome = Outcome()
    try:
        payload = getattr(made.verbs, verb)(parse(body), outcome)
    except BadRequest as error:
        return ("400", str(error))
    return (
        payload,
        outcome.nodes,
        dict(outcome.rejected),
        outcome.unknown_nodes,
        outcome.best_node,
        outcome.node_names(),
        outcome.request_pod(),  # what a reservation reads after the answer
    )


def same_both_ways(body: bytes) -> None:
    made = extender()
    for verb in ("filter", "prioritize"):
        assert answer(verb, made, parse_args, body) == answer(verb, made, parse_whole, body)


@pytest.mark.parametrize("fixture", NODECACHE_BODIES)
def test_kube_schedulers_bodies_are_read_in_parts(fixture: str) -> None:
    body = (FIXTURES / fixture).read_bytes().strip()
    assert split_args(body) is not None, "kube-scheduler's own body fell back to the full parse"
    args = parse_args(body)
    assert args.names_at is not None
    assert args.pod_at is not None, "kube-scheduler's own Pod was parsed whole"
    assert whole_pod(args) == orjson.loads(body)["Pod"]
    same_both_ways(body)


pods = st.sampled_from(
    [
        {},
        {"metadata": {"name": "p", "namespace": "d", "uid": "u"}},
        {"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": True}]}},
        {"a": '"}]{[\\', "b": [[[{}]]]},
        {"spec": {"priority": 2000001000, "priorityClassName": "system-node-critical"}},
        {"spec": {"priority": 2000000000.5}, "metadata": {"ownerReferences": "DaemonSet"}},
        {"spec": {"priorityClassName": "system-cluster-critical", "priority": None}},
        {"metadata": [], "spec": {}},
        {"metadata": {}, "spec": 7},
        {"spec": {"priorityClassName": [], "priority": {}}},
        {"spec": {"priority": -0.0, "x": [1.5, -2, 0, True, False, None, "\u00fc\t"]}},
    ]
)
known_names = st.sampled_from([*NAMES, "unknown", "", " x ", "x]", "a,b"])
names = st.lists(known_names, max_size=8) | st.lists(known_names | st.text(max_size=6), max_size=8)
json_space = st.sampled_from(["", "", " ", "\n", "\t\r "])
any_space = st.sampled_from(["", " ", "\x0b", "\xa0", "\x00"])  # and what JSON refuses
rarely = st.integers(0, 3).map(lambda n: n == 0)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """ExtenderArgs as kube-scheduler writes them, and in every other order, spacing,
    escaping and shape: duplicate, missing and unknown keys, wrong types."""
    fields: list[tuple[str, Any]] = [
        ("Pod", draw(pods)),
        ("Nodes", None),
        ("NodeNames", draw(names)),
    ]
    fields += draw(
        st.lists(
            st.tuples(
                st.sampled_from(["Pod", "Nodes", "NodeNames", "Other", "Po\\u0064"]),
                st.sampled_from([None, [], {}, 1, "x", ["node-a"], {"items": []}]),
            ),
            max_size=2,
        )
        if draw(rarely)
        else st.just([])
    )
    fields = draw(st.permutations(fields)) if draw(rarely) else fields
    fields = fields[: draw(st.integers(1, len(fields)))] if draw(rarely) else fields
    space = any_space if draw(rarely) else json_space
    gap = draw(space)
    members = [
        f'{gap}"{key}"{draw(space)}:{draw(space)}'.encode() + orjson.dumps(value)
        for key, value in fields
    ]
    return f"{draw(space)}{{".encode() + b",".join(members) + f"{gap}}}{draw(space)}".encode()


@settings(max_examples=300, deadline=None)
@given(body=bodies())
def test_any_body_is_answered_or_refused_as_when_parsed_whole(body: bytes) -> None:
    same_both_ways(body)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32), edits=st.integers(1, 4), fixture=st.sampled_from(NODECACHE_BODIES)
)
def test_a_damaged_body_is_answered_or_refused_as_when_parsed_whole(
    seed: int, edits: int, fixture: str
) -> None:
    # Bytes flipped, dropped and doubled anywhere in kube-scheduler's own body: both ways
    # accept the same bodies, answer them alike, and refuse the rest with the same words.
    body = (FIXTURES / fixture).read_bytes().strip()
    same_both_ways(damaged(body, random.Random(seed), edits, b'"\\{}[],: \n\x01\xc3azn0'))


def test_a_pod_nested_past_the_split_depth_is_parsed_whole() -> None:
    deep = b'{"x":' * 300 + b"{}" + b"}" * 300
    body = b'{"Pod":' + deep + b',"Nodes":null,"NodeNames":["node-a"]}'
    assert split_args(body) is None
    same_both_ways(body)


def test_a_pod_at_orjsons_depth_limit_is_refused_both_ways() -> None:
    # orjson refuses more than 1024 levels; a Pod parsed apart sits one level less deep.
    deep = b'{"x":' * 1024 + b"{}" + b"}" * 1024
    body = b'{"Pod":' + deep + b',"Nodes":null,"NodeNames":["node-a"]}'
    same_both_ways(body)
    assert answer("filter", extender(), parse_args, body)[0] == "400"


def test_a_key_written_twice_reads_as_the_whole_parse_reads_it() -> None:
    """A Pod after NodeNames: split_args takes the first Pod, orjson the last; the
    names' text is then out of the plain form, and the whole parse decides the pod too
    (found by the property above)."""
    body = b'{"Pod":{},"Nodes":null,"NodeNames":[],"Pod":{"items":[]},"Nodes":[]}'
    same_both_ways(body)
    made = extender()
    outcome = Outcome()
    made.verbs.filter(parse_args(body), outcome)
    assert outcome.pod == {"items": []}

"""The verdict index answers filter and prioritize; native and pure Python must agree."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.index import (
    IMPLEMENTATION_ENV,
    PyVerdictIndex,
    VerdictIndex,
    native_available,
    new_verdict_index,
)
from app.load.prioritize import has_room, host_priorities, preferred_position

HOT = "Load[cpu_usage_avg_5m] is too high (> 0.65)"
HOT_MEM = "Load[mem_usage_avg_5m] is too high (> 0.65)"
IMPLEMENTATIONS = ["native", "python"]
RES = ("cpu", "memory")


def make(implementation: str) -> VerdictIndex:
    if implementation == "native" and not native_available():
        pytest.fail("the native verdict index was not built; rerun scripts/setup --for-tests")
    return new_verdict_index(implementation)


@pytest.fixture(params=IMPLEMENTATIONS)
def index(request: pytest.FixtureRequest) -> VerdictIndex:
    return make(request.param)


def filtered(index: VerdictIndex, names: list[str], exempt: bool = False) -> dict[str, Any]:
    body, rejected = index.filter(names, exempt)
    answer: dict[str, Any] = orjson.loads(body)
    answer["rejected"] = rejected
    return answer


def test_native_index_is_built() -> None:
    # scripts/setup and the Dockerfile build it; without it every call is slower.
    assert native_available(), "app/extender/_verdict_index.c was not compiled"


def test_filter_keeps_order_and_fails_rejected_nodes_as_unresolvable(index: VerdictIndex) -> None:
    index.set("cool", 9, None)
    index.set("hot", 0, HOT)
    index.set("hot-mem", 2, HOT_MEM)
    index.set("hot-2", 1, HOT)
    answer = filtered(index, ["hot", "cool", "unknown", "hot-mem", "hot-2"])
    assert answer == {
        "NodeNames": ["cool", "unknown"],  # a node without data is never rejected
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"hot": HOT, "hot-mem": HOT_MEM, "hot-2": HOT},
        "Error": "",
        "rejected": {HOT: 2, HOT_MEM: 1},
    }


def test_a_name_repeated_in_one_request_is_rejected_once(index: VerdictIndex) -> None:
    index.set("hot", 0, HOT)
    index.set("cool", 9, None)
    names = ["hot", "cool", "hot", "hot"]
    for _ in range(2):  # and again in the next request: the mark is per request
        body, rejected = index.filter(names, False)
        # The object's keys are unique in the raw text, not only after parsing.
        assert body.count(b'"hot":') == 1
        assert orjson.loads(body)["FailedAndUnresolvableNodes"] == {"hot": HOT}
        assert rejected == {HOT: 1}


def test_exempt_pods_pass_every_node(index: VerdictIndex) -> None:
    index.set("hot", 0, HOT)
    answer = filtered(index, ["hot", "other"], exempt=True)
    assert (answer["NodeNames"], answer["FailedAndUnresolvableNodes"], answer["rejected"]) == (
        ["hot", "other"],
        {},
        {},
    )


def test_prioritize_scores_known_names_and_counts_unknown_ones(index: VerdictIndex) -> None:
    index.set("a", 7, None)
    index.set("b", 10, HOT)
    index.unknown_score = 3
    body, unknown, best = index.prioritize(["b", "x", "a"])
    # a is the preferred node (the top passing score): one more than it scores, and the
    # others at most its own score, so the answer's top is unique.
    assert best == 2
    assert orjson.loads(body) == [
        {"Host": "b", "Score": 7},
        {"Host": "x", "Score": 3},
        {"Host": "a", "Score": 8},
    ]
    assert unknown == 1


def test_empty_requests_get_empty_answers(index: VerdictIndex) -> None:
    assert filtered(index, [])["NodeNames"] == []
    assert index.prioritize([]) == (b"[]", 0, -1)


@pytest.mark.parametrize("bad", [1, None, ["n"], {"n": 1}, b"n"])
def test_a_name_that_is_not_a_string_is_a_type_error_naming_it(
    index: VerdictIndex, bad: object
) -> None:
    names: list[Any] = ["ok", bad]
    with pytest.raises(TypeError, match=r"NodeNames\[1\] is \w+, not a string"):
        index.filter(names, False)
    with pytest.raises(TypeError, match=r"NodeNames\[1\] is \w+, not a string"):
        index.prioritize(names)


def test_names_that_need_json_escaping_round_trip(index: VerdictIndex) -> None:
    odd = ['quo"te', "back\\slash", "tab\tnew\nline\x01", "naïve-ünïcode-節點", "emoji-🚀"]
    for position, name in enumerate(odd):
        index.set(name, position, HOT if position % 2 else None)
    answer = filtered(index, [*odd, 'unknown"\x1f'])
    assert answer["NodeNames"] == [odd[0], odd[2], odd[4], 'unknown"\x1f']
    assert answer["FailedAndUnresolvableNodes"] == {odd[1]: HOT, odd[3]: HOT}
    body, _, best = index.prioritize(odd)
    assert best == 4
    assert orjson.loads(body) == [
        {"Host": name, "Score": score} for name, score in zip(odd, [0, 1, 2, 3, 5], strict=True)
    ]


def test_names_of_every_length_differing_or_escaped_at_every_byte(index: VerdictIndex) -> None:
    # The native index reads names in 8-byte words with an overlapping last word;
    # these names put a difference or a byte to escape at each position of each length.
    base = "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    for length in range(len(base) + 1):
        index.set(base[:length], length % 11, None)
    for length in range(1, len(base) + 1):
        assert index.get(base[:length]) == (length % 11, None)
        for position in range(length):
            for byte in ("#", '"', "\\", "\x1f"):
                name = base[:position] + byte + base[position + 1 : length]
                assert index.get(name) is None
                body, unknown, _ = index.prioritize([name])
                # Unknown, so never lifted: answered its plain score.
                assert (orjson.loads(body), unknown) == ([{"Host": name, "Score": 0}], 1)
                index.set(name, 1, HOT)
                assert filtered(index, [name])["FailedAndUnresolvableNodes"] == {name: HOT}
                index.discard(name)


def test_a_name_without_utf8_form_is_ignored(index: VerdictIndex) -> None:
    # Lone surrogates: json.loads accepts them, the API server and orjson never send them.
    index.set("bad\ud800", 3, HOT)
    index.discard("bad\ud800")
    assert index.get("bad\ud800") is None
    assert filtered(index, ["ok"])["NodeNames"] == ["ok"]


def test_discard_forgets_and_set_brings_back(index: VerdictIndex) -> None:
    index.set("n", 4, HOT)
    index.discard("n")
    index.discard("never-there")
    assert (len(index), index.get("n")) == (0, None)
    assert filtered(index, ["n"])["NodeNames"] == ["n"]
    index.set("n", 5, None)
    assert (len(index), index.get("n")) == (1, (5, None))


def test_set_overwrites_the_verdict(index: VerdictIndex) -> None:
    index.set("n", 9, None)
    index.set("n", 1, HOT)
    assert index.get("n") == (1, HOT)
    index.set("n", 8, None)
    assert filtered(index, ["n"])["NodeNames"] == ["n"]


def test_clear_forgets_nodes_and_reasons(index: VerdictIndex) -> None:
    index.set("n", 1, HOT)
    index.clear()
    assert (len(index), index.get("n")) == (0, None)
    index.set("m", 2, HOT_MEM)
    assert filtered(index, ["m"])["rejected"] == {HOT_MEM: 1}


@pytest.mark.parametrize("score", [-1, 256])
def test_scores_outside_a_byte_are_refused(index: VerdictIndex, score: int) -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.255"):
        index.set("n", score, None)


def test_many_sets_and_discards_keep_every_answer(index: VerdictIndex) -> None:
    # Enough churn to grow the native table several times and compact its tombstones.
    live: dict[str, int] = {}
    for round_ in range(6):
        for i in range(3000):
            name = f"node-{round_}-{i}"
            index.set(name, i % 11, HOT if i % 7 == 0 else None)
            live[name] = i % 11
        for name in [n for i, n in enumerate(live) if i % 3 == round_ % 3]:
            index.discard(name)
            del live[name]
    assert len(index) == len(live)
    names = sorted(live)
    body, unknown, best = index.prioritize(names)
    assert unknown == 0
    answered = {item["Host"]: item["Score"] for item in orjson.loads(body)}
    preferred = names[best]
    assert answered.pop(preferred) == min(live[preferred] + 1, 10)
    assert answered == {name: min(score, 9) for name, score in live.items() if name != preferred}


def test_a_cluster_that_shrinks_then_grows_keeps_every_answer(index: VerdictIndex) -> None:
    # Most entries dead, then new ones: the native table drops its tombstones.
    for i in range(2000):
        index.set(f"old-{i}", 1, HOT)
    for i in range(1900):
        index.discard(f"old-{i}")
    for i in range(3000):
        index.set(f"new-{i}", 2, None)
    assert len(index) == 100 + 3000
    assert index.get("old-0") is None
    assert index.get("old-1999") == (1, HOT)
    assert index.get("new-2999") == (2, None)
    answer = filtered(index, ["old-5", "old-1950", "new-7"])
    assert answer["NodeNames"] == ["old-5", "new-7"]
    assert answer["rejected"] == {HOT: 1}


def test_the_implementation_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMPLEMENTATION_ENV, "python")
    assert isinstance(new_verdict_index(), PyVerdictIndex)
    monkeypatch.setenv(IMPLEMENTATION_ENV, "fast")
    with pytest.raises(ValueError, match="auto, native or python"):
        new_verdict_index()


names_strategy = st.sampled_from(
    ["n1", "n2", "node-00017", "ip-10-0-1-2.ec2.internal", 'q"', "ü", "", "n1 "]
) | st.text(max_size=12)
rooms_strategy = st.sampled_from([0.0, 0.5, 1.0, 2.0, float("inf")])
operations = st.lists(
    st.tuples(
        st.sampled_from(["set", "discard", "clear"]),
        names_strategy,
        st.integers(0, 10),
        st.sampled_from([None, None, HOT, HOT_MEM]),
        st.booleans(),
        rooms_strategy,
        rooms_strategy,
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=operations,
    request_names=st.lists(names_strategy, max_size=30),
    exempt=st.booleans(),
    unknown_score=st.integers(0, 10),
    pod=st.tuples(st.sampled_from([0.0, 0.5, 1.0, 3.0]), st.sampled_from([0.0, 0.5, 1.0, 3.0])),
)
def test_native_and_python_give_the_same_answers_as_the_wire_rule(
    ops: list[tuple[str, str, int, str | None, bool, float, float]],
    request_names: list[str],
    exempt: bool,
    unknown_score: int,
    pod: tuple[float, float],
) -> None:
    native, python = make("native"), make("python")
    held: dict[str, tuple[int, str | None, bool, float, float]] = {}
    for index in (native, python):
        index.unknown_score = unknown_score
        held.clear()
        for op, name, score, reason, preferable, cpu_room, memory_room in ops:
            if op == "set":
                index.set(name, score, reason, preferable, cpu_room, memory_room)
                if name.encode(errors="replace") == name.encode(errors="ignore"):
                    held[name] = (score, reason, preferable, cpu_room, memory_room)
            elif op == "discard":
                index.discard(name)
                held.pop(name, None)
            else:
                index.clear()
                held.clear()
    assert len(native) == len(python)
    for name in request_names:
        assert native.get(name) == python.get(name)
    native_filter, python_filter = (filtered(i, request_names, exempt) for i in (native, python))
    assert native_filter == python_filter
    # Each rejected name counts once, however often the request repeats it.
    rejectable = {n for n in request_names if (v := native.get(n)) is not None and v[1]}
    assert sum(native_filter["rejected"].values()) == (0 if exempt else len(rejectable))
    native_scores, python_scores = (i.prioritize(request_names, *pod) for i in (native, python))
    assert orjson.loads(native_scores[0]) == orjson.loads(python_scores[0])
    assert native_scores[1:] == python_scores[1:]  # unknown count and best position
    # Both answer what app.load.prioritize says, the rule the simulator also runs.
    entries = [held.get(name) for name in request_names]
    pod_usage = dict(zip(RES, pod, strict=True))
    scores = [unknown_score if e is None else e[0] for e in entries]
    can_prefer = [e is not None and e[1] is None and e[2] for e in entries]
    roomy = [e is not None and has_room({"cpu": e[3], "memory": e[4]}, pod_usage) for e in entries]
    expected = host_priorities(scores, can_prefer, roomy)
    assert [item["Score"] for item in orjson.loads(native_scores[0])] == expected
    assert native_scores[2] == preferred_position(scores, can_prefer, roomy)


@pytest.mark.parametrize(
    ("names", "best"),
    [
        (["a", "b"], 1),  # b scores 7, a 5
        (["a", "b", "d"], 1),  # b and d share the top score: the first is preferred
        (["a", "d", "b"], 1),
        (["hot", "a"], 1),  # a rejected node is never the best
        (["unknown", "a"], 1),  # unknown names score unknown_score (3)
        (["unknown", "other-unknown"], -1),  # nothing known of them: never preferred
        (["b", "hot", "a", "unknown"], 0),
        (["hot"], -1),  # no name passes
        ([], -1),
    ],
)
def test_prioritize_prefers_the_first_passing_node_with_the_top_score(
    index: VerdictIndex, names: list[str], best: int
) -> None:
    index.unknown_score = 3
    index.set("a", 5, None)
    index.set("b", 7, None)
    index.set("d", 7, None)
    index.set("hot", 9, HOT)
    body, _, found = index.prioritize(names)
    assert found == best
    scores = [item["Score"] for item in orjson.loads(body)]
    if best >= 0:  # the preferred node is the unique top among the nodes that pass
        others = [s for i, s in enumerate(scores) if i != best and names[i] != "hot"]
        assert all(score < scores[best] for score in others)


def test_a_node_without_fresh_data_is_never_lifted(index: VerdictIndex) -> None:
    index.set("blind", 8, None, False)
    index.set("seen", 5, None)
    body, _, best = index.prioritize(["blind", "seen"])
    assert best == 1
    assert orjson.loads(body) == [{"Host": "blind", "Score": 5}, {"Host": "seen", "Score": 6}]
    # Nothing known anywhere: no lift, kube-scheduler's own plugins choose.
    body, _, best = index.prioritize(["blind", "unknown"])
    assert best == -1
    assert orjson.loads(body) == [{"Host": "blind", "Score": 8}, {"Host": "unknown", "Score": 0}]


def test_the_preferred_node_has_room_for_the_pod(index: VerdictIndex) -> None:
    # "tight" scores higher but a 1.5-core pod would take it over its limit.
    index.set("tight", 7, None, True, 1.0, 8e9)
    index.set("roomy", 5, None, True, 3.0, 8e9)
    body, _, best = index.prioritize(["tight", "roomy"], 1.5, 1e9)
    assert best == 1
    assert orjson.loads(body) == [{"Host": "tight", "Score": 5}, {"Host": "roomy", "Score": 6}]
    # A pod that fits both goes to the better one; one that fits neither, too.
    for pod in ((0.5, 1e9), (4.0, 1e9), (0.5, 9e9)):
        assert index.prioritize(["tight", "roomy"], *pod)[2] == 0


# --------------------------------------------------------------------------- names as text

# Tokens a NodeNames array's text is made of, valid and not: the native index reads the
# plain form itself and must refuse (answer None for) everything else.
TEXT_TOKENS = st.sampled_from(
    [
        '"n1"',
        '"n2"',
        '"node-00017"',
        '"ü"',
        '"\\u0041"',
        '"a\\"b"',
        '"\x01"',
        '"',
        ",",
        " ",
        "\n",
        "\t",
        "\r",
        "\x0b",
        "[",
        "]",
        "1",
        "null",
        '"n1',
        'n2"',
        "\\",
        "\xa0",
    ]
)


def text_of(names: list[str], form: str) -> bytes:
    """A NodeNames array as different JSON writers write it."""
    if form == "compact":
        return orjson.dumps(names)
    if form == "spaced":
        return json.dumps(names, indent=1, ensure_ascii=False).encode()
    return json.dumps(names).encode()  # non-ASCII and controls as \\u escapes


def in_body(text: bytes) -> tuple[bytes, int, int]:
    body = b'{"Pod":{},"Nodes":null,"NodeNames":' + text + b"}"
    start = body.index(b"[")
    return body, start, start + len(text)


def plain(name: str) -> bool:
    return all(" " <= c <= "\x7f" and c not in '"\\' for c in name)


@settings(max_examples=200, deadline=None)
@given(
    held=st.lists(
        st.tuples(names_strategy, st.integers(0, 10), st.sampled_from([None, HOT])), max_size=12
    ),
    names=st.lists(names_strategy, max_size=20),
    form=st.sampled_from(["compact", "spaced", "escaped"]),
    exempt=st.booleans(),
    pod=st.sampled_from([(0.0, 0.0), (1.0, 1.0)]),
)
def test_names_read_from_text_are_answered_as_the_parsed_list(
    held: list[tuple[str, int, str | None]],
    names: list[str],
    form: str,
    exempt: bool,
    pod: tuple[float, float],
) -> None:
    index = make("native")
    for name, score, reason in held:
        index.set(name, score, reason, True, 0.5, 0.5)
    body, start, end = in_body(text_of(names, form))
    by_list = index.filter(names, exempt)
    by_text = index.filter_text(body, start, end, exempt)
    scored = index.prioritize(names, *pod)
    scored_text = index.prioritize_text(body, start, end, *pod)
    # Plain names are written as they are by every writer, in any JSON whitespace.
    if not all(map(plain, names)):
        assert by_text is None
        assert scored_text is None
        return
    assert by_text == (*by_list, len(names))
    best_name = names[scored[2]] if scored[2] >= 0 else None
    assert scored_text == (scored[0], scored[1], best_name, len(names))


@settings(max_examples=400, deadline=None)
@given(tokens=st.lists(TEXT_TOKENS, max_size=12), exempt=st.booleans())
def test_text_that_is_not_a_plain_array_of_names_is_refused(
    tokens: list[str], exempt: bool
) -> None:
    # Whatever the text, the index answers only where orjson reads it as a list of
    # plain names, and then as it answers that list.
    index = make("native")
    index.set("n1", 4, HOT)
    index.set("n2", 6, None)
    text = ("[" + "".join(tokens) + "]").encode()
    body, start, end = in_body(text)
    answered = index.filter_text(body, start, end, exempt)
    scored = index.prioritize_text(body, start, end, 0.0, 0.0)
    assert (answered is None) == (scored is None)
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        assert answered is None
        return
    if answered is None:
        return  # valid JSON out of the plain form (escapes, non-strings): parsed instead
    assert all(isinstance(name, str) and plain(name) for name in parsed)
    assert answered == (*index.filter(parsed, exempt), len(parsed))
    body_scores, unknown, best = index.prioritize(parsed)
    assert scored == (body_scores, unknown, parsed[best] if best >= 0 else None, len(parsed))


@pytest.mark.parametrize(("start", "end"), [(-1, 5), (0, 999), (5, 4), (1, 5)])
def test_text_offsets_outside_an_array_are_a_value_error(start: int, end: int) -> None:
    index = make("native")
    with pytest.raises(ValueError, match="do not hold a JSON array"):
        index.filter_text(b'["n1"]', start, end, False)
    with pytest.raises(ValueError, match="do not hold a JSON array"):
        index.prioritize_text(b'["n1"]', start, end, 0.0, 0.0)


def test_the_python_index_reads_no_text() -> None:
    body, start, end = in_body(b'["n1"]')
    assert make("python").filter_text(body, start, end, False) is None
    assert make("python").prioritize_text(body, start, end, 0.0, 0.0) is None

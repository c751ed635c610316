"""``pod_fields`` (the native reader of a request's Pod text) is sure only of JSON that
orjson reads alike, finds the exemption's three fields where orjson puts them, and the
filter's exemption rule reads no other field of the Pod."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.index import pod_fields, split_args
from app.extender.verbs import exemption_fields
from app.load import is_exempt_from_filter
from tests.extender.nodes import damaged

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube-scheduler"

KEYS = ["metadata", "spec", "ownerReferences", "priority", "priorityClassName", "kind",
        "controller", "name", "x"]  # fmt: skip
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["DaemonSet", "system-node-critical", "system-cluster-critical", 'a\\b"c'])
    | st.sampled_from([2000001000, 2000000000, 0, -1, 1e300, 1.5])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=8,
)
space = st.sampled_from(["", "", " ", "\n", "\t", "\r\n  "])


@st.composite
def texts(draw: st.DrawFn, value: Any | None = None, depth: int = 0) -> str:
    """A JSON text of a value, spaced at random, its objects' keys sometimes written
    twice and its strings sometimes with \\u escapes (orjson writes neither)."""
    if value is None and depth == 0:
        value = draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
    if isinstance(value, dict):
        members = [(k, v) for k, v in value.items()]
        if members and draw(st.integers(0, 5)) == 0:
            members.append(draw(st.sampled_from(members)))  # a key written twice
        inner = ",".join(
            f"{draw(space)}{_key(draw, k)}{draw(space)}:{draw(space)}"
            f"{draw(texts(v, depth + 1))}{draw(space)}"
            for k, v in members
        )
        return "{" + inner + draw(space) + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{draw(space)}{draw(texts(v, depth + 1))}" for v in value) + "]"
    if isinstance(value, float) and draw(st.integers(0, 3)) == 0:
        return repr(value)  # 1e+300, 1.5e-07: with an exponent
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


def _key(draw: st.DrawFn, key: str) -> str:
    if draw(st.integers(0, 7)) == 0:  # the same key, escaped
        return '"' + "".join(f"\\u{ord(c):04x}" for c in key) + '"'
    return orjson.dumps(key).decode()


def _paths(pod: Any) -> dict[str, Any]:
    """The three fields where orjson put them (a key written twice: its last value)."""
    found: dict[str, Any] = {}
    metadata, spec = pod.get("metadata", {}), pod.get("spec", {})
    if "ownerReferences" in metadata:
        found["ownerReferences"] = metadata["ownerReferences"]
    for key in ("priority", "priorityClassName"):
        if key in spec:
            found[key] = spec[key]
    return found


def check(text: bytes) -> bool:
    """pod_fields on the Pod ``text`` inside a body; True when it was sure."""
    assert pod_fields is not None, "the native verdict index was not built"
    assert split_args is not None
    body = b'{"Pod":' + text + b',"Nodes":null,"NodeNames":[]}'
    parts = split_args(body)  # where production finds the Pod, if it does
    if parts is None:
        return False  # the body is parsed whole
    text = body[parts[0] : parts[1]]
    spans = pod_fields(body, parts[0], parts[1])
    try:
        pod = orjson.loads(text)
    except orjson.JSONDecodeError:
        assert spans is None, f"sure of a text orjson refuses: {text!r}"
        return False
    if spans is None:
        return False
    assert isinstance(pod, dict)
    assert isinstance(pod.get("metadata", {}), dict)
    assert isinstance(pod.get("spec", {}), dict)
    projected = exemption_fields(body, spans)
    assert _paths(projected) == _paths(pod)
    assert is_exempt_from_filter(projected) == is_exempt_from_filter(pod)
    return True


@settings(max_examples=200, deadline=None)
@given(text=texts())
def test_a_sure_answer_is_orjsons(text: str) -> None:
    check(text.encode())


@settings(max_examples=200, deadline=None)
@given(text=texts(), seed=st.integers(0, 2**32), edits=st.integers(1, 3))
def test_a_damaged_pod_is_never_read_otherwise(text: str, seed: int, edits: int) -> None:
    replacements = b'"\\{}[],:. \n\x01\x7f\xc3\xffeE-+0919tfnu'
    check(damaged(text.encode(), random.Random(seed), edits, replacements))


@pytest.mark.parametrize(
    "text",
    [
        b'{"spec":{"priority":1e3}}',  # an exponent
        b'{"spec":{"priority":1E400}}',  # infinity: orjson refuses
        b'{"spec":{"priority":1234567890123456789012}}',  # 22 digits: a float in orjson
        b'{"spec":{"priority":01}}',
        b'{"spec":{"priorityClassName":"\\u0061"}}',
        b'{"spec":{"priorityClassName":"\xc3\xbc"}}',  # UTF-8: orjson's to judge
        b'{"spec":{"priority":1},"spec":{"priority":2000001000}}',  # the last counts
        b'{"metadata":{"ownerReferences":[],"ownerReferences":[{"kind":"DaemonSet"}]}}',
        b'{"metadata":"x"}',
        b'{"spec":[]}',
        b'{"a":' + b"[" * 300 + b"]" * 300 + b"}",  # deeper than the reader goes
        b'{"a":tru}',
        b'{"a":"\\x"}',
        b'{"a":1,}',
        b'{"a":[1,]}',
        b'{"a" 1}',
    ],
)
def test_what_the_reader_is_not_sure_of_is_left_to_orjson(text: bytes) -> None:
    assert pod_fields is not None
    body = b'{"Pod":' + text + b',"Nodes":null,"NodeNames":[]}'
    assert pod_fields(body, 7, 7 + len(text)) is None
    check(text)


def test_kube_schedulers_pods_are_read_in_fields() -> None:
    for fixture in ("filter-nodecache.json", "prioritize-nodecache.json"):
        body = (FIXTURES / fixture).read_bytes()
        pod = orjson.loads(body)["Pod"]
        text = orjson.dumps(pod)
        assert check(text), f"{fixture}: kube-scheduler's Pod fell back to the whole parse"
        start = body.index(b'"Pod"') + len(b'"Pod":')
        end = body.index(b',"Nodes"')
        assert pod_fields is not None
        assert pod_fields(body, start, end) is not None


def test_a_daemonset_pod_and_a_critical_pod_are_read_exempt() -> None:
    for pod in (
        {"metadata": {"ownerReferences": [{"kind": "DaemonSet", "controller": True}]}},
        {"spec": {"priority": 2000001000, "priorityClassName": "system-node-critical"}},
    ):
        assert is_exempt_from_filter(pod)
        assert check(orjson.dumps(pod))


class Reading(Mapping[str, Any]):
    """A mapping that notes every key read of it, and of what it holds, by path."""

    def __init__(self, data: Mapping[str, Any], path: str, read: set[str]) -> None:
        self._data, self._path, self._read = data, path, read

    def __getitem__(self, key: str) -> Any:
        self._read.add(f"{self._path}{key}")
        return wrap(self._data[key], f"{self._path}{key}.", self._read)

    def __iter__(self) -> Iterator[str]:
        self._read.add(f"{self._path}*")
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def wrap(value: Any, path: str, read: set[str]) -> Any:
    if isinstance(value, dict):
        return Reading(value, path, read)
    if isinstance(value, list):
        return [wrap(item, f"{path}[].", read) for item in value]
    return value


EXEMPTION_FIELDS = ("metadata.ownerReferences", "spec.priority", "spec.priorityClassName")


@settings(max_examples=300, deadline=None)
@given(
    pod=st.fixed_dictionaries(
        {},
        optional={
            "metadata": st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
            | st.fixed_dictionaries(
                {"ownerReferences": st.lists(st.dictionaries(st.sampled_from(KEYS), values))}
            ),
            "spec": st.dictionaries(st.sampled_from(KEYS), values, max_size=4),
            "status": values,
        },
    )
)
def test_the_exemption_reads_only_the_fields_pod_fields_finds(pod: dict[str, Any]) -> None:
    # If is_exempt_from_filter comes to read another field of the Pod, the filter's
    # fast path (which hands it only these) must learn to find that field too.
    read: set[str] = set()
    is_exempt_from_filter(Reading(pod, "", read))
    allowed = ("metadata", "spec", *EXEMPTION_FIELDS)
    for path in read:
        assert path in allowed or path.startswith(
            tuple(f"{field}." for field in EXEMPTION_FIELDS)
        ), f"is_exempt_from_filter reads {path}, which the filter's fast path does not parse"

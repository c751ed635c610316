"""Strategies for bad documents: random JSON/YAML values and mutations of valid ones."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["3m", "-1s", "0", "1e309", "NaN", "0.65", "", "cpu", "100Mi", "1h30x"])
)

values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


def paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``document`` (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(document, dict):
        for key, child in document.items():
            found += paths(child, (*prefix, key))
    elif isinstance(document, list):
        for index, child in enumerate(document):
            found += paths(child, (*prefix, index))
    return found


@st.composite
def mutations(draw: st.DrawFn, valid: Any) -> tuple[Any, tuple[Any, ...]]:
    """``valid`` with one value replaced, removed, or given an unknown sibling key.

    Returns the mutated document and the path that was changed.
    """
    document = copy.deepcopy(valid)
    path = draw(st.sampled_from(paths(document)[1:]))
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = draw(st.sampled_from(["replace", "remove", "unknown-key"]))
    if action == "remove":
        del parent[last]
    elif action == "unknown-key" and isinstance(parent, dict):
        key = draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in parent))
        parent[key] = draw(values)
        path = (*path[:-1], key)
    else:
        parent[last] = draw(values)
    return document, path

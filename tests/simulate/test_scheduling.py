"""The simulator's extender answer is ``app.load.wire.wire_scores``, node for node."""

from __future__ import annotations

import numpy as np
import pytest

from app.load.wire import wire_scores
from app.simulate.scheduling import wire_answer


def asked_in_order(
    scores: list[int], preferable: list[bool], roomy: list[bool], asked: list[int], first: int
) -> list[int]:
    """``wire_scores`` asked as kube-scheduler asks: the asked nodes listed from node
    ``first`` on, then from node 0; the answer put back in node order (0: not asked)."""
    order = [n for n in asked if n >= first] + [n for n in asked if n < first]
    listed = wire_scores(
        [scores[n] for n in order], [preferable[n] for n in order], [roomy[n] for n in order]
    )
    answer = [0] * len(scores)
    for node, score in zip(order, listed, strict=True):
        answer[node] = score
    return answer


@pytest.mark.parametrize("seed", range(4))
def test_the_whole_array_answer_is_the_rule_asked_in_the_requests_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(500):
        count = int(rng.integers(1, 80))
        # Few distinct scores, or many; mostly preferable or mostly not; ties everywhere;
        # some nodes not asked; now and then a negative score, which is never preferred.
        scores = rng.integers(-1 if rng.random() < 0.2 else 0, int(rng.integers(1, 12)), count)
        preferable = rng.random(count) < rng.random()
        roomy = rng.random(count) < rng.random()
        mask = rng.random(count) < rng.random() * 1.2
        if not mask.any():
            continue
        asked = np.flatnonzero(mask)
        first = int(asked[rng.integers(len(asked))])
        expected = asked_in_order(
            scores.tolist(), preferable.tolist(), roomy.tolist(), asked.tolist(), first
        )
        got = wire_answer(scores.astype(np.int64), preferable, roomy, mask, first)
        assert got.tolist() == expected


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (0, [5, 7, 8, 3, 7]),  # listed 0..4: node 2 is the first preferable 7
        (3, [5, 7, 7, 3, 8]),  # listed 3, 4, 0, 1, 2: node 4 comes before node 2
    ],
)
def test_the_first_listed_node_of_the_best_kind_is_lifted_and_the_rest_are_not(
    first: int, expected: list[int]
) -> None:
    scores = np.array([5, 7, 7, 3, 7], dtype=np.int64)
    preferable = np.array([True, False, True, True, True])
    roomy = np.array([True, True, True, True, True])
    asked = np.ones(5, dtype=np.bool_)
    assert wire_answer(scores, preferable, roomy, asked, first).tolist() == expected


def test_nodes_not_asked_are_answered_nothing_and_never_preferred() -> None:
    scores = np.array([9, 4, 6], dtype=np.int64)
    preferable = np.array([True, True, True])
    roomy = np.array([True, True, True])
    asked = np.array([False, True, True])
    # Node 0 scores best but is not asked: node 2 is preferred, node 1 capped below it.
    assert wire_answer(scores, preferable, roomy, asked, 1).tolist() == [0, 4, 7]

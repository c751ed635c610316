"""The simulator's extender answer is ``app.load.wire.wire_scores``, node for node."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest

from app.load import PLAIN_MAX_SCORE, plain_wire_score, preferred_wire_score
from app.load.wire import wire_scores
from app.simulate.scheduling import ExtenderTerms, preferred_node, wire_answer


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


@dataclass
class View:
    """The load filter's arrays the extender's answer reads (``ExtenderView``)."""

    extender_score: npt.NDArray[np.int64]
    preferable: npt.NDArray[np.bool_]
    room_cpu: npt.NDArray[np.float64]
    room_memory: npt.NDArray[np.float64]
    evaluated: set[int] = field(default_factory=set)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("preferable_share", [0.7, 0.03])
def test_the_kept_terms_answer_as_the_whole_array_answer_after_every_change(
    seed: int, preferable_share: float
) -> None:
    """Kept between pods and re-made only where nodes were re-evaluated, the terms give
    every pod the same total as ``wire_answer`` made afresh: after one node's change,
    many at once (a sync), a new estimate and a new cap. They count the nodes that can
    be preferred, which the scheduler reads to leave the search out where there are
    none (with few preferable nodes, often)."""
    rng = np.random.default_rng(seed)
    count, factor = 40, 30
    cpu, memory = rng.uniform(1, 8, count), rng.uniform(1, 8, count)
    view = View(
        rng.integers(-1, 11, count),
        rng.random(count) < preferable_share,
        rng.uniform(0, 1, count),
        rng.uniform(0, 1, count),
    )
    terms = ExtenderTerms(view, cpu, memory, factor)
    estimates = [(0.5, 0.5), (2.0, 1.0), (0.0, 0.0)]
    estimate = estimates[0]
    for _ in range(400):
        changes = 1 if rng.random() < 0.8 else int(rng.integers(2, count))
        for node in rng.choice(count, changes, replace=False).tolist():
            view.extender_score[node] = rng.integers(-1, 11)
            view.preferable[node] = rng.random() < preferable_share
            view.room_cpu[node] = rng.uniform(0, 1) if rng.random() < 0.9 else math.inf
            view.room_memory[node] = rng.uniform(0, 1)
            view.evaluated.add(node)
        if rng.random() < 0.1:
            estimate = estimates[int(rng.integers(len(estimates)))]
        asked = rng.random(count) < 0.8
        if not asked.any():
            continue
        first = int(rng.choice(np.flatnonzero(asked)))
        roomy = (estimate[0] / cpu <= view.room_cpu) & (estimate[1] / memory <= view.room_memory)
        expected = wire_answer(view.extender_score, view.preferable, roomy, asked, first)

        terms.follow(estimate)
        assert not view.evaluated
        assert terms.preferable_nodes == np.count_nonzero(terms.can_rank >= 0)
        best = preferred_node(terms.roomy_rank, terms.can_rank, asked, first)
        if terms.preferable_nodes == 0:
            assert best == -1
        scores = view.extender_score
        cap = PLAIN_MAX_SCORE if best < 0 else plain_wire_score(int(scores[best]))
        got = terms.plain(cap).copy()
        if best >= 0:
            got[best] = factor * preferred_wire_score(int(scores[best]))
        assert (got[asked] == expected[asked] * factor).all()

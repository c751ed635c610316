"""The simulator's extender answer is ``app.load.wire.wire_scores``, node for node."""

from __future__ import annotations

import numpy as np
import pytest

from app.load.wire import wire_scores
from app.simulate.scheduling import wire_answer


@pytest.mark.parametrize("seed", range(4))
def test_the_answer_asked_per_kind_is_the_rule_asked_of_every_node(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(500):
        count = int(rng.integers(0, 80))
        # Few distinct scores, or many; mostly preferable or mostly not; ties everywhere.
        scores = rng.integers(0, int(rng.integers(1, 12)), count).astype(np.int64)
        preferable = rng.random(count) < rng.random()
        roomy = rng.random(count) < rng.random()
        expected = wire_scores(scores.tolist(), preferable.tolist(), roomy.tolist())
        assert wire_answer(scores, preferable, roomy).tolist() == expected


def test_the_first_node_of_the_best_kind_is_lifted_and_the_rest_of_its_kind_is_not() -> None:
    scores = np.array([5, 7, 7, 3, 7], dtype=np.int64)
    preferable = np.array([True, False, True, True, True])
    roomy = np.array([True, True, True, True, True])
    assert wire_answer(scores, preferable, roomy).tolist() == [5, 7, 8, 3, 7]

"""The scheduler's draws are numpy's: ``IntegerDraws.integers(n)`` is ``Generator.integers(n)``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.simulate.draws import IntegerDraws

# A range of one (no draw), small ones as the scheduler asks, and ranges just above a
# power of two, where nearly half the words are rejected and drawn again.
BOUNDS = [1, 2, 3, 7, 10, 999, 1000, 4096, 2**31 + 5, 3 * 2**30, 2**32 - 1, 2**32]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_draws_are_the_generator_s_own(seed: int) -> None:
    numpy_rng = np.random.default_rng([seed, 1])
    draws = IntegerDraws(np.random.default_rng([seed, 1]))
    pick = random.Random(seed)
    for _ in range(4000):
        n = pick.choice(BOUNDS)
        assert draws.integers(n) == int(numpy_rng.integers(n)), n


def test_the_draws_go_on_from_a_generator_drawn_from_already() -> None:
    """A generator with half a word kept (one 32-bit draw made) goes on the same."""
    numpy_rng, taken = np.random.default_rng(3), np.random.default_rng(3)
    numpy_rng.integers(10)
    taken.integers(10)
    draws = IntegerDraws(taken)
    assert [draws.integers(n) for n in (5, 1000, 2**31 + 5)] == [
        int(numpy_rng.integers(n)) for n in (5, 1000, 2**31 + 5)
    ]


@pytest.mark.parametrize("n", [0, -1, 2**32 + 1])
def test_a_bound_out_of_range_is_refused(n: int) -> None:
    with pytest.raises(ValueError, match="only 1 to 2"):
        IntegerDraws(np.random.default_rng(1)).integers(n)


def test_a_generator_of_32_bit_words_is_refused() -> None:
    with pytest.raises(TypeError, match="MT19937"):
        IntegerDraws(np.random.Generator(np.random.MT19937(1)))

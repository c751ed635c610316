"""The simulator's draws are numpy's: ``IntegerDraws.integers(n)`` is
``Generator.integers(n)``, and ``StepUniforms`` is ``default_rng([*prefix, step]).random(n)``."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.simulate.draws import IntegerDraws, StepUniforms, pcg64_states

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


# Seeds of one, two and three 32-bit words (and 0, one word of its own), and steps at
# the start, across a block's edge (512) and at the last one a word holds.
SEEDS = [0, 1, 7, 2**32 - 1, 2**32, 2**40 + 5, 2**64 + 3, 12345678901234567890123]
STEPS = [0, 1, 2, 511, 512, 513, 1024, 2879, 99_999, 2**31, 2**32 - 1]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_s_uniforms_are_default_rng_s_bit_for_bit(seed: int) -> None:
    uniforms = StepUniforms([seed, 2])
    for step in [*STEPS, *random.Random(seed).sample(range(100_000), 40), 3]:
        numpy_s = np.random.default_rng([seed, 2, step]).random(257)
        assert uniforms.random(step, 257).tobytes() == numpy_s.tobytes(), (seed, step)


def test_the_seed_states_are_seed_sequence_s() -> None:
    """The state and increment as numpy's own PCG64 holds them, seeded from the list."""
    for prefix in ([0], [3, 2], [2**64 + 3, 2, 9], []):
        made = pcg64_states(prefix, range(0, 700, 7))
        for step, (state, increment) in zip(range(0, 700, 7), made, strict=True):
            numpy_s = np.random.PCG64(np.random.SeedSequence([*prefix, step])).state["state"]
            assert (state, increment) == (numpy_s["state"], numpy_s["inc"]), (prefix, step)


def test_a_step_beyond_a_word_or_a_negative_seed_is_left_to_numpy() -> None:
    step = 2**32 + 7
    numpy_s = np.random.default_rng([5, 2, step]).random(9)
    assert StepUniforms([5, 2]).random(step, 9).tobytes() == numpy_s.tobytes()
    with pytest.raises(ValueError, match="negative"):
        StepUniforms([-1, 2]).random(0, 9)

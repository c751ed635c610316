"""Random draws the simulator makes often, the same numbers as numpy's at a fraction of
the cost: the scheduler's ``Generator.integers(n)`` (``IntegerDraws``) and the spikes'
``default_rng([seed, 2, step]).random(n)`` of every step (``StepUniforms``).

kube-scheduler breaks ties at random, and the extender's request starts at a random
node (``scheduling``): one or two draws a pod, 10,000 pods in thousand-nodes' first
step. ``Generator.integers`` spends about 2 microseconds a call on parsing its
arguments, more than the rest of a choice from the kept ranks. ``IntegerDraws`` makes
the same numbers from the same generator as numpy does for an ``int64`` below ``n``
(``n - 1`` within 32 bits): a 32-bit word from the bit generator (the low half of a
64-bit output, the high half kept for the next word, as numpy's ``next_uint32`` does
for PCG64, the default, and the others that keep a half), and
Lemire's multiply-and-reject to bring it below ``n``; ``n == 1`` draws nothing.
``tests/simulate/test_draws.py`` holds it to ``Generator.integers`` over bounds that
reject often and seldom.

It takes the generator over: the half word it keeps is its own, so every later draw
from that generator must go through it.

A spiky workload's pods spike on the steps a generator seeded by ``[seed, 2, step]``
says (``profiles.SlotUsage``): a generator a step, 2,880 in a day. ``default_rng`` of a
list spends most of its ~30 microseconds on the ``SeedSequence`` (numpy's hash of the
list into 128 bits of seed and 128 of increment, word by word, under ``np.errstate``)
and on making a ``PCG64`` and a ``Generator``, more than ``random(n)`` of a thousand
pods. ``StepUniforms`` runs numpy's ``SeedSequence`` for a block of steps at once, as
arrays of 32-bit words (the same multiplications, shifts and xors, modulo 2**32), seeds
numpy's PCG64 from its words as ``PCG64.__init__`` does (``pcg64_srandom_r``: state 0,
increment ``2 * inc + 1``, a step, the seed added, a step), and sets that state on one
kept ``PCG64`` before drawing. ``tests/simulate/test_draws.py`` holds it to
``default_rng`` bit for bit over seeds of one to three words and steps up to 2**32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

UintArray = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]

_WORD = 0xFFFFFFFF  # 32 bits
_128_BITS = (1 << 128) - 1
# numpy's SeedSequence (numpy/random/bit_generator.pyx): its hash and mix constants,
# and its pool of four words.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_POOL_WORDS = 4
# PCG64's multiplier (numpy/random/src/pcg64/pcg64.h, PCG_DEFAULT_MULTIPLIER_128).
_PCG_MULTIPLIER = (2549297995355413924 << 64) + 4865540595714422341
_STEPS_A_BLOCK = 512


class IntegerDraws:
    """``rng.integers(n)`` for ``1 <= n <= 2**32``, as a Python int."""

    def __init__(self, rng: np.random.Generator) -> None:
        bits = rng.bit_generator
        state = bits.state
        if "has_uint32" not in state:  # e.g. MT19937, whose words are 32 bits of their own
            raise TypeError(f"{state['bit_generator']} does not make 32-bit words in halves")
        self._kept: int | None = int(state["uinteger"]) if state["has_uint32"] else None
        self._raw = bits.random_raw

    def _word(self) -> int:
        kept = self._kept
        if kept is not None:
            self._kept = None
            return kept
        raw = int(self._raw())
        self._kept = raw >> 32
        return raw & _WORD

    def integers(self, n: int) -> int:
        if n == 1:
            return 0  # numpy draws nothing for a range of one
        if not 1 <= n <= _WORD + 1:
            raise ValueError(f"a draw below {n}: only 1 to 2**32 are made here")
        if n == _WORD + 1:
            return self._word()
        product = self._word() * n
        if product & _WORD < n:  # perhaps in the biased low range: reject below the cut
            cut = (_WORD - (n - 1)) % n
            while product & _WORD < cut:
                product = self._word() * n
        return product >> 32


def _words(n: int) -> list[int]:
    """A non-negative int as SeedSequence reads it: 32-bit words, the lowest first."""
    words = [n & _WORD]
    n >>= 32
    while n:
        words.append(n & _WORD)
        n >>= 32
    return words


class _Hash:
    """SeedSequence's ``hashmix`` over arrays of words, with its running constant."""

    def __init__(self, constant: int, multiplier: int) -> None:
        self._constant = constant
        self._multiplier = multiplier

    def __call__(self, value: UintArray) -> UintArray:
        value = value ^ np.uint64(self._constant)
        self._constant = (self._constant * self._multiplier) & _WORD
        value = (value * np.uint64(self._constant)) & np.uint64(_WORD)
        mixed: UintArray = value ^ (value >> np.uint64(16))
        return mixed


def _mix(x: UintArray, y: UintArray) -> UintArray:
    result = (np.uint64(_MIX_MULT_L) * x - np.uint64(_MIX_MULT_R) * y) & np.uint64(_WORD)
    mixed: UintArray = result ^ (result >> np.uint64(16))
    return mixed


def pcg64_states(prefix: list[int], steps: range) -> list[tuple[int, int]]:
    """The PCG64 state and increment of ``default_rng([*prefix, step])`` for each step
    (``0 <= step < 2**32``: one word each), numpy's ``SeedSequence`` run on them all at
    once. Every int is kept within 32 bits before it is multiplied, so the products fit
    in 64, and a difference that goes below zero wraps modulo 2**64, which leaves its
    low 32 bits as they are modulo 2**32."""
    count = len(steps)
    entropy = [np.full(count, word, dtype=np.uint64) for n in prefix for word in _words(n)]
    entropy.append(np.arange(steps.start, steps.stop, steps.step, dtype=np.uint64))
    hashmix = _Hash(_INIT_A, _MULT_A)
    zero = np.zeros(count, dtype=np.uint64)
    pool = [hashmix(entropy[i] if i < len(entropy) else zero) for i in range(_POOL_WORDS)]
    for source in range(_POOL_WORDS):
        for destination in range(_POOL_WORDS):
            if source != destination:
                pool[destination] = _mix(pool[destination], hashmix(pool[source]))
    for word in entropy[_POOL_WORDS:]:
        for destination in range(_POOL_WORDS):
            pool[destination] = _mix(pool[destination], hashmix(word))
    out = _Hash(_INIT_B, _MULT_B)  # generate_state(4, np.uint64): eight words
    words = [out(pool[i % _POOL_WORDS]).tolist() for i in range(8)]
    states = []
    for w in zip(*words, strict=True):
        seed = (w[0] | w[1] << 32) << 64 | (w[2] | w[3] << 32)
        increment = ((((w[4] | w[5] << 32) << 64 | (w[6] | w[7] << 32)) << 1) | 1) & _128_BITS
        states.append((((increment + seed) * _PCG_MULTIPLIER + increment) & _128_BITS, increment))
    return states


class StepUniforms:
    """``np.random.default_rng([*prefix, step]).random(n)`` for any step, by blocks of
    steps (``pcg64_states``), drawn from one kept generator."""

    def __init__(self, prefix: list[int]) -> None:
        self._prefix = prefix
        self._numpys = any(n < 0 for n in prefix)  # refused as numpy refuses it
        self._blocks: dict[int, list[tuple[int, int]]] = {}
        self._bits = np.random.PCG64(0)
        self._generator = np.random.Generator(self._bits)

    def random(self, step: int, n: int) -> FloatArray:
        if self._numpys or not 0 <= step <= _WORD:
            return np.random.default_rng([*self._prefix, step]).random(n)
        block = step // _STEPS_A_BLOCK
        states = self._blocks.get(block)
        if states is None:
            start = block * _STEPS_A_BLOCK
            stop = min(start + _STEPS_A_BLOCK, _WORD + 1)
            states = self._blocks[block] = pcg64_states(self._prefix, range(start, stop))
        state, increment = states[step - block * _STEPS_A_BLOCK]
        self._bits.state = {
            "bit_generator": "PCG64",
            "state": {"state": state, "inc": increment},
            "has_uint32": 0,
            "uinteger": 0,
        }
        return self._generator.random(n)

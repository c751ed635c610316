"""The scheduler's random draws: numpy's ``Generator.integers(n)``, the same numbers at a
fifth of the cost.

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
"""

from __future__ import annotations

import numpy as np

_WORD = 0xFFFFFFFF  # 32 bits


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

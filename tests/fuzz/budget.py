"""How long the fuzzers run: bounded for CI, longer on request.

Every fuzz test takes its example count from ``examples(n)``: ``n`` in CI, ``n`` times
``LOADAWARE_FUZZ_SCALE`` locally, e.g. ``LOADAWARE_FUZZ_SCALE=50 pytest tests/fuzz``.
The time-boxed tests (slow clients) scale their duration the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, settings

Test = TypeVar("Test", bound=Callable[..., None])


def scale() -> float:
    return float(os.environ.get("LOADAWARE_FUZZ_SCALE", "1"))


def examples(count: int) -> Callable[[Test], Test]:
    """Hypothesis settings for ``count`` examples (scaled), without a per-example deadline.

    No example database: a CI run must not write into the repository, and a failure
    prints the reproducing example (``@reproduce_failure``) anyway.
    """
    bound: Callable[[Test], Test] = settings(
        max_examples=max(1, round(count * scale())),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    return bound

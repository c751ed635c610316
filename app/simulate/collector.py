"""CPython's cyclic garbage collector, run less often while a run is simulated.

A thousand-nodes run allocates millions of short-lived objects (readings, node and pod
views, estimates) beside a record that only grows: at the default threshold (a young
collection every 700 net allocations) the collector walked the young generations tens
of thousands of times and the whole heap ~20 times in a day of loadaware+desched,
~10 % of its CPU time. While a run goes on, a young collection waits for 100,000 net
allocations, and the older generations keep their own thresholds; the thresholds in
force before are restored after, an error included. Cycles are still collected, only
less often, and no result depends on when: the outputs are the same.

The simulator runs one run per process at a time (``--jobs`` starts processes), so
the thresholds it sets and restores are its own.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 100_000  # net allocations between young collections during a run


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Young collections at most every ``YOUNG_THRESHOLD`` allocations, for the block;
    left alone where automatic collection is off (a threshold of 0) or rarer already."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= YOUNG_THRESHOLD:
        yield
        return
    gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)

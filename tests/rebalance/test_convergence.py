"""The descheduler's own evictions, until the samples show them: equal times count."""

from __future__ import annotations

import pytest

from app.objects.evictions import EvictionRecord
from app.objects.resources import Resources
from app.rebalance.convergence import unsampled_amounts

EVICTED_AT_S = 1_700_000_000.0
RECORD = EvictionRecord(
    pod_key="ns/p",
    uid="u",
    node="hot",
    destination="cool",
    usage=Resources(2.0, 0.0),
    evicted_at_s=EVICTED_AT_S,
    workload=None,
)


@pytest.mark.parametrize(
    ("settle_s", "sample_s", "moved"),
    [
        (0.0, EVICTED_AT_S, True),  # stamped in the eviction's second: cannot show it
        (0.0, EVICTED_AT_S + 1, False),
        (300.0, EVICTED_AT_S + 300, True),  # exactly settleTime later: still unsettled
        (300.0, EVICTED_AT_S + 301, False),
        (300.0, None, True),  # no sample: nothing says it moved
    ],
)
def test_an_eviction_counts_until_a_sample_newer_than_settle_time(
    settle_s: float, sample_s: float | None, moved: bool
) -> None:
    times = {node: {"cpu": sample_s} for node in ("hot", "cool")}
    amounts = unsampled_amounts([RECORD], times, settle_s, ("cpu",))
    if moved:
        assert amounts == {"hot": {"cpu": -2.0}, "cool": {"cpu": 2.0}}
    else:
        assert amounts == {}

"""The demand history consolidation keeps room for (app/rebalance/rise.py) lives in the
descheduler's state (app/kube/state.py): it survives a restart, a new leader and
``--once`` runs, and what is stored is read defensively and bounded."""

from __future__ import annotations

import json

from app.kube import state
from app.objects import Resources

NOW = 1_800_000_000.0


def test_demand_samples_round_trip_through_the_document() -> None:
    saved_state = state.DeschedulerState(
        demand=[(NOW - 120, Resources(4.0, 2.0**30)), (NOW, Resources(10, 0))]
    )
    decoded, ignored = state.decode(state.encode(saved_state, NOW - 3600), NOW, NOW - 3600)
    assert decoded.demand == saved_state.demand
    assert ignored == []


def test_unreadable_and_future_demand_samples_are_skipped_and_said() -> None:
    document = {
        "version": state.VERSION,
        "demand": [
            [NOW - 60, 4, 1e9],
            [NOW + 3600, 40, 1e9],  # dated in the future
            [NOW - 30, -1, 1e9],  # negative
            ["x", 1, 1],
            [NOW - 20, 1],
            "garbage",
        ],
    }
    decoded, ignored = state.decode(json.dumps(document), NOW, NOW - 3600)
    assert decoded.demand == [(NOW - 60, Resources(4, 1e9))]
    assert ignored == ["5 unreadable or future-dated demand samples"]


def test_the_newest_samples_are_kept_within_their_share_of_the_document() -> None:
    many = [(NOW - i, Resources(1000.123456 + i, 1e12 + i)) for i in range(10_000)][::-1]
    text = state.encode(state.DeschedulerState(demand=many), NOW - 3600)
    decoded, _ = state.decode(text, NOW, NOW - 3600)
    assert 0 < len(decoded.demand) <= state.MAX_DEMAND_SAMPLES
    assert decoded.demand[-1] == many[-1]  # the newest kept
    stored = json.dumps(json.loads(text)["demand"], separators=(",", ":"))
    assert len(stored) <= state.MAX_DOCUMENT_BYTES // 8 + 2

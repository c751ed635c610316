"""`loadaware report`'s text never writes a tenant's control characters to a terminal:
workload and node names come from the descheduler's state and Prometheus labels."""

from __future__ import annotations

from typing import Any

from app.explain.report import OUTCOMES, render_text


def tally() -> dict[str, Any]:
    return {"evictions": dict.fromkeys(OUTCOMES, 1), "meanCooling": 0.1, "restarts": 0}


def test_a_name_with_an_escape_sequence_is_shown_without_it() -> None:
    hostile = "shop/api\x1b]0;owned\x07\nfake line"
    summary: dict[str, Any] = {
        "total": tally(),
        "nodes": {hostile: tally()},
        "workloads": {hostile: tally()},
        "notes": ["Prometheus said \x1b[2J"],
    }
    text = render_text(summary, "since 24h")
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "fake line" in text
    assert "\nfake line" not in text

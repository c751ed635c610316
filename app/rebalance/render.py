"""The dry-run table: what a plan would do and why, for a person to read."""

from __future__ import annotations

from app.rebalance.outcome import EvictionPlan


def render_plan(plan: EvictionPlan) -> str:
    lines = [f"evictions: {len(plan.evictions)}", *plan.notes]
    return "\n".join(lines) + "\n"

"""A PodDisruptionBudget as the descheduler reads it."""

from __future__ import annotations

from dataclasses import dataclass

from app.objects.selectors import LabelSelector

__all__ = [
    "PodDisruptionBudgetView",
]


@dataclass(frozen=True, slots=True)
class PodDisruptionBudgetView:
    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int  # status.disruptionsAllowed

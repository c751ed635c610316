"""PodDisruptionBudgets in every namespace, kept current by list and watch.

The planner reads them to avoid planning evictions a budget would refuse (429), so
that a blocked pod does not take the place of one that could move. The API server
still has the last word at eviction time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.policy_v1 import PodDisruptionBudget

from app.kube.cache import WatchCache
from app.objects import LabelRequirement, LabelSelector, PodDisruptionBudgetView

__all__ = [
    "BudgetCache",
    "budget_view",
    "label_selector",
]


def label_selector(selector: Any) -> LabelSelector:
    if selector is None:
        # policy/v1: a null selector selects no pods (an empty one selects all).
        return LabelSelector(match_expressions=(LabelRequirement("", "In", ()),))
    requirements = tuple(
        LabelRequirement(e.key, e.operator, tuple(e.values or ()))
        for e in (selector.matchExpressions or ())
    )
    return LabelSelector(dict(selector.matchLabels or {}), requirements)


def budget_view(pdb: Any) -> PodDisruptionBudgetView:
    status = pdb.status
    spec = pdb.spec
    return PodDisruptionBudgetView(
        namespace=pdb.metadata.namespace,
        name=pdb.metadata.name,
        selector=label_selector(spec.selector if spec else None),
        # A budget the disruption controller has not processed yet allows nothing,
        # as the API server treats it.
        disruptions_allowed=int(status.disruptionsAllowed or 0) if status else 0,
    )


class BudgetCache(WatchCache[PodDisruptionBudgetView]):
    """All PodDisruptionBudgets, keyed ``namespace/name``. Run ``run()`` as a task."""

    def __init__(
        self, client: AsyncClient, *, retry_delay_s: float = 1.0, max_retry_delay_s: float = 30.0
    ) -> None:
        super().__init__(
            client,
            PodDisruptionBudget,
            budget_view,
            lambda pdb: f"{pdb.metadata.namespace}/{pdb.metadata.name}",
            what="PodDisruptionBudget",
            namespace="*",
            retry_delay_s=retry_delay_s,
            max_retry_delay_s=max_retry_delay_s,
        )

    @property
    def budgets(self) -> Mapping[str, PodDisruptionBudgetView]:
        return self.objects

"""The disruption controller's ``status.disruptionsAllowed`` of a simulated PDB."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.simulate.scenario import DisruptionBudget

BoolArray = npt.NDArray[np.bool_]


def disruptions_allowed(
    budget: DisruptionBudget, running: BoolArray, wanted: BoolArray
) -> int:
    """Running pods minus those that must stay, where ``maxUnavailable`` counts from the
    replicas wanted now (``running``, ``wanted``: the workload's slots that are)."""
    if budget.min_available is not None:
        must_stay = budget.min_available
    else:
        assert budget.max_unavailable is not None
        must_stay = int(np.count_nonzero(wanted)) - budget.max_unavailable
    return max(0, int(np.count_nonzero(running)) - must_stay)

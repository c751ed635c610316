"""The ground floor: pure values every other floor shares.

Quantities and resources, durations, the views of nodes, pods and
PodDisruptionBudgets, label selectors, eviction records and the one pod-demand rule.
Frozen dataclasses and pure functions; nothing here imports anything else of the
project, so policy, load, kube, prom, rebalance and every component can build on it.

Each module lists its names once, in its ``__all__``, and the front star-imports every
one of them at once: they are plain dataclasses and functions, cheaper to load than to
defer (``lazy`` is the helper the fronts of heavier packages use).
"""

from app.objects.budgets import *  # noqa: F403
from app.objects.demand import *  # noqa: F403
from app.objects.durations import *  # noqa: F403
from app.objects.evictions import *  # noqa: F403
from app.objects.lazy import *  # noqa: F403
from app.objects.nodes import *  # noqa: F403
from app.objects.pods import *  # noqa: F403
from app.objects.resources import *  # noqa: F403
from app.objects.selectors import *  # noqa: F403
from app.objects.tenant_text import *  # noqa: F403

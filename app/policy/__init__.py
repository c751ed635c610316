"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The grammar of usage metric names (``metric_names``: what ``cpu_usage_p95_avg_1h``
measures, and a percentile written wrong) too. Each module lists its names
once, in its ``__all__``, and the front star-imports them all, so callers write ``from
app.policy import Policy``.
"""

from app.policy.classes import *  # noqa: F403
from app.policy.classes import PodClassesField
from app.policy.metric_names import *  # noqa: F403
from app.policy.pools import *  # noqa: F403
from app.policy.schema import *  # noqa: F403
from app.policy.schema import DynamicSchedulerPolicy, PolicySpec

# ``PolicySpec.classes`` names a type of the classes' module, which builds on the
# schema's: resolved here, where both are loaded (no import runs both ways).
PolicySpec.model_rebuild(_types_namespace={"PodClassesField": PodClassesField})
DynamicSchedulerPolicy.model_rebuild()

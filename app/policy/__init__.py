"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The grammar of usage metric names (``metric_names``: what ``cpu_usage_p95_avg_1h``
measures, and a percentile written wrong) too. Each module lists its names
once, in its ``__all__``, and the front star-imports them all, so callers write ``from
app.policy import Policy``.
"""

from app.policy.metric_names import *  # noqa: F403
from app.policy.pools import *  # noqa: F403
from app.policy.schema import *  # noqa: F403

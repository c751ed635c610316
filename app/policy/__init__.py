"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The grammar of usage metric names (``metric_names``: what ``cpu_usage_p95_avg_1h``
measures, and a percentile written wrong) too. The schema's names are re-exported
here, so callers write ``from app.policy import Policy``.
"""

from app.policy.metric_names import (
    AVG_WINDOW_S,
    MAX_WINDOW_S,
    MIN_WINDOW_S,
    UsageMetric,
    percentile_problem,
    shipped_percentile_metrics,
    usage_metric,
    window_text,
)
from app.policy.schema import (
    API_VERSION,
    DEFAULT_POLICY_YAML,
    FRESHNESS_GRACE_S,
    HOT_VALUE_VALID_S,
    KIND,
    DurationS,
    DynamicSchedulerPolicy,
    EstimationPolicy,
    HotValuePolicy,
    Number,
    Policy,
    PolicyError,
    PolicySpec,
    PredicatePolicy,
    PriorityPolicy,
    Switch,
    SyncPolicy,
    WholeNumber,
    default_policy,
    load_policy,
    policy_from_mapping,
    policy_from_yaml,
    resource_of_metric,
)

__all__ = [
    "API_VERSION",
    "AVG_WINDOW_S",
    "DEFAULT_POLICY_YAML",
    "FRESHNESS_GRACE_S",
    "HOT_VALUE_VALID_S",
    "KIND",
    "MAX_WINDOW_S",
    "MIN_WINDOW_S",
    "DurationS",
    "DynamicSchedulerPolicy",
    "EstimationPolicy",
    "HotValuePolicy",
    "Number",
    "Policy",
    "PolicyError",
    "PolicySpec",
    "PredicatePolicy",
    "PriorityPolicy",
    "Switch",
    "SyncPolicy",
    "UsageMetric",
    "WholeNumber",
    "default_policy",
    "load_policy",
    "percentile_problem",
    "policy_from_mapping",
    "policy_from_yaml",
    "resource_of_metric",
    "shipped_percentile_metrics",
    "usage_metric",
    "window_text",
]

"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The grammar of usage metric names (``metric_names``: what ``cpu_usage_p95_avg_1h``
measures, and a percentile written wrong) too. The schema's names are re-exported
here, so callers write ``from app.policy import Policy``.
"""

from app.policy.classes import (
    CLASS_USAGE_KEY_PREFIX,
    CLASS_USAGE_METRICS,
    MAX_CLASSES,
    PodClasses,
    PodClassesField,
    PodClassPolicy,
    class_usage_key,
    pod_classes,
    split_class_metric,
)
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
from app.policy.pools import (
    NodePools,
    PoolMatch,
    duplicate_name,
    label_selector,
    overlap_problem,
)
from app.policy.schema import (
    API_VERSION,
    DEFAULT_POLICY_YAML,
    FRESHNESS_GRACE_S,
    HOT_VALUE_VALID_S,
    KIND,
    MAX_NODE_POOLS,
    DurationS,
    DynamicSchedulerPolicy,
    EstimationPolicy,
    HotValuePolicy,
    NodePoolPolicy,
    Number,
    Policy,
    PolicyError,
    PolicySpec,
    PoolSelector,
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

# ``PolicySpec.classes`` names a type of the classes' module, which builds on the
# schema's: resolved here, where both are loaded (no import runs both ways).
PolicySpec.model_rebuild(_types_namespace={"PodClassesField": PodClassesField})
DynamicSchedulerPolicy.model_rebuild()

__all__ = [
    "API_VERSION",
    "AVG_WINDOW_S",
    "CLASS_USAGE_KEY_PREFIX",
    "CLASS_USAGE_METRICS",
    "DEFAULT_POLICY_YAML",
    "FRESHNESS_GRACE_S",
    "HOT_VALUE_VALID_S",
    "KIND",
    "MAX_CLASSES",
    "MAX_NODE_POOLS",
    "MAX_WINDOW_S",
    "MIN_WINDOW_S",
    "DurationS",
    "DynamicSchedulerPolicy",
    "EstimationPolicy",
    "HotValuePolicy",
    "NodePoolPolicy",
    "NodePools",
    "Number",
    "PodClassPolicy",
    "PodClasses",
    "Policy",
    "PolicyError",
    "PolicySpec",
    "PoolMatch",
    "PoolSelector",
    "PredicatePolicy",
    "PriorityPolicy",
    "Switch",
    "SyncPolicy",
    "UsageMetric",
    "WholeNumber",
    "class_usage_key",
    "default_policy",
    "duplicate_name",
    "label_selector",
    "load_policy",
    "overlap_problem",
    "percentile_problem",
    "pod_classes",
    "policy_from_mapping",
    "policy_from_yaml",
    "resource_of_metric",
    "shipped_percentile_metrics",
    "split_class_metric",
    "usage_metric",
    "window_text",
]

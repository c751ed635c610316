"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The schema's names are re-exported here, so callers write ``from app.policy import Policy``.
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

# ``PolicySpec.classes`` names a type of the classes' module, which builds on the
# schema's: resolved here, where both are loaded (no import runs both ways).
PolicySpec.model_rebuild(_types_namespace={"PodClassesField": PodClassesField})
DynamicSchedulerPolicy.model_rebuild()

__all__ = [
    "API_VERSION",
    "CLASS_USAGE_KEY_PREFIX",
    "CLASS_USAGE_METRICS",
    "DEFAULT_POLICY_YAML",
    "FRESHNESS_GRACE_S",
    "HOT_VALUE_VALID_S",
    "KIND",
    "MAX_CLASSES",
    "DurationS",
    "DynamicSchedulerPolicy",
    "EstimationPolicy",
    "HotValuePolicy",
    "Number",
    "PodClassPolicy",
    "PodClasses",
    "Policy",
    "PolicyError",
    "PolicySpec",
    "PredicatePolicy",
    "PriorityPolicy",
    "Switch",
    "SyncPolicy",
    "WholeNumber",
    "class_usage_key",
    "default_policy",
    "load_policy",
    "pod_classes",
    "policy_from_mapping",
    "policy_from_yaml",
    "resource_of_metric",
    "split_class_metric",
]

"""The scheduling policy: schema and loader (``schema``). Reloading it on change is the
runtime's (``app/runtime/policy_reload.py``), and ``loadaware policy check`` is a
command, not part of the policy (``app/policy_check/``).

The schema's names are re-exported here, so callers write ``from app.policy import Policy``.
"""

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
    "DEFAULT_POLICY_YAML",
    "FRESHNESS_GRACE_S",
    "HOT_VALUE_VALID_S",
    "KIND",
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
    "WholeNumber",
    "default_policy",
    "load_policy",
    "policy_from_mapping",
    "policy_from_yaml",
    "resource_of_metric",
]

"""The policy a component runs on: the file ``--policy`` names, reloaded when it changes
(keeping the old policy if the new one is broken), or the built-in default; and the
reload metrics every component reports the same way."""

from __future__ import annotations

import logging
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge

from app.policy import Policy, PolicyError, default_policy, load_policy
from app.runtime.in_force import InForce

__all__ = [
    "PolicyReloadMetrics",
    "policy_in_force",
]

log = logging.getLogger(__name__)


def policy_in_force(path: str | Path | None, interval_s: float = 5.0) -> InForce[Policy]:
    """The process's policy in force: the file ``--policy`` names (read now; PolicyError
    if it is broken), reloaded when it changes, or the built-in default, with a warning
    and no reload, when no file is given."""
    if not path:
        log.warning("no --policy given: using the built-in default policy (crane's defaults)")
    return InForce(
        default_policy,
        path,
        load_policy,
        errors=(PolicyError,),
        what="policy",
        interval_s=interval_s,
        warnings_of=_policy_warnings,
    )


def _policy_warnings(policy: Policy) -> tuple[str, ...]:
    return tuple(policy.warnings)


class PolicyReloadMetrics:
    """``loadaware_policy_reloads_total`` and the time of the last good load, in a
    component's registry: the extender, the annotator and the descheduler alike."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reloads = Counter(
            "loadaware_policy_reloads_total",
            "Policy file reloads by result (success, error). After an error the previous "
            "policy stays in force.",
            ["result"],
            registry=registry,
        )
        self.last_success = Gauge(
            "loadaware_policy_last_successful_reload_timestamp_seconds",
            "Unix time of the last successful policy load.",
            registry=registry,
        )

    def loaded(self, at_s: float) -> None:
        """A policy was adopted (at start, or by a reload)."""
        self.last_success.set(at_s)

    def reload_result(self, result: str) -> None:
        self.reloads.labels(result=result).inc()

"""How the loop runs, as the flags say: the one value ``main`` builds before the
descheduler itself is imported (its caches, the planner and the web server: about a
second), so that a bad flag or file, or a missing kubeconfig, is told without them.
And the warning about thresholds that make pods bounce, said at start (``main``) and
on each reload (the descheduler)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.kube import STATE_NAME
from app.runtime import LeaseSettings

if TYPE_CHECKING:
    from app.policy import Policy
    from app.rebalance import DeschedulerConfig

log = logging.getLogger(__name__)


def warn_about_thresholds(config: DeschedulerConfig, policy: Policy) -> list[str]:
    """Log, at start and on each reload, where the thresholds make pods bounce."""
    from app.rebalance import threshold_conflicts

    conflicts = threshold_conflicts(config, policy)
    for conflict in conflicts:
        log.warning("descheduler thresholds: %s", conflict)
    return conflicts


@dataclass(frozen=True, slots=True)
class LoopSettings:
    dry_run: bool = False  # --dry-run; the config's dryRun also counts
    lease: LeaseSettings | None = None  # None: no leader election
    identity: str = "loadaware-descheduler"  # reportingInstance of the Events
    state_namespace: str = "default"  # where its memory lives (the CLI: the pod's namespace)
    state_name: str = STATE_NAME
    health_host: str = "0.0.0.0"
    health_port: int | None = None
    sync_timeout_s: float = 60.0  # how long a run waits for the caches
    max_consecutive_errors: int = 3  # API errors in a row that end a run

"""How the loop runs, as the flags say: the one value ``main`` builds before the
descheduler itself is imported (its caches, the planner and the web server: about a
second), so that a bad flag or file, or a missing kubeconfig, is told without them."""

from __future__ import annotations

from dataclasses import dataclass

from app.runtime import LeaseSettings


@dataclass(frozen=True, slots=True)
class LoopSettings:
    dry_run: bool = False  # --dry-run; the config's dryRun also counts
    lease: LeaseSettings | None = None  # None: no leader election
    identity: str = "loadaware-descheduler"  # reportingInstance of the Events
    state_namespace: str = "default"  # where its memory lives (the CLI: the pod's namespace)
    state_name: str = "loadaware-descheduler-state"
    health_host: str = "0.0.0.0"
    health_port: int | None = None
    sync_timeout_s: float = 60.0  # how long a run waits for the caches
    max_consecutive_errors: int = 3  # API errors in a row that end a run

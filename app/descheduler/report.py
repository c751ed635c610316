"""What one run did: its result, the message an operator reads, the plan and each pod's outcome."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum

from app.rebalance import ConsolidationPlan, EvictionPlan

# Every step of a run logs under the loop's name, as when the run was one method, so
# that log filters and alerts keyed on it see every line of a run.
run_log = logging.getLogger("app.descheduler.descheduler")


class RunResult(StrEnum):
    OK = "ok"
    NOT_LEADER = "not_leader"
    CACHES_NOT_SYNCED = "caches_not_synced"
    PROMETHEUS_DOWN = "prometheus_down"
    BAD_QUERY = "bad_query"  # Prometheus is up, but rejected a pod usage query
    NO_POD_USAGE = "no_pod_usage"
    HISTORY_UNAVAILABLE = "history_unavailable"
    STATE_NOT_SAVED = "state_not_saved"
    LEADERSHIP_LOST = "leadership_lost"
    API_ERRORS = "api_errors"


@dataclass
class RunReport:
    result: RunResult
    message: str = ""
    plan: EvictionPlan | None = None
    outcomes: dict[str, str] = field(default_factory=dict)  # pod key -> outcome or skip reason
    dry_run: bool = False
    consolidation: ConsolidationPlan | None = None  # with consolidation.enabled

    @property
    def evicted(self) -> list[str]:
        return [key for key, outcome in self.outcomes.items() if outcome == "evicted"]

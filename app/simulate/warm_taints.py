"""The annotator's warm taint, simulated (``app.load.warm_taint``): at each round of the
soft taints, the nodes whose usage runs far ahead of their requests, judged from the
written readings of the limited metrics and the requests the scheduler has bound."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from app.load import WarmTaints, WarmTaintSettings, decide_warm_taints, warm_excess
from app.simulate.recording_rules import SimulatedMonitoring
from app.simulate.scheduling import NodeRequests

FloatArray = npt.NDArray[np.float64]


class SimulatedWarmTaints:
    """Which nodes carry ``loadaware.io/warm`` now: ``tainted``, which the scheduler
    holds (set in place); none without the nodes' requests."""

    def __init__(
        self,
        requests: NodeRequests | None,
        pipeline: SimulatedMonitoring,
        limits: Mapping[str, float | FloatArray],
        resources: Mapping[str, str],
        settings: WarmTaintSettings,
    ) -> None:
        """``limits``: per limited metric synced, its limit (per node with node pools);
        ``resources``: the metrics the rule reads, with their resources (``warm_metrics``)."""
        self._requests = requests
        self._pipeline = pipeline
        self._limits = {m: limit for m, limit in limits.items() if m in resources}
        self._resources = resources
        self.settings = settings
        nodes = len(requests.allocatable_cpu) if requests is not None else 0
        self.tainted: npt.NDArray[np.bool_] = np.zeros(nodes, dtype=np.bool_)
        self._warm_at_s: FloatArray = np.full(nodes, np.nan)
        self.last: WarmTaints | None = None

    def sync(self, now_s: float, hot: npt.NDArray[np.bool_]) -> None:
        """Decide again at ``now_s``; ``hot``: the nodes the hot taint is on now."""
        requests = self._requests
        if requests is None or not self._limits:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            shares = {
                "cpu": requests.requested_cpu / requests.allocatable_cpu,
                "memory": requests.requested_memory / requests.allocatable_memory,
            }
        usage = {m: self._pipeline.values[m] for m in self._limits}
        requested = {m: shares[self._resources[m]] for m in self._limits}
        judged = warm_excess(usage, requested, self._limits)
        decision = decide_warm_taints(
            judged, tuple(self._limits), self._warm_at_s, now_s, self.settings, hot
        )
        self._warm_at_s = decision.warm_at_s
        self.tainted[:] = decision.tainted
        self.last = decision

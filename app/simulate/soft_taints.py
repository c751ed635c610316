"""The annotator's soft taints, simulated: which nodes carry loadaware's taint now.

At each sync of a limited metric (a metric a policy predicate sets a limit on), the
simulated annotator does what the annotator does after writing a round: it reads each
node's annotations through the production load model (``app.load.evaluate_node``,
the extender's view, without an estimate), judges them with ``app.load.taints``
(``node_heat``, then ``decide_soft_taints`` with the memory kept from the previous
round) and sets the taint on the nodes the rule names. Between syncs the taints stay
as they are, as they do on the Nodes.

``tainted`` is what kube-scheduler's TaintToleration sees (``scheduling.Scheduler``);
``rounds`` keeps every decision, so that tests can tie a taint to its reason.

Only the nodes that can carry the taint are read: those tainted now, and those with a
written value of a limited metric within ``SCREEN_SLACK`` of its limit (the
annotation is that value to 5 decimals, so a node below it cannot read as hot). The
others are neither hot nor tainted, so the rule leaves them untainted whatever their
readings say (``decide_soft_taints``' ``nodes``); on 1,000 cool nodes, reading
every one at every sync made ``default+taints`` eight times slower than ``default``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.load import NodeLoad, evaluate_node
from app.load.taints import SoftTaints, SoftTaintSettings, decide_soft_taints, node_heat
from app.policy import Policy
from app.simulate.recording_rules import SimulatedMonitoring, is_due

SCREEN_SLACK = 1e-4


@dataclass(frozen=True, slots=True)
class TaintRound:
    t_s: float
    decision: SoftTaints


class SimulatedSoftTaints:
    """The annotator's soft-taint keeper over the simulated monitoring's annotations."""

    def __init__(
        self,
        policy: Policy,
        pipeline: SimulatedMonitoring,
        node_names: list[str],
        settings: SoftTaintSettings | None = None,
    ) -> None:
        self.policy = policy
        self.settings = settings or SoftTaintSettings()
        self._pipeline = pipeline
        self._names = node_names
        limits = dict(policy.limits)
        self._limits = {m: limit for m, limit in limits.items() if m in pipeline.sync_periods_s}
        self._periods_s = sorted({pipeline.sync_periods_s[m] for m in self._limits})
        self.tainted: npt.NDArray[np.bool_] = np.zeros(len(node_names), dtype=np.bool_)
        self._warm_at_s: dict[str, float] = {}
        self.rounds: list[TaintRound] = []
        # A node's load is reused until its annotations are rewritten or the clock alone
        # would change it (``recheck_at_s``), as the extender's LoadFilter reuses it.
        self._loads: list[tuple[int, NodeLoad] | None] = [None] * len(node_names)

    def advance(self, t_s: float) -> None:
        """After the pipeline's ``advance(t_s)``: decide again if a limited metric synced."""
        if any(is_due(t_s, period_s) for period_s in self._periods_s):
            self.sync(t_s)

    def sync(self, t_s: float) -> SoftTaints:
        now_s = self._pipeline.epoch_s + t_s
        margin = self.settings.release_margin
        heats = {
            self._names[node]: node_heat(self._load(node, now_s), self.policy, margin)
            for node in np.flatnonzero(self._may_be_tainted()).tolist()
        }
        decision = decide_soft_taints(
            heats, self._warm_at_s, now_s, self.settings, nodes=len(self._names)
        )
        self._warm_at_s = dict(decision.warm_at_s)
        tainted = decision.tainted
        # In place: the scheduler holds this array.
        self.tainted[:] = [name in tainted for name in self._names]
        self.rounds.append(TaintRound(t_s, decision))
        return decision

    def _may_be_tainted(self) -> npt.NDArray[np.bool_]:
        near = self.tainted.copy()
        for metric, limit in self._limits.items():
            # NaN (never written) compares False: such a node reads as unknown.
            near |= self._pipeline.values[metric] > limit - SCREEN_SLACK
        return near

    def _load(self, node: int, now_s: float) -> NodeLoad:
        version = int(self._pipeline.node_version[node])
        cached = self._loads[node]
        if cached is not None and cached[0] == version and now_s < cached[1].recheck_at_s:
            return cached[1]
        load = evaluate_node(self._pipeline.annotations(node), self.policy, now_s)
        self._loads[node] = (version, load)
        return load


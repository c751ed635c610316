"""The second soft taint, ``loadaware.io/warm``: nodes whose real usage runs far ahead
of their requests. Pure.

kube-scheduler's default profile places by requests (NodeResourcesFit's
LeastAllocated): of two nodes, the one with fewer requests gets the pod, whatever each
really uses. A node that holds a few pods using far more than they request (a batch
pod requesting half a core and using four) is the emptiest by requests and among the
busiest in fact, so a burst of new pods (an autoscaler's scale-up: hundreds in one
scheduling pass, while no node is near a limit and the hot taint marks none) fills it
first. The hot taint (``app.load.taints``) comes when the node is over a limit, after
the pods that took it there.

The rule, per limited metric of a resource (a policy predicate's metric on CPU or
memory), over the nodes with a fresh reading of it (others: no data, never tainted):

- ``ahead``: the reading less the node's requested share of that resource;
- the node is **warm** when its ``ahead`` is more than ``margin`` above the median
  node's ``ahead``, *and* its room under the limit (the limit less the reading) is
  below the median node's room. The second condition keeps the taint off a node that,
  for all its usage, has more real room than most: turning pods away from it would
  send them somewhere busier;
- a node's excess is the largest of its metrics' (``ahead`` less the median's).

Then, as the hot taint: a warm-tainted node keeps the taint while its excess stays
above ``margin - release``, and for ``min_hold_s`` after it last was, so a dip does not
make it flap; it marks at most ``max_share`` of the nodes less those the hot taint
marks, those of the largest excess (a tainted node counts ``release`` more, so two
nodes near the bound do not take turns). It is for the calm before a burst, when no
node is near a limit and the hot taint marks none; once the hot taint marks nodes, it
steers each wave by the next pod (``app.load.taints``) and this one gives way: counted
apart, it took a share of the nodes a wave could go to on 10-node clusters where the
hot taint marks several (cpu-heavy and memory-heavy evicted 1-2 pods a seed for
nothing; mixed-waves, seeds 1-3, 320/682/424 node-minutes above the limits went to
384/636/362). And none on a cluster of fewer than ``min_nodes`` (20): there each wave
is a few pods over minutes, which the hot taint with the next pod steers, and the warm
taint, marking the nodes of a background pod between waves, made the waves land worse
(seeds 1-5 of default+taints: mixed-waves 2,122 -> 2,192 node-minutes above the
limits, crane-style-waves 1,031 -> 1,266 with 0.7 throttled CPU-minutes on seed 5
where none). The burst it is for, hundreds of pods in one pass while nothing is hot,
is a large cluster's (two-peaks-hpa, 200 nodes: docs/tuning.md).

It is a second ``PreferNoSchedule`` key, not the hot one: TaintToleration counts the
taints a pod does not tolerate and normalizes them in reverse over the feasible nodes,
so while a node carries this one by the rule, every node with the hot taint carries it
too (taking none of its share; the share is what the hot taints leave of
``max_share``): then an untainted node scores 300, a warm node 150 and a hot node 0
(``app.load.default_profile.taint_toleration_scores``): a warm node is a second
choice, a hot one still the last. Were they apart, a hot node would score as a warm
one, 0, or with both about 150 where it scored 0.

Why a tenant cannot taint every node with it (docs/security.md): the line is relative
to the cluster's median node, so usage run ahead of requests on every node moves the
median with it and taints none; and ``max_share`` bounds the nodes it can mark. It is
a preference: a tainted node still takes pods when the others are full.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.load.model import measure
from app.objects import Resources
from app.policy import Policy

__all__ = [
    "WARM_TAINT_KEY",
    "WarmExcess",
    "WarmNode",
    "WarmTaintSettings",
    "WarmTaints",
    "decide_warm_taints",
    "judge_warm",
    "warm_excess",
    "warm_metrics",
]

WARM_TAINT_KEY = "loadaware.io/warm"

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class WarmTaintSettings:
    # How far ahead of its requests a node's usage must run, beyond the median node's,
    # to be warm (a fraction of the node).
    margin: float = 0.15
    release: float = 0.05  # a tainted node keeps the taint down to margin - release
    min_hold_s: float = 600.0
    max_share: float = 0.25  # of the nodes, at most this share carry the taint
    # Below this many nodes, none: the hot taint, with the next pod, steers each wave of
    # a small cluster, and this one made the waves land worse (module doc).
    min_nodes: int = 20

    def __post_init__(self) -> None:
        if not 0.0 < self.margin < 1.0:
            raise ValueError(f"warm margin must be in (0, 1), not {self.margin}")
        if not 0.0 <= self.release <= self.margin:
            raise ValueError(f"warm release must be in [0, margin], not {self.release}")
        if not self.min_hold_s >= 0.0 or math.isinf(self.min_hold_s):
            raise ValueError(f"warm hold must be a finite duration >= 0, not {self.min_hold_s}")
        if not 0.0 <= self.max_share <= 1.0:
            raise ValueError(f"warm share must be in [0, 1], not {self.max_share}")
        if self.min_nodes < 4:
            raise ValueError(f"warm taint's fewest nodes must be at least 4, not {self.min_nodes}")

    def cap(self, nodes: int) -> int:
        """How many of ``nodes`` may carry the taint at once (none below ``min_nodes``)."""
        if nodes < self.min_nodes or self.max_share <= 0:
            return 0
        return math.floor(self.max_share * nodes + 1e-9)


@dataclass(frozen=True, slots=True)
class WarmExcess:
    """Per node, its excess (``ahead`` less the median's; -inf: not warm on any metric
    or no data), the metric of it (an index into the metrics judged; -1: none), and
    per metric the reading, the requested share and the median ``ahead``."""

    excess: FloatArray
    metric: IntArray
    usage: FloatArray  # nodes x metrics
    requested: FloatArray  # nodes x metrics
    median_ahead: FloatArray  # per metric
    known: BoolArray  # per node, whether any metric has a fresh reading


def warm_excess(
    usage: Mapping[str, FloatArray],
    requested: Mapping[str, FloatArray],
    limits: Mapping[str, float | FloatArray],
) -> WarmExcess:
    """The excess of each node (module doc). ``usage``: per limited metric, each node's
    fresh reading as a fraction (NaN: none); ``requested``: per the same metric, each
    node's requested share of its resource; ``limits``: per metric, its limit."""
    metrics = list(usage)
    if not metrics:
        empty = np.zeros(0, dtype=np.float64)
        none = np.zeros(0, dtype=np.bool_)
        return WarmExcess(
            empty, np.zeros(0, dtype=np.int64), empty[:, None], empty[:, None], empty, none
        )
    use = np.stack([np.asarray(usage[m], dtype=np.float64) for m in metrics], axis=1)
    req = np.stack([np.asarray(requested[m], dtype=np.float64) for m in metrics], axis=1)
    ahead = use - req
    known = ~np.isnan(use)
    median_ahead = np.full(len(metrics), np.nan)
    excess = np.full(use.shape, -np.inf)
    for j in range(len(metrics)):
        column = known[:, j]
        if not column.any():
            continue
        median_ahead[j] = float(np.median(ahead[column, j]))
        room = np.asarray(limits[metrics[j]], dtype=np.float64) - use[:, j]
        median_room = float(np.median(room[column]))
        warm = column & (room < median_room)
        excess[warm, j] = ahead[warm, j] - median_ahead[j]
    metric = np.argmax(excess, axis=1).astype(np.int64)
    best = excess[np.arange(len(excess)), metric]
    metric[~np.isfinite(best)] = -1
    has_data: BoolArray = np.asarray(known.any(axis=1), dtype=np.bool_)
    return WarmExcess(best, metric, use, req, median_ahead, has_data)


def warm_metrics(policy: Policy) -> dict[str, str]:
    """The metrics the rule reads: each limited metric of a resource, with its resource."""
    resources = policy.metric_resources
    return {m: resources[m] for m, _ in policy.limits if m in resources}


@dataclass(frozen=True, slots=True)
class WarmNode:
    """What the rule reads of a node on a real cluster: its annotations (the readings),
    its allocatable, the sum of the requests of the pods bound on it (what
    kube-scheduler's NodeResourcesFit counts) and the policy it is judged by (its node
    pool's)."""

    annotations: Mapping[str, str]
    allocatable: Resources
    requested: Resources
    policy: Policy


def judge_warm(
    nodes: Mapping[str, WarmNode], policy: Policy, now_s: float
) -> tuple[tuple[str, ...], WarmExcess]:
    """``warm_excess`` of ``nodes`` from their annotations at ``now_s`` (the annotator's
    and ``explain node``'s way in; the simulator hands its arrays to ``warm_excess``):
    the metrics judged, in order, and the excess. A reading that is not fresh counts as
    none: fail open."""
    metrics = warm_metrics(policy)
    count = len(nodes)
    usage = {m: np.full(count, np.nan) for m in metrics}
    requested = {m: np.zeros(count) for m in metrics}
    limits = {m: np.full(count, np.inf) for m in metrics}
    for i, node in enumerate(nodes.values()):
        readings = measure(node.annotations, node.policy, now_s).readings
        node_limits = dict(node.policy.limits)
        for m, resource in metrics.items():
            reading = readings.get(m)
            if reading is not None and reading.is_fresh and reading.usage_fraction is not None:
                usage[m][i] = reading.usage_fraction
            whole = node.allocatable.get(resource)
            requested[m][i] = node.requested.get(resource) / whole if whole > 0 else 0.0
            limits[m][i] = node_limits.get(m, math.inf)
    return tuple(metrics), warm_excess(usage, requested, limits)


@dataclass(frozen=True, slots=True)
class WarmTaints:
    """One round's warm taints: per node tainted or not, the new memory (the last
    instant each tainted node was above its line; NaN: untainted) and why."""

    tainted: BoolArray
    warm_at_s: FloatArray
    reasons: tuple[str, ...]


def decide_warm_taints(
    judged: WarmExcess,
    metrics: tuple[str, ...],
    warm_at_s: FloatArray,
    now_s: float,
    settings: WarmTaintSettings,
    hot: BoolArray | None = None,
) -> WarmTaints:
    """Which nodes carry the warm taint after this round (module doc). ``warm_at_s``:
    the previous round's memory (NaN: not tainted), of the same nodes as ``judged``;
    ``metrics``: the names of ``judged``'s metrics, for the reasons; ``hot``: the nodes
    the hot taint's rule taints this round, which carry this one too (module doc) and
    take none of its share."""
    excess = judged.excess
    nodes = len(excess)
    was = ~np.isnan(warm_at_s)
    above = excess > settings.margin
    kept_line = was & (excess > settings.margin - settings.release)
    held = was & ~kept_line & (now_s - np.nan_to_num(warm_at_s, nan=-np.inf) < settings.min_hold_s)
    held &= judged.known  # no data: fail open, at once
    hot_now = np.zeros(nodes, dtype=np.bool_) if hot is None else hot.astype(np.bool_)
    wanted = (above | kept_line | held) & ~hot_now
    # A held node may be warm on no metric now (excess -inf): ranked at -1, still wanted.
    rank = np.where(
        wanted, np.maximum(excess, -1.0) + np.where(was, settings.release, 0.0), -np.inf
    )
    cap = max(0, settings.cap(nodes) - int(np.count_nonzero(hot_now)))
    order = np.lexsort((np.arange(nodes), -rank))  # largest first, then by index
    chosen = np.zeros(nodes, dtype=np.bool_)
    if cap > 0:
        top = order[:cap]
        chosen[top[wanted[top]]] = True
    memory = np.full(nodes, np.nan)
    memory[chosen & (above | kept_line)] = now_s
    keep_old = chosen & held
    memory[keep_old] = warm_at_s[keep_old]
    reasons = tuple(
        "hot: carries the hot taint, and this one with it beside a warm node"
        if hot_now[i]
        else _reason(judged, metrics, i, bool(chosen[i]), bool(wanted[i]), bool(held[i]), cap)
        for i in range(nodes)
    )
    # The hot nodes carry it only beside a node warm by the rule: with none, one taint
    # on the hot nodes ranks them as two would.
    return WarmTaints(chosen | (hot_now & chosen.any()), memory, reasons)


def _reason(
    judged: WarmExcess, metrics: tuple[str, ...], i: int, chosen: bool, wanted: bool, held: bool,
    cap: int,
) -> str:  # fmt: skip
    j = int(judged.metric[i])
    if j < 0:
        what = "its usage runs no further ahead of its requests than the median node's"
        if not judged.known[i]:
            what = "no fresh reading of a limited metric"
    else:
        usage, requested = judged.usage[i, j], judged.requested[i, j]
        what = (
            f"{metrics[j]} {usage:.2f} with {requested:.2f} requested: "
            f"{judged.excess[i]:+.2f} ahead of the median node ({judged.median_ahead[j]:.2f})"
        )
    if chosen:
        return f"warm (held): {what}" if held else f"warm: {what}"
    if wanted:
        return f"warm, over the share: {cap} nodes at most ({what})"
    return f"not warm: {what}"

"""Debounce rounds kept between runs: in the descheduler's state ConfigMap, and by the
simulator on its own clock (one rule for both).

A node must be seen above ``targetThresholds`` in ``consecutiveHotRounds`` runs in a
row before it becomes a source. The count is kept per node as (count, time of the
round) in the descheduler's state (``app/kube/state.py``), so that it survives
restarts, carries over to a new leader, and works for ``--once`` runs from a CronJob,
where no process sees two rounds. (Earlier versions kept it in a Node annotation,
``descheduler.loadaware.io/hot-rounds``; that annotation is no longer read, so anyone
who may patch a Node cannot steer the count.) Rules:

* A count is only *consecutive* if its round is recent: one older than twice the
  ``interval`` (plus a minute of slack) counts as 0. With ``--once``, set ``interval``
  to the CronJob's schedule.
* A round less than half an ``interval`` after the recorded one does not count again:
  a manual ``--once`` run beside the loop cannot advance the count twice.
* Dry runs read the count but never write it; a dry-run loop counts its own rounds
  in memory on top of it, so its table previews evictions once debouncing would end.
* A node seen not hot is forgotten (its count is 0).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.rebalance.outcome import NodeClass

__all__ = ["previous_hot_rounds", "record_hot_rounds"]

SLACK_S = 60.0

Recorded = Mapping[str, tuple[int, float]]  # node -> (count, unix seconds of its round)


def previous_hot_rounds(recorded: Recorded, now_s: float, interval_s: float) -> dict[str, int]:
    """The consecutive hot rounds before this one, per node, for ``plan``."""
    counts: dict[str, int] = {}
    for name, (count, at_s) in recorded.items():
        if count == 0:
            continue
        age_s = now_s - at_s
        if age_s > 2 * interval_s + SLACK_S or age_s < -SLACK_S:
            continue  # not consecutive (or a clock far off): start again
        if age_s < interval_s / 2:
            count -= 1  # the recorded round is this one: do not count it twice
        if count > 0:
            counts[name] = count
    return counts


def record_hot_rounds(
    recorded: Recorded,
    classes: Mapping[str, NodeClass],
    now_s: float,
    interval_s: float,
) -> dict[str, tuple[int, float]]:
    """The counts to remember after this round, for the nodes seen hot in it. A count
    that this very round already recorded keeps its time (a second run in the same
    round does not advance it); nodes seen not hot, or gone, are forgotten (count 0)."""
    updated: dict[str, tuple[int, float]] = {}
    for name, node_class in classes.items():
        count = node_class.hot_rounds if node_class.hot else 0
        if count == 0:
            continue
        previous = recorded.get(name)
        if previous is not None and previous[0] == count and now_s - previous[1] < interval_s / 2:
            updated[name] = previous
        else:
            updated[name] = (count, now_s)
    return updated

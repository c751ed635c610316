"""Debounce rounds kept in the cluster: a Node annotation the descheduler writes.

A node must be seen above ``targetThresholds`` in ``consecutiveHotRounds`` runs in a
row before it becomes a source. The count lives on the Node as

    descheduler.loadaware.io/hot-rounds: "<count>,<UTC time of the round>"

so that it survives restarts, carries over to a new leader, and works for ``--once``
runs from a CronJob, where no process sees two rounds. Rules:

* A count is only *consecutive* if its round is recent: one older than twice the
  ``interval`` (plus a minute of slack) counts as 0. With ``--once``, set ``interval``
  to the CronJob's schedule.
* A round less than half an ``interval`` after the recorded one does not count again:
  a manual ``--once`` run beside the loop cannot advance the count twice.
* Dry runs read the count but never write it.
* A node seen not hot is written back to 0 (once); nothing else touches the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from app.kube.objects import NodeInfo
from app.rebalance.outcome import NodeClass

HOT_ROUNDS_KEY = "descheduler.loadaware.io/hot-rounds"
SLACK_S = 60.0


def parse_hot_rounds(value: str | None) -> tuple[int, float] | None:
    """``"<count>,<time>"`` as (count, unix seconds); None when absent or unreadable."""
    if not value:
        return None
    count_text, _, time_text = value.partition(",")
    try:
        count = int(count_text)
        at_s = datetime.fromisoformat(time_text.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return (count, at_s) if count >= 0 else None


def format_hot_rounds(count: int, at_s: float) -> str:
    at = datetime.fromtimestamp(at_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{count},{at}"


def previous_hot_rounds(
    nodes: Mapping[str, NodeInfo], now_s: float, interval_s: float
) -> dict[str, int]:
    """The consecutive hot rounds before this one, per node, for ``plan``."""
    counts: dict[str, int] = {}
    for name, node in nodes.items():
        recorded = parse_hot_rounds(node.annotations.get(HOT_ROUNDS_KEY))
        if recorded is None or recorded[0] == 0:
            continue
        count, at_s = recorded
        age_s = now_s - at_s
        if age_s > 2 * interval_s + SLACK_S or age_s < -SLACK_S:
            continue  # not consecutive (or a clock far off): start again
        if age_s < interval_s / 2:
            count -= 1  # the recorded round is this one: do not count it twice
        if count > 0:
            counts[name] = count
    return counts


def hot_round_patches(
    nodes: Mapping[str, NodeInfo],
    classes: Mapping[str, NodeClass],
    now_s: float,
    interval_s: float,
) -> dict[str, dict[str, str]]:
    """The annotation writes that record this round: changed counts, and hot rounds
    whose recorded time is not this round's (so that the next round sees them as recent)."""
    patches: dict[str, dict[str, str]] = {}
    for name, node_class in classes.items():
        node = nodes.get(name)
        if node is None:
            continue
        count = node_class.hot_rounds if node_class.hot else 0
        recorded = parse_hot_rounds(node.annotations.get(HOT_ROUNDS_KEY))
        if recorded is not None and recorded[0] == count:
            if count == 0 or now_s - recorded[1] < interval_s / 2:
                continue
        elif recorded is None and count == 0:
            continue
        patches[name] = {HOT_ROUNDS_KEY: format_hot_rounds(count, now_s)}
    return patches

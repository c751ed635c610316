"""Workloads still arriving beside a request-based kube-scheduler, and whether the
cluster has a cool node for their next pod. Pure.

A wave of pods that use more than they request (batch pods asking for 2 cores and
using 7) lands by requests: on the nodes with the fewest, the soft taints aside. Once
the next pod of such a wave would take every node kube-scheduler may put it on above
``targetThresholds``, the wave heats nodes whatever the descheduler does, and a move
made meanwhile only changes which ones: each replacement changes the requests, so which
node is the emptiest when the wave's next pod comes, and the source it cools and the
landing it warms change which nodes the annotator's taint share covers. Issue 40,
``tests/fixtures/simulate/big-batch-beside-services.yaml``: 15 ``etl`` pods (2 cores
requested, 7.2 used) one every 10 minutes beside two services; a single ``api`` move
at 95 minutes sent the 130- and 150-minute ``etl`` pods elsewhere and a third one onto
node-8 (1,597 throttled CPU-minutes there, 2,415 in all against 1,367 without the
descheduler, seed 19). Which node such a move hurts is chance: over seeds 1-20 the
moves made during the wave added harm on 8 and took it off others. So beside soft
taints the plan stands down while a wave is ahead that no node can take cool
(``SkipCode.WAVE_AHEAD``), and moves again once the wave has arrived or a node has room
for its next pod.

A workload is arriving while its pods are created one after another: the time since
its newest pod is at most the gap between its two newest (the next is due), and at
most ``within_s``. Pods created all at once (a Deployment's, a Job's parallelism) or a
CronJob's (a new Job each time, one workload each) are not a wave; the replacements of
the descheduler's own evictions are not arrivals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.objects import RESOURCES, EvictionRecord, NodeInfo, PodInfo, Resources, workload_of
from app.rebalance.destinations import FINISHED_PHASES
from app.rebalance.kube_scheduler import RequestScheduler
from app.rebalance.outcome import NodeClass

__all__ = ["arriving", "wave_ahead"]


def arriving(
    pods: Iterable[PodInfo], evictions: Sequence[EvictionRecord], now_s: float, within_s: float
) -> list[PodInfo]:
    """Per workload still arriving (module doc), its newest pod: the shape of the next."""
    created: dict[str, list[tuple[float, str, PodInfo]]] = {}
    for pod in pods:
        workload = workload_of(pod)
        if workload is None or pod.created_s is None or pod.terminating:
            continue
        if pod.phase in FINISHED_PHASES:
            continue
        created.setdefault(workload, []).append((pod.created_s, pod.key, pod))
    evicted: dict[str, list[float]] = {}
    for record in evictions:
        if record.workload is not None:
            evicted.setdefault(record.workload, []).append(record.evicted_at_s)
    found = []
    for workload in sorted(created):
        times = sorted(created[workload], key=lambda item: (item[0], item[1]))
        # Each eviction's replacement: the first pod of the workload created since.
        for at_s in sorted(evicted.get(workload, ())):
            replacement = next((i for i, item in enumerate(times) if item[0] >= at_s), None)
            if replacement is not None:
                times.pop(replacement)
        if len(times) < 2:
            continue
        before_s, last_s, newest = times[-2][0], times[-1][0], times[-1][2]
        gap_s, since_s = last_s - before_s, now_s - last_s
        if gap_s > 0 and 0 <= since_s <= min(gap_s, within_s):
            found.append(newest)
    return found


def wave_ahead(
    waves: Sequence[PodInfo],
    scheduler: RequestScheduler,
    classes: Mapping[str, NodeClass],
    nodes: Mapping[str, NodeInfo],
    peers: Mapping[str, Resources],
) -> str | None:
    """Why the plan stands down: the next pod of a wave in ``waves``, at its workload's
    median usage (``peers``; unmeasured, its requests), would take every node
    kube-scheduler may put it on above ``targetThresholds``; or None."""
    for pod in waves:
        usage = peers.get(workload_of(pod) or "", pod.requests)
        best, _ = scheduler.best_nodes(pod, None)
        if not best:
            continue
        heated = [name for name in best if _overshoots(classes.get(name), nodes[name], usage)]
        if len(heated) == len(best):
            shown = ", ".join(best[:5]) + (f" and {len(best) - 5} more" if len(best) > 5 else "")
            return (
                f"a wave ahead: the pods of {workload_of(pod)} are still arriving, and the "
                f"next one (using {usage.cpu_cores:.2f} cores, {usage.memory_bytes / 2**30:.1f} "
                f"GiB) would take every node kube-scheduler may put it on ({shown}) above "
                "targetThresholds: a move now only changes which nodes the wave heats"
            )
    return None


def _overshoots(node_class: NodeClass | None, node: NodeInfo, usage: Resources) -> bool:
    """Whether ``usage`` on the node takes it above its targetThresholds (a node without
    a reading, no data or excluded, is not shown to be: the plan does not stand down)."""
    if node_class is None or not node_class.usage_fraction:
        return False
    for resource in RESOURCES:
        allocatable = node.allocatable.get(resource)
        if resource not in node_class.usage_fraction or allocatable <= 0:
            continue
        after = node_class.usage_fraction[resource] + usage.get(resource) / allocatable
        if after > node_class.high_fraction[resource]:
            return True
    return False

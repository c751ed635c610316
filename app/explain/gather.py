"""Reading the cluster for ``loadaware explain``: gets and lists only, never a write.

Every call here is in ``app.kube.permissions.EXPLAIN``, which
``deploy/base/explain-rbac.yaml`` grants. A call the API server refuses, or cannot
answer, raises ``ClusterUnreadable`` with what was read and why it failed; a missing
policy or configuration ConfigMap is not an error: the components then run on their
built-in defaults, and so does the explanation (it says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from app.documents import parse_yaml, read_file
from app.kube import (
    DESCHEDULER_CONFIGMAP,
    POLICY_CONFIGMAP,
    WORKLOAD_USAGE_MAX_AGE_S,
    WORKLOAD_USAGE_NAME,
    ClusterReader,
    DeschedulerState,
    KubeClient,
    OwnConfig,
    Pod,
    PublishedUsage,
    StateStore,
    StateUnreadable,
    WorkloadUsageStore,
    WorkloadUsageUnreadable,
    budget_view,
    node_info,
    pod_from_mapping,
)
from app.objects import NodeInfo, PodDisruptionBudgetView, parse_quantity
from app.policy import Policy, default_policy, load_policy, policy_from_yaml
from app.rebalance import ConfigError, DeschedulerConfig, config_from_yaml

T = TypeVar("T")

# What a 403 adds: the roles that grant every read here.
RBAC_HINT = "bind the read-only roles of deploy/base/explain-rbac.yaml to whoever runs it"


def cluster_reader(client: KubeClient) -> ClusterReader:
    return ClusterReader(client, RBAC_HINT)


@dataclass(frozen=True, slots=True)
class Sourced(Generic[T]):
    """A configuration and where it came from, in words."""

    value: T
    source: str


async def read_policy(reader: ClusterReader, path: str | None, namespace: str) -> Sourced[Policy]:
    """The policy in force: ``--policy FILE``, else the loadaware-policy ConfigMap, else
    the built-in default (what every component runs on without ``--policy``).

    Raises PolicyError for a policy that does not validate."""
    if path:
        return Sourced(load_policy(path), f"file {path}")
    return await _in_configmap(
        reader, POLICY_CONFIGMAP, namespace, policy_from_yaml, default_policy, "default"
    )


async def read_config(
    reader: ClusterReader, path: str | None, namespace: str
) -> Sourced[DeschedulerConfig]:
    """The descheduler's configuration: ``--descheduler-config FILE``, else its ConfigMap, else the
    built-in defaults. Raises ConfigError for one that does not validate."""
    if path:
        return Sourced(config_from_yaml(*read_file(path, "configuration", ConfigError)), path)
    return await _in_configmap(
        reader, DESCHEDULER_CONFIGMAP, namespace, config_from_yaml, DeschedulerConfig, "defaults"
    )


async def _in_configmap(
    reader: ClusterReader,
    config: OwnConfig,
    namespace: str,
    parse: Callable[[str, str], T],
    default: Callable[[], T],
    defaults: str,
) -> Sourced[T]:
    """What loadaware's ConfigMap ``config`` holds, parsed; the built-in ``default``
    without it, said so ("the built-in ``defaults``")."""
    found = await reader.config_text(config, namespace)
    if found is None:
        where = f"ConfigMap {namespace}/{config.name}"
        return Sourced(default(), f"the built-in {defaults} ({where} not found)")
    text, source = found
    return Sourced(parse(text, source), source)


async def read_nodes(reader: ClusterReader) -> dict[str, NodeInfo]:
    return {info.name: info for node in await reader.list_all("nodes") if (info := node_info(node))}


async def read_budgets(reader: ClusterReader) -> tuple[PodDisruptionBudgetView, ...]:
    return tuple(budget_view(pdb) for pdb in await reader.list_all("poddisruptionbudgets.policy"))


async def last_failed_scheduling(
    reader: ClusterReader, namespace: str, name: str, uid: str
) -> str | None:
    """kube-scheduler's newest FailedScheduling message for this very pod (its UID)."""
    newest: tuple[float, str] | None = None
    for event in await reader.events_of(namespace, name):
        if event.reason != "FailedScheduling" or (uid and event.involvedObject.uid != uid):
            continue
        at_s = _event_time_s(event)
        if newest is None or at_s >= newest[0]:
            newest = (at_s, event.message or "")
    return None if newest is None else newest[1]


def _event_time_s(event: Any) -> float:
    """When an Event last happened: kube-scheduler writes events.k8s.io Events, which
    the core API shows with eventTime and, once repeated, series.lastObservedTime."""
    series = event.series
    moments = (
        series.lastObservedTime if series else None,
        event.lastTimestamp,
        event.eventTime,
        event.firstTimestamp,
        event.metadata.creationTimestamp if event.metadata else None,
    )
    return max((m.timestamp() for m in moments if isinstance(m, datetime)), default=0.0)


def _bad_quantity(document: dict[str, Any]) -> str | None:
    """The first request, limit or overhead of a manifest that is no Kubernetes quantity
    (``cpu: lots``), with where it is; the API server would refuse the pod, and the
    estimate would read it as nothing."""
    spec = document.get("spec")
    if not isinstance(spec, dict):
        return None
    amounts: list[tuple[str, Any]] = []
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        amounts += [(f"spec.overhead.{name}", value) for name, value in overhead.items()]
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, dict) else None
            for kind in ("requests", "limits"):
                given = resources.get(kind) if isinstance(resources, dict) else None
                if isinstance(given, dict):
                    where = f"spec.{field}[{index}].resources.{kind}"
                    amounts += [(f"{where}.{name}", value) for name, value in given.items()]
    for where, value in amounts:
        try:
            parse_quantity(value)
        except ValueError as error:
            return f"{where}: {error}"
    return None


def pod_from_manifest(path: str) -> Pod:
    """A Pod from a manifest file (``-f``), for a pod not created yet.

    Raises ValueError naming the file and what is wrong with it."""
    text, source = read_file(path, "pod manifest", ValueError)
    document = parse_yaml(text, source, ValueError)
    if not isinstance(document, dict) or document.get("kind", "Pod") != "Pod":
        raise ValueError(f"{source}: expected one Pod manifest (kind: Pod)")
    problem = _bad_quantity(document)
    if problem is not None:
        raise ValueError(f"{source}: {problem}")
    pod = pod_from_mapping(document, source)
    metadata = pod.metadata
    if metadata is None or not (metadata.name or metadata.generateName):
        raise ValueError(f"{source}: the Pod needs metadata.name")
    if not metadata.name:
        metadata.name = f"{metadata.generateName}<generated>"
    metadata.namespace = metadata.namespace or "default"
    if pod.spec is None or not pod.spec.containers:
        raise ValueError(f"{source}: the Pod needs spec.containers")
    return pod


async def read_state(
    reader: ClusterReader, namespace: str, name: str, now_s: float, since_s: float
) -> tuple[DeschedulerState, str]:
    """The descheduler's state (recent evictions, debounce rounds) and a line about it.

    Unreadable contents are not an error here: the descheduler then evicts nothing,
    and the line says so."""
    store = StateStore(reader.client, namespace, name)
    try:
        state = await store.load(now_s, since_s)
    except StateUnreadable as error:
        return DeschedulerState(), (
            f"memory: {store.where} is unreadable ({error}): the descheduler evicts nothing "
            "until it is fixed or deleted"
        )
    except Exception as error:  # the API's refusals and the transport's errors
        raise reader.failure(f"read {store.where}", error) from None
    if not state.exists:
        return state, (
            f"memory: {store.where} not found: the descheduler's first run makes it and "
            "acts like any other"
        )
    recent = state.recent(since_s)
    return state, (
        f"memory: {store.where}, {len(recent)} recent evictions, hot rounds for "
        f"{len(state.hot_rounds)} nodes"
    )


async def read_workload_usage(
    reader: ClusterReader, namespace: str, now_s: float
) -> tuple[PublishedUsage | None, str]:
    """What the extender's estimate follows (the annotator's workload usage), if it is
    fresh, and a line about it; as the extender, anything else counts nothing."""
    store = WorkloadUsageStore(reader.client, namespace, WORKLOAD_USAGE_NAME)
    try:
        read = await store.read(now_s)
    except WorkloadUsageUnreadable as error:
        return None, f"workload usage: {store.where} is unreadable ({error}): not used"
    except Exception as error:  # the API's refusals and the transport's errors
        raise reader.failure(f"read {store.where}", error) from None
    if read is None:
        return None, f"workload usage: {store.where} not found: estimates from requests alone"
    usage, _skipped = read
    age_s = now_s - usage.published_at_s
    if age_s >= WORKLOAD_USAGE_MAX_AGE_S:
        return None, f"workload usage: {store.where} is stale ({age_s:.0f}s old): not used"
    return usage, f"workload usage: {store.where}, {len(usage.workloads)} workloads"

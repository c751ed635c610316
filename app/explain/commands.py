"""What ``loadaware explain pod`` and ``explain node`` do once their flags are parsed:
read the cluster (``gather``), explain (``pod``, ``node``), print (``render``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from app.commandline import EXIT_FAILED, EXIT_OK, usage_error
from app.explain.gather import (
    cluster_reader,
    last_failed_scheduling,
    pod_from_manifest,
    read_budgets,
    read_config,
    read_nodes,
    read_policy,
    read_state,
    read_workload_usage,
)
from app.explain.node import explain_node
from app.explain.pod import explain_pod
from app.explain.render import node_json, pod_json, render_node, render_pod
from app.kube import (
    ClusterReader,
    ClusterUnreadable,
    KubeConfigError,
    Pod,
    make_client,
    pod_info,
    pod_key,
    scheduled_pod,
)
from app.load import MIN_MEASURED_PODS
from app.objects import PodInfo, Resources, workload_of
from app.policy import PolicyError
from app.prom import (
    PodNodes,
    PodUsageQueries,
    PodUsageUnavailable,
    PrometheusSource,
    pod_nodes,
    prometheus_settings_from_args,
    read_pod_usage,
)
from app.rebalance import (
    ClusterView,
    ConfigError,
    DemandHistory,
    DeschedulerConfig,
    demand_of,
    previous_hot_rounds,
    state_window_s,
)


class NotFound(Exception):
    """The pod or node asked about does not exist."""


# --- explain pod -----------------------------------------------------------------------


def _pod_target(args: argparse.Namespace) -> tuple[str, str] | Pod:
    """(namespace, name) of a pod in the cluster, or a Pod read from ``-f``."""
    if bool(args.pod) == bool(args.filename):
        raise ValueError("name one pod: NAMESPACE/NAME, or -f FILE for a pod not created yet")
    if args.filename:
        return pod_from_manifest(args.filename)
    namespace, slash, name = str(args.pod).partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {args.pod!r}")
    return namespace, name


async def _explain_pod(
    reader: ClusterReader, args: argparse.Namespace, target: tuple[str, str] | Pod
) -> str:
    policy = await read_policy(reader, args.policy, args.install_namespace)
    notes: list[str] = []
    if isinstance(target, Pod):
        pod = target
        notes.append(f"pod read from {args.filename}, not from the cluster")
    else:
        found = await reader.pod(*target)
        if found is None:
            raise NotFound(f"pod {target[0]}/{target[1]} not found")
        pod = found
    nodes = await read_nodes(reader)
    pods = await reader.list_all("pods")
    now_s = time.time()
    info = pod_info(pod)
    failed = None
    if info.node_name is None and not isinstance(target, Pod):
        failed = await last_failed_scheduling(reader, info.namespace, info.name, info.uid)
    estimate = policy.value.spec.estimation
    notes.append(
        "estimate: pods bound since each node's last sample count until a sample covers "
        "them; the extender's in-memory reservations are not visible here"
        if estimate.enabled
        else "estimate: off in this policy (pods placed since a node's sample add nothing)"
    )
    observed = None
    if estimate.enabled and estimate.workload_usage:
        published, line = await read_workload_usage(reader, args.install_namespace, now_s)
        workload = workload_of(info)
        observed = published.observed(workload) if published is not None else None
        if published is not None and published.pods.get(workload or "", 0) < MIN_MEASURED_PODS:
            observed = None  # measured on too few pods to raise anything (app.load)
        notes.append(line)
        if observed is not None:
            notes.append(
                f"the pod's workload is published to use {observed.cpu_cores:.3g} cores and "
                f"{observed.memory_bytes / 2**20:.0f}Mi a pod: its estimate is raised where "
                "that is 3x or more (README, 'Burst-aware estimation')"
            )
    explanation = explain_pod(
        info,
        pod.to_dict(),
        nodes,
        ((pod_key(p), scheduled_pod(p)) for p in pods),
        policy.value,
        now_s,
        failed,
        observed,
    )
    if args.output == "json":
        return json.dumps(pod_json(explanation, policy.source, notes), indent=2) + "\n"
    return render_pod(explanation, policy.source, None if args.all else args.top, notes)


def run_pod(args: argparse.Namespace) -> int:
    prog = "loadaware explain pod"
    try:
        target = _pod_target(args)
        reader = cluster_reader(make_client(args.kubeconfig))
    except (ValueError, KubeConfigError) as error:
        return usage_error(prog, str(error))
    return _run(prog, reader, lambda: _explain_pod(reader, args, target))


# --- explain node ----------------------------------------------------------------------


async def _pod_usage(
    args: argparse.Namespace, config: DeschedulerConfig, placed: PodNodes, running: bool
) -> tuple[dict[str, Any], str]:
    """Per-pod usage, each pod's from the node it runs on (``placed``), as the
    descheduler reads it, and the line that says where it came from."""
    estimate = "each pod's usage is the extender's estimate from its requests and limits"
    if not args.prometheus_url:
        return {}, (
            f"pod usage: no --prometheus-url, so {estimate}; the descheduler itself reads "
            "Prometheus and evicts nothing while it cannot"
        )
    source = PrometheusSource(prometheus_settings_from_args(args))
    queries = PodUsageQueries(config.pod_usage_queries.cpu, config.pod_usage_queries.memory)
    try:
        usage = await read_pod_usage(source, queries, placed)
    except PodUsageUnavailable as error:
        return {}, (
            f"pod usage: {error}; the descheduler would evict nothing now. Below, {estimate}"
        )
    finally:
        source.close()
    if not usage.usage and running:
        return {}, (
            "pod usage: Prometheus answered with no per-pod usage for any pod, so the "
            f"descheduler would evict nothing now (is cAdvisor scraped?). Below, {estimate}"
        )
    return dict(usage.usage), (
        f"pod usage: Prometheus, for {len(usage.usage)} pods (the others: the estimate)"
    )


async def _explain_node(reader: ClusterReader, args: argparse.Namespace) -> str:
    policy = await read_policy(reader, args.policy, args.install_namespace)
    config = await read_config(reader, args.descheduler_config, args.install_namespace)
    mismatch = config.value.metrics_missing_from({s.name for s in policy.value.spec.sync_policy})
    if mismatch:
        raise ConfigError(f"the configuration and the policy disagree: {'; '.join(mismatch)}")
    nodes = await read_nodes(reader)
    if args.node not in nodes:
        raise NotFound(f"node {args.node} not found")
    pods = {pod_key(p): pod_info(p) for p in await reader.list_all("pods")}
    budgets = await read_budgets(reader)
    now_s = time.time()
    since_s = now_s - state_window_s(config.value)
    state, state_line = await read_state(
        reader, args.install_namespace, args.state_name, now_s, since_s
    )
    running = any(p.phase == "Running" for p in pods.values())
    placed = pod_nodes(pods.values(), nodes)
    usage, usage_line = await _pod_usage(args, config.value, placed, running)
    published = None
    estimation = policy.value.spec.estimation
    if estimation.enabled and estimation.workload_usage:
        published, workload_line = await read_workload_usage(
            reader, args.install_namespace, now_s
        )
    view = ClusterView(
        nodes,
        pods,
        usage,
        budgets,
        state.recent(since_s),
        published.workloads if published is not None else {},
        published.pods if published is not None else {},
        tuple(state.moves.values()),
    )
    hot_rounds = previous_hot_rounds(state.hot_rounds, now_s, config.value.interval)
    explanation = explain_node(args.node, view, config.value, policy.value, now_s, hot_rounds,
                               remembered_rise(state.demand, pods.values(), config.value,
                                               now_s))  # fmt: skip
    sources = [
        f"configuration: {config.source}",
        f"policy: {policy.source}",
        state_line,
        usage_line,
    ]
    if published is not None:
        sources.append(workload_line)
    if args.output == "json":
        return json.dumps(node_json(explanation, sources), indent=2) + "\n"
    return render_node(explanation, sources)


def remembered_rise(
    demand: Sequence[tuple[float, Resources]],
    pods: Iterable[PodInfo],
    config: DeschedulerConfig,
    now_s: float,
) -> Resources:
    """The rise in demand the descheduler's state holds, with the demand now: what
    consolidation keeps room for at its next run (``app/rebalance/rise.py``)."""
    settings = config.consolidation
    history = DemandHistory(settings.rise_lookback, settings.rise_within)
    history.merge(demand)
    history.record(now_s, demand_of(pods))
    return history.rise()


def run_node(args: argparse.Namespace) -> int:
    prog = "loadaware explain node"
    try:
        if args.prometheus_url:
            prometheus_settings_from_args(args)  # flag errors before any API call
        reader = cluster_reader(make_client(args.kubeconfig))
    except (ValueError, KubeConfigError) as error:
        return usage_error(prog, str(error))
    return _run(prog, reader, lambda: _explain_node(reader, args))


# --- both --------------------------------------------------------------------------------


def _run(prog: str, reader: ClusterReader, explain: Callable[[], Awaitable[str]]) -> int:
    async def explained() -> str:
        try:
            return await explain()
        finally:
            await reader.close()

    try:
        text = asyncio.run(explained())
    except (PolicyError, ConfigError) as error:
        return usage_error(prog, str(error))
    except (ClusterUnreadable, NotFound) as error:
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    sys.stdout.write(text)
    return EXIT_OK

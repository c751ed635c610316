"""``loadaware report``: what the descheduler's evictions bought over a period, per node
and per workload, from its memory ConfigMap and, with ``--prometheus-url``, from
Prometheus; read-only (``get`` on that ConfigMap, as ``explain node`` reads it, and
``list`` on nodes and pods, as ``explain`` does). Its flags here; the cluster is read,
after the flags are parsed, through ``app.explain.gather``, and Prometheus through
``app.explain.report_history``.

Each move (what one run evicted from one source) is judged ``settleTime`` later by the
descheduler (``app/rebalance/aftermath.py``); the report counts evicted pods by
outcome (``helped``, ``no effect``, ``backfired``, and ``pending`` for moves not judged
yet), with the mean cooling the judged ones bought on their source. The memory keeps
the last day of moves (at most 300), so ``--since`` reaches back a day at most. From
Prometheus: the node-minutes above the policy's limits within ``--window`` before and
after the moves, and churn (container restarts over the period, from
kube-state-metrics).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from app.commandline import (
    EXIT_FAILED,
    EXIT_OK,
    INTERRUPTED_TEXT,
    add_flag,
    duration,
    kubernetes_name,
    kubernetes_namespace,
    positive_number,
    usage_error,
)
from app.explain.report_measures import History, minutes_above, restarts_by
from app.kube import POLICY_CONFIGMAP
from app.kube import STATE_NAME as DEFAULT_STATE_NAME
from app.objects import MoveRecord, PodInfo, printable
from app.prom import add_prometheus_flags, label_matchers, prometheus_settings_from_args

HELP = "what the descheduler's evictions bought: by outcome, per node and workload (read-only)"
DESCRIPTION = """\
What the descheduler's evictions bought over a period, from its memory ConfigMap:
evicted pods per source node and per workload, by outcome (helped, no effect,
backfired, pending: not judged yet), and the mean cooling of the source per judged
eviction (usage fraction; below 0: hotter). With --prometheus-url, also from
Prometheus: the node-minutes above the policy's limits within --window before and
after the evictions (each minute counted once per row), and churn: container restarts
over the period (kube-state-metrics' kube_pod_container_status_restarts_total), per
node and workload of the pods as they are now. Read-only: it gets loadaware's
ConfigMaps and lists nodes and pods, as `loadaware explain` does
(deploy/base/explain-rbac.yaml is enough). The memory keeps the last day of moves, so
--since reaches back a day at most.
"""
EPILOG = f"""\
examples:
  loadaware report
  loadaware report --since 6h -o json | jq '.nodes'
  loadaware report --prometheus-url http://prometheus.monitoring:9090

exit codes: 0 reported, 1 the memory could not be read, 2 bad usage or configuration,
{INTERRUPTED_TEXT}
"""
OUTCOMES = ("helped", "no effect", "backfired", "pending")


def add_parser(components: Any) -> None:
    report = components.add_parser(
        "report",
        help=HELP,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flag(
        report,
        "--since",
        command="report",
        type=duration,
        default=86400.0,
        default_text="24h",
        metavar="DURATION",
        help="how far back: moves made since then (the memory keeps a day)",
    )
    add_flag(
        report,
        "--output",
        short="-o",
        command="report",
        choices=("text", "json"),
        default="text",
        metavar="FORMAT",
        help="text (for a person) or json (for tools)",
    )
    add_flag(
        report,
        "--kubeconfig",
        metavar="FILE",
        default_text="in-cluster config, then $KUBECONFIG, then ~/.kube/config",
        help="kubeconfig file",
    )
    add_flag(
        report,
        "--install-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        default="loadaware",
        help="where loadaware runs: the descheduler's memory ConfigMap",
    )
    add_flag(
        report,
        "--state-name",
        metavar="NAME",
        type=kubernetes_name,
        default=DEFAULT_STATE_NAME,
        help="the descheduler's memory ConfigMap (its --state-name), in --install-namespace",
    )
    add_flag(
        report,
        "--window",
        command="report",
        type=duration,
        default=1800.0,
        metavar="DURATION",
        help="node-minutes above the limits are counted this long before and after each "
        "eviction",
    )
    add_flag(
        report,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML whose limits count, instead of the policy in force",
        default_text=f"the {POLICY_CONFIGMAP.name} ConfigMap, else the built-in crane defaults",
    )
    prom = add_prometheus_flags(
        report, url_unset="none: evictions by outcome only, from the memory"
    )
    add_flag(
        prom,
        "--query-selector",
        command="report",
        type=label_matchers,
        metavar="MATCHERS",
        help="label matchers added to each policy metric's query, as the annotator's "
        "--query-selector",
    )
    add_flag(
        prom,
        "--value-divisor",
        command="report",
        metavar="NUMBER",
        type=positive_number,
        default=100.0,
        help="what the policy metrics' values are divided by to get a 0..1 fraction, as "
        "the annotator's --value-divisor",
    )
    report.set_defaults(run=run)


def _tally(moves: Iterable[MoveRecord]) -> dict[str, Any]:
    counts = dict.fromkeys(OUTCOMES, 0)
    cooling, judged = 0.0, 0
    for move in moves:
        counts[move.outcome or "pending"] += move.pods
        if move.outcome is not None:
            cooling += move.attributed
            judged += move.pods
    return {
        "evictions": counts,
        "meanCooling": round(cooling / judged, 4) if judged else None,
    }


def summarize(
    moves: Iterable[MoveRecord],
    since_s: float,
    history: History | None = None,
    pods: Mapping[str, PodInfo] | None = None,
    window_s: float = 1800.0,
    now_s: float | None = None,
) -> dict[str, Any]:
    """Evicted pods by outcome, in all, per source node and per workload; with
    ``history`` (what Prometheus said), node-minutes above the limits before and after
    and restarts for each (None where not known); pure."""
    kept = [m for m in moves if m.round_s >= since_s]
    by_node: dict[str, list[MoveRecord]] = {}
    by_workload: dict[str, list[MoveRecord]] = {}
    for move in kept:
        by_node.setdefault(move.source, []).append(move)
        for workload in move.workloads:
            by_workload.setdefault(workload, []).append(move)
    summary: dict[str, Any] = {
        "since": since_s,
        "total": _tally(kept),
        "nodes": {name: _tally(m) for name, m in sorted(by_node.items())},
        "workloads": {name: _tally(m) for name, m in sorted(by_workload.items())},
    }
    _add_history(summary, kept, by_node, by_workload, history, pods or {}, window_s, now_s)
    return summary


def _add_history(
    summary: dict[str, Any],
    kept: list[MoveRecord],
    by_node: Mapping[str, list[MoveRecord]],
    by_workload: Mapping[str, list[MoveRecord]],
    history: History | None,
    pods: Mapping[str, PodInfo],
    window_s: float,
    now_s: float | None,
) -> None:
    hot = history.hot if history is not None else None
    restarts = history.restarts if history is not None else None
    total, per_node, per_workload = (
        restarts_by(restarts, pods) if restarts is not None else (None, {}, {})
    )
    end_s = now_s if now_s is not None else max((m.round_s for m in kept), default=0.0)

    def fill(tally: dict[str, Any], moves: list[MoveRecord], churn: int | None) -> None:
        tally["minutesAboveLimits"] = (
            minutes_above(moves, hot, window_s, end_s) if hot is not None else None
        )
        tally["restarts"] = churn

    fill(summary["total"], kept, total)
    for name, moves in by_node.items():
        fill(summary["nodes"][name], moves, per_node.get(name, 0) if total is not None else None)
    for name, moves in by_workload.items():
        churn = per_workload.get(name, 0) if total is not None else None
        fill(summary["workloads"][name], moves, churn)
    summary["window"] = window_s
    summary["notes"] = list(history.notes) if history is not None else []


def render_text(summary: dict[str, Any], header: str) -> str:
    def minutes(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    def row(name: str, tally: dict[str, Any]) -> str:
        counts = tally["evictions"]
        mean = tally["meanCooling"]
        cells = [f"{counts[o]:>9}" for o in OUTCOMES]
        above = tally.get("minutesAboveLimits") or {}
        restarts = tally.get("restarts")
        shown = printable(name)  # a tenant's names: never its control characters
        return (
            f"{shown:<40} {' '.join(cells)} {('-' if mean is None else f'{mean:+.3f}'):>9}"
            f" {minutes(above.get('before')):>8} {minutes(above.get('after')):>8}"
            f" {('-' if restarts is None else str(restarts)):>8}"
        )

    title = (
        f"{'':<40} {' '.join(f'{o:>9}' for o in OUTCOMES)} {'cooling':>9}"
        f" {'hot-bef':>8} {'hot-aft':>8} {'restarts':>8}"
    )
    lines = [header, "", title, row("all", summary["total"])]
    for heading, key in (("per source node", "nodes"), ("per workload", "workloads")):
        lines += ["", heading + ":"]
        lines += [row(name, tally) for name, tally in summary[key].items()] or ["  none"]
    window = summary.get("window")
    lines += [
        "",
        f"hot-bef, hot-aft: node-minutes above the policy's limits within "
        f"{(window or 0) / 60:g}m before and after the evictions; restarts: container "
        "restarts over the period (- : not known)",
    ]
    lines += [f"note: {printable(note)}" for note in summary.get("notes", [])]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    prog = "loadaware report"
    import asyncio

    from app.explain.gather import cluster_reader, read_nodes, read_policy, read_state
    from app.kube import ClusterUnreadable, KubeConfigError, make_client, pod_info, pod_key
    from app.objects import NodeInfo
    from app.policy import Policy, PolicyError

    settings = None
    if args.prometheus_url:
        try:
            settings = prometheus_settings_from_args(args)  # flag errors before any API call
        except ValueError as error:
            return usage_error(prog, str(error))
    try:
        reader = cluster_reader(make_client(args.kubeconfig))
    except (ValueError, KubeConfigError) as error:
        return usage_error(prog, str(error))
    now_s = time.time()
    since_s = now_s - args.since
    Read = tuple[list[MoveRecord], str, Policy | None, dict[str, NodeInfo], dict[str, PodInfo]]

    async def read() -> Read:
        try:
            state, line = await read_state(
                reader, args.install_namespace, args.state_name, now_s, since_s
            )
            if settings is None:
                return list(state.moves.values()), line, None, {}, {}
            policy = await read_policy(reader, args.policy, args.install_namespace)
            nodes = await read_nodes(reader)
            pods = {pod_key(p): pod_info(p) for p in await reader.list_all("pods")}
        finally:
            await reader.close()
        return list(state.moves.values()), line, policy.value, nodes, pods

    try:
        moves, line, policy, nodes, pods = asyncio.run(read())
    except ClusterUnreadable as error:
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except (PolicyError, ValueError) as error:
        return usage_error(prog, str(error))
    history = None
    if settings is not None and policy is not None:
        from app.explain.report_history import read_history
        from app.prom import PrometheusSource

        source = PrometheusSource(settings)
        try:
            history = read_history(
                source,
                policy,
                nodes,
                since_s,
                now_s,
                args.window,
                args.query_selector or "",
                args.value_divisor,
            )
        finally:
            source.close()
        if args.output == "json":  # the text says them itself
            for note in history.notes:
                print(f"{prog}: {note}", file=sys.stderr, flush=True)
    summary = summarize(moves, since_s, history, pods, args.window, now_s)
    if args.output == "json":
        sys.stdout.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(summary, f"since {args.since / 3600:g}h; {line}"))
    return EXIT_OK

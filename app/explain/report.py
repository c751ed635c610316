"""``loadaware report``: what the descheduler's evictions bought over a period, per node
and per workload, from its memory ConfigMap; read-only (``get`` on that ConfigMap, as
``explain node`` reads it). Its flags here; the cluster is read, after the flags are
parsed, through ``app.explain.gather``.

Each move (what one run evicted from one source) is judged ``settleTime`` later by the
descheduler (``app/rebalance/aftermath.py``); the report counts evicted pods by
outcome (``helped``, ``no effect``, ``backfired``, and ``pending`` for moves not judged
yet), with the mean cooling the judged ones bought on their source. The memory keeps
the last day of moves (at most 300), so ``--since`` reaches back a day at most.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from typing import Any

from app.commandline import EXIT_FAILED, EXIT_OK, add_flag, duration, usage_error
from app.kube import STATE_NAME as DEFAULT_STATE_NAME
from app.objects import MoveRecord

HELP = "what the descheduler's evictions bought: by outcome, per node and workload (read-only)"
DESCRIPTION = """\
What the descheduler's evictions bought over a period, from its memory ConfigMap:
evicted pods per source node and per workload, by outcome (helped, no effect,
backfired, pending: not judged yet), and the mean cooling of the source per judged
eviction (usage fraction; below 0: hotter). Read-only: it gets one ConfigMap, as
`loadaware explain node` does (deploy/base/explain-rbac.yaml is enough). The memory
keeps the last day of moves, so --since reaches back a day at most.
"""
EPILOG = """\
examples:
  loadaware report
  loadaware report --since 6h -o json | jq '.nodes'

exit codes: 0 reported, 1 the memory could not be read, 2 bad usage
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
        default="loadaware",
        help="where loadaware runs: the descheduler's memory ConfigMap",
    )
    add_flag(
        report,
        "--state-name",
        metavar="NAME",
        default=DEFAULT_STATE_NAME,
        help="the descheduler's memory ConfigMap (its --state-name), in --install-namespace",
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


def summarize(moves: Iterable[MoveRecord], since_s: float) -> dict[str, Any]:
    """Evicted pods by outcome, in all, per source node and per workload; pure."""
    kept = [m for m in moves if m.round_s >= since_s]
    by_node: dict[str, list[MoveRecord]] = {}
    by_workload: dict[str, list[MoveRecord]] = {}
    for move in kept:
        by_node.setdefault(move.source, []).append(move)
        for workload in move.workloads:
            by_workload.setdefault(workload, []).append(move)
    return {
        "since": since_s,
        "total": _tally(kept),
        "nodes": {name: _tally(m) for name, m in sorted(by_node.items())},
        "workloads": {name: _tally(m) for name, m in sorted(by_workload.items())},
    }


def render_text(summary: dict[str, Any], header: str) -> str:
    def row(name: str, tally: dict[str, Any]) -> str:
        counts = tally["evictions"]
        mean = tally["meanCooling"]
        cells = [f"{counts[o]:>9}" for o in OUTCOMES]
        return f"{name:<40} {' '.join(cells)} {('-' if mean is None else f'{mean:+.3f}'):>9}"

    title = f"{'':<40} {' '.join(f'{o:>9}' for o in OUTCOMES)} {'cooling':>9}"
    lines = [header, "", title, row("all", summary["total"])]
    for heading, key in (("per source node", "nodes"), ("per workload", "workloads")):
        lines += ["", heading + ":"]
        lines += [row(name, tally) for name, tally in summary[key].items()] or ["  none"]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    prog = "loadaware report"
    import asyncio

    from app.explain.gather import cluster_reader, read_state
    from app.kube import ClusterUnreadable, KubeConfigError, make_client

    try:
        reader = cluster_reader(make_client(args.kubeconfig))
    except (ValueError, KubeConfigError) as error:
        return usage_error(prog, str(error))
    now_s = time.time()
    since_s = now_s - args.since

    async def read() -> tuple[list[MoveRecord], str]:
        try:
            memory, line = await read_state(
                reader, args.install_namespace, args.state_name, now_s, since_s
            )
        finally:
            await reader.close()
        return list(memory.moves.values()), line

    try:
        moves, line = asyncio.run(read())
    except ClusterUnreadable as error:
        print(f"{prog}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    summary = summarize(moves, since_s)
    if args.output == "json":
        sys.stdout.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(summary, f"since {args.since / 3600:g}h; {line}"))
    return EXIT_OK

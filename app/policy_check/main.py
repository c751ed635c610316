"""``loadaware policy check FILE``: validate a policy file and show what it means."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from app.commandline import INTERRUPTED_TEXT
from app.objects import format_duration
from app.policy_check.classes import describe_classes

if TYPE_CHECKING:
    from app.policy import Policy

# The policy's schema (pydantic) and the load model (numpy) are imported where the file
# is read and described: `policy --help` and a bad flag pay for neither.


def describe(policy: Policy) -> str:
    """The effective policy as an operator wants to read it."""
    from app.load import assumed_usage_fraction
    from app.policy import HOT_VALUE_VALID_S

    spec = policy.spec
    limits = {p.name: p.max_limit_fraction for p in spec.predicate}
    weights = {p.name: p.weight for p in spec.priority}
    total_weight = sum(weights.values())
    lines = [f"policy: {policy.source}", ""]
    header = ("metric", "sync period", "fresh for", "reject above", "weight", "if no data")
    rows: list[tuple[str, ...]] = [header]
    for metric in policy.metrics:
        period = next((s.period_s for s in spec.sync_policy if s.name == metric), None)
        window = policy.freshness_window_s(metric)
        limit = limits.get(metric)
        weight = weights.get(metric)
        rows.append(
            (
                metric,
                format_duration(period) if period is not None else "-",
                format_duration(window) if window is not None else "never",
                "off" if not limit else f"{limit:g}",
                "-" if weight is None else f"{weight:g} ({weight / total_weight:.0%})",
                "-" if weight is None else f"scored as {assumed_usage_fraction(policy, metric):g}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append("")
    if spec.hot_value:
        terms = " + ".join(
            f"floor(bindings in {format_duration(h.time_range_s)} / {h.count})"
            for h in spec.hot_value
        )
        lines.append(
            f"hot value = {terms}; valid {format_duration(HOT_VALUE_VALID_S)}; "
            "each unit lowers the score by 10 of 100"
        )
    lines.append(describe_estimation(policy))
    lines.append("missing, stale or unreadable data never rejects a node")
    lines += describe_classes(policy)
    for warning in policy.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def describe_estimation(policy: Policy) -> str:
    settings = policy.spec.estimation
    if not settings.enabled:
        return "estimation: off (pods placed since a node's last sample are not counted)"
    default = settings.default_pod_usage
    return (
        f"estimation: on; pods a node's samples do not cover add max(request, limit) x "
        f"{settings.factors.cpu:g} (cpu) / x {settings.factors.memory:g} (memory), "
        f"{default.cpu_cores * 1000:g}m CPU and {default.memory_bytes / 2**20:g}Mi for pods "
        f"that declare neither; each counts until a sample taken "
        f"{format_duration(settings.covered_after_s)} after its binding, or for at most "
        f"{format_duration(settings.max_age_s)}; "
        + (
            "a pod placed through the scheduler counts at least what its workload's pods "
            "are seen to use, where that is 3x or more its estimate (workloadUsage)"
            if settings.workload_usage
            else "workloadUsage off: from requests and limits alone"
        )
    )


def run(args: argparse.Namespace) -> int:
    from app.policy import PolicyError, load_policy

    try:
        policy = load_policy(args.file)
    except PolicyError as error:
        # Exit code 2, as for every bad configuration (app/commandline/flags.py, one floor up).
        print(f"loadaware policy check: error: {error}", file=sys.stderr, flush=True)
        return 2
    print(describe(policy))
    return 0


def add_parser(components: Any) -> None:
    policy_parser = components.add_parser("policy", help="work with policy files")
    verbs = policy_parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    check = verbs.add_parser("check", help="validate a policy file and print the effective policy")
    check.add_argument("file", help="path to a DynamicSchedulerPolicy YAML file")
    check.epilog = (
        "exit codes: 0 the file is valid, 2 it is not (the message says why), "
        + INTERRUPTED_TEXT
    )
    check.set_defaults(run=run)

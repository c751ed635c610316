"""``loadaware policy check FILE``: validate a policy file and show what it means."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from app.commandline import EXIT_FAILED, EXIT_OK, EXIT_USAGE, INTERRUPTED_TEXT, usage_error
from app.objects import format_duration
from app.policy_check.classes import describe_classes
from app.prom import add_prometheus_flags

if TYPE_CHECKING:
    from app.policy import Policy
    from app.prom import PrometheusSettings

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
    lines.extend(describe_percentiles(policy))
    lines.append(describe_estimation(policy))
    if policy.packing_target is not None:
        lines.append(
            f"packing: on; each priority metric scores highest at {policy.packing_target:.0%} "
            "usage, less on idler nodes and less the further above (spec.packing)"
        )
    lines.extend(describe_node_pools(policy))
    lines.append("missing, stale or unreadable data never rejects a node")
    lines += describe_classes(policy)
    for warning in policy.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def describe_percentiles(policy: Policy) -> list[str]:
    """A line for each percentile metric: what it is (crane's names say it plainly)."""
    from app.policy import usage_metric

    lines = []
    for metric in policy.metrics:
        meaning = usage_metric(metric)
        if meaning is not None and meaning.quantile is not None:
            lines.append(f"{metric}: the {meaning.text()}")
    return lines


def describe_node_pools(policy: Policy) -> list[str]:
    """One line per node pool: its selector and its limits where they differ from the
    policy's own (app/policy/pools.py)."""
    pools = policy.spec.node_pools
    if not pools:
        return []
    lines = [
        f"node pools: {len(pools)}; a node in no pool gets the limits above; a node that "
        f"two pools select is an error: it gets the limits above and is logged"
    ]
    own = dict(policy.limits)
    for pool in pools:
        limits = policy.node_pools.of(pool.name).limits
        changed = [
            f"{metric} {'off' if not dict(limits).get(metric) else f'{limit:g}'}"
            for metric, limit in (*limits, *((m, 0.0) for m in own if m not in dict(limits)))
            if own.get(metric) != dict(limits).get(metric)
        ]
        lines.append(
            f"  pool {pool.name}: nodes with {describe_selector(pool.node_selector)}; "
            f"reject above: {', '.join(changed) or 'as above'}"
        )
    return lines


def describe_selector(selector: Any) -> str:
    """A label selector as kubectl's ``-l`` would read it."""
    terms = [f"{key}={value}" for key, value in selector.match_labels.items()]
    for e in selector.match_expressions:
        values = ",".join(e.values)
        terms.append(
            {
                "In": f"{e.key} in ({values})",
                "NotIn": f"{e.key} notin ({values})",
                "Exists": e.key,
                "DoesNotExist": f"!{e.key}",
            }.get(e.operator, f"{e.key} {e.operator}")
        )
    return ",".join(terms)


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
    if args.prometheus_url:
        from app.prom import prometheus_settings_from_args

        try:
            settings = prometheus_settings_from_args(args)
        except ValueError as error:
            return usage_error("loadaware policy check", str(error))
    print(describe(policy))
    if not args.prometheus_url:
        print(OFFLINE_TEXT)
        return 0
    return _check_prometheus(policy, settings)


# What the check says, and what happens, when it cannot ask Prometheus (docs/reference.md).
OFFLINE_TEXT = (
    "prometheus: not asked (no --prometheus-url): a synced metric Prometheus has no series "
    "for makes each of the annotator's syncs of it fail, in its log, /status and "
    'loadaware_annotator_query_errors_total{reason="no_series"}'
)


def _check_prometheus(policy: Policy, settings: PrometheusSettings) -> int:
    """Whether Prometheus has every synced metric: 0 yes, 2 no (a configuration to
    fix), 1 it could not be asked."""
    import asyncio

    from app.policy_check.prometheus import (
        found_message,
        look_up_metrics,
        missing_message,
        unqueryable_message,
    )
    from app.prom import PrometheusQueryError, PrometheusSource, redact_url

    source = PrometheusSource(settings)
    try:
        lookup = asyncio.run(look_up_metrics(source, policy))
    except PrometheusQueryError as error:
        print(
            f"loadaware policy check: error: the metrics could not be looked up: {error}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILED
    finally:
        source.close()
    url = redact_url(settings.url)
    if lookup.unqueryable:
        print(f"prometheus: {unqueryable_message(lookup.unqueryable)}")
    if lookup.missing:
        print(f"loadaware policy check: error: {missing_message(url, lookup.missing)}",
              file=sys.stderr, flush=True)  # fmt: skip
        return EXIT_USAGE
    print(found_message(url, lookup))
    return EXIT_OK


def add_parser(components: Any) -> None:
    policy_parser = components.add_parser("policy", help="work with policy files")
    verbs = policy_parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    check = verbs.add_parser("check", help="validate a policy file and print the effective policy")
    check.add_argument("file", help="path to a DynamicSchedulerPolicy YAML file")
    add_prometheus_flags(
        check,
        url_unset="none: the file alone is checked, and the metrics are not looked up",
    )
    check.epilog = (
        "exit codes: 0 the file is valid (and, with --prometheus-url, Prometheus has a "
        "series of every syncPolicy metric: one count query each), 1 Prometheus could not "
        "be asked, 2 the file is not valid or Prometheus has no series of a synced metric "
        "(the message says why), " + INTERRUPTED_TEXT
    )
    check.set_defaults(run=run)

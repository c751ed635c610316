"""``loadaware descheduler``: flags, configuration and process lifecycle."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.commandline import (
    EXIT_FAILED,
    EXIT_OK,
    add_component,
    add_deprecated_alias,
    add_flag,
    add_own_flag,
    duration,
    kubernetes_name,
    kubernetes_namespace,
)
from app.descheduler.settings import LoopSettings, warn_about_thresholds
from app.kube import DESCHEDULER_LEASE_NAME
from app.kube import STATE_NAME as DEFAULT_STATE_NAME
from app.prom import add_prometheus_flags, prometheus_settings_from_args
from app.runtime import (
    add_health_flags,
    add_leader_election_flags,
    configured,
    default_identity,
    default_lease_namespace,
    health_listener,
    kube_client,
    lease_settings_from_args,
    run_component,
    until_signalled,
)

if TYPE_CHECKING:
    from app.descheduler.descheduler import RunReport
    from app.policy import Policy
    from app.prom import PrometheusSettings
    from app.rebalance import DeschedulerConfig
    from app.runtime import InForce

# The planner, the load model, the Kubernetes and Prometheus clients are imported in the
# functions that use them, after the flags are parsed: `--help` and a bad flag cost a
# few hundredths of a second, not the second those imports take.

log = logging.getLogger(__name__)

DEFAULT_HEALTH_PORT = 8082
DEFAULT_LEASE_NAME = DESCHEDULER_LEASE_NAME

HELP = "evict pods from nodes hot on real usage, onto cool nodes"
DESCRIPTION = """\
Evict pods from nodes that are hot on REAL usage, so that they are rescheduled onto
cool nodes, without ever sending a pod to another hot spot.

Every interval (config `interval`, default 5m), while this replica leads:
  - node usage comes from the node annotations the annotator writes (the same
    load model as the extender); a node with stale or missing data is neither a
    source nor a destination;
  - per-pod usage comes from Prometheus, ONE query per resource for the whole
    cluster (cAdvisor by default); Prometheus down => nothing is evicted;
  - recent evictions and debounce rounds are kept in one ConfigMap only the
    descheduler may write (--state-name), so a second run on unchanged metrics
    evicts nothing, also after a restart or with --once; a first run without
    it makes it and acts like any other;
  - a node must be hot in `consecutiveHotRounds` runs in a row (set `interval`
    to the CronJob's schedule with --once);
  - evictions use the policy/v1 Eviction API only (PDBs are honoured: a 429 skips
    the pod), are re-checked against live caches just before each call, spaced by
    `evictionsPerSecond`, and recorded as Events (reason LoadAwareDescheduled);
  - with `consolidation.enabled` (off by default), a run that cools no hot spot
    drains a node idle by requests and real usage for the node autoscaler to
    remove: taint loadaware.io/draining:NoSchedule first, then its pods.

--once runs a single pass and exits (CronJob style). Exit codes: 0 when the run
completed (a first run included: it acts like any other), 1 when it could not run
(Prometheus down or rejecting a query, API errors, no lease), 2 for bad usage or
configuration (flags, files, kubeconfig), 130 interrupted (Ctrl-C) before a one-shot
command finished. With --dry-run the plan is printed as a table and
nothing is evicted or written.

Durations take Go syntax (15s, 2m) or plain seconds. Every flag can also be set
through the environment variable shown in its help (LOADAWARE_PROMETHEUS_URL).
"""

EPILOG = """\
examples:
  loadaware descheduler --once --dry-run --no-leader-elect \\
      --descheduler-config descheduler.yaml --prometheus-url http://prometheus.monitoring:9090
  loadaware descheduler --descheduler-config /etc/loadaware/descheduler.yaml \\
      --policy /etc/loadaware/policy.yaml --prometheus-url http://prometheus.monitoring:9090
"""


@dataclass(frozen=True, slots=True)
class Settings:
    # The configuration and the policy in force: the descheduler follows both once built.
    config: InForce[DeschedulerConfig]
    policy: InForce[Policy]
    prometheus: PrometheusSettings
    loop: LoopSettings
    once: bool


def load_config(path: Path) -> DeschedulerConfig:
    """Read and validate the configuration file (the planner itself does no I/O)."""
    from app.documents import read_file
    from app.rebalance import ConfigError, config_from_yaml

    return config_from_yaml(*read_file(path, "configuration", ConfigError))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed flags into configuration; raise ValueError, ConfigError or PolicyError."""
    from app.rebalance import ConfigError, DeschedulerConfig
    from app.runtime import InForce, policy_in_force

    if not args.descheduler_config:
        log.warning("no --descheduler-config given: using the built-in defaults (see README)")
    config = InForce(
        DeschedulerConfig,
        args.descheduler_config,
        load_config,
        errors=(ConfigError,),
        what="descheduler configuration",
        interval_s=args.policy_poll_interval,
    )
    policy = policy_in_force(args.policy, interval_s=args.policy_poll_interval)
    warn_about_thresholds(config.value, policy.value)
    mismatch = config.value.metrics_missing_from({s.name for s in policy.value.spec.sync_policy})
    if mismatch:
        raise ConfigError(f"--descheduler-config and --policy disagree: {'; '.join(mismatch)}")
    lease = lease_settings_from_args(args)
    loop = LoopSettings(
        dry_run=bool(args.dry_run),
        lease=lease,
        identity=lease.identity if lease else default_identity(),
        health_host=args.health_host,
        health_port=args.health_port if args.health_port > 0 and not args.once else None,
        sync_timeout_s=args.sync_timeout,
        state_namespace=args.state_namespace or default_lease_namespace(),
        state_name=args.state_name,
    )
    return Settings(
        config=config,
        policy=policy,
        prometheus=prometheus_settings_from_args(args),
        loop=loop,
        once=bool(args.once),
    )


def print_report(report: RunReport, out: TextIO) -> None:
    from app.rebalance import render_consolidation, render_plan

    if report.plan is not None:
        out.write(render_plan(report.plan))
    if report.consolidation is not None:
        out.write("\n" + render_consolidation(report.consolidation))
    if report.outcomes:
        out.write("\noutcomes:\n")
        for key, outcome in report.outcomes.items():
            out.write(f"  {key}: {outcome}\n")
    out.write(f"\n{report.message}\n")
    out.flush()


def run(args: argparse.Namespace) -> int:
    return run_component("descheduler", serve, args)


def serve(args: argparse.Namespace) -> int:
    """The shared start-up sequence (``app.runtime.startup``), then the descheduler:
    one run with --once, else until SIGTERM or SIGINT."""
    from app.rebalance import ConfigError

    settings = configured(settings_from_args, args, (ConfigError,))
    client = kube_client(args.kubeconfig)
    loop = settings.loop
    health_socket = health_listener(loop.health_host, loop.health_port)
    from app.rebalance import ASSUMES  # the planner: once the files are known good

    scheduler = settings.config.value.scheduler
    log.info("planning beside scheduler=%s: %s", scheduler, ASSUMES[scheduler])
    from app.descheduler.descheduler import Descheduler, RunResult
    from app.prom import PrometheusSource

    source = PrometheusSource(settings.prometheus)
    descheduler = Descheduler(
        settings.config, settings.policy, client, source, loop, health_socket=health_socket
    )
    if not settings.once:
        return until_signalled("descheduler", descheduler.run(), closing=(source,))
    import asyncio

    with contextlib.closing(source):
        report = asyncio.run(descheduler.run_once())
    print_report(report, sys.stdout)
    return EXIT_OK if report.result is RunResult.OK else EXIT_FAILED


def add_parser(components: Any) -> None:
    add_component(components, "descheduler", (HELP, DESCRIPTION, EPILOG), add_flags, run)


def add_flags(parser: argparse.ArgumentParser) -> None:
    general = parser.add_argument_group("configuration and cluster")
    add_flag(
        general,
        "--descheduler-config",
        old_variable="LOADAWARE_CONFIG",
        metavar="FILE",
        help="DeschedulerConfiguration YAML (apiVersion loadaware.io/v1alpha1): thresholds, "
        "limits, protections, interval; reloaded on change",
        default_text="the built-in defaults",
    )
    add_deprecated_alias(general, "--config", "--descheduler-config", "descheduler_config")
    add_flag(
        general,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML, the extender's: its predicates are the load filter "
        "every destination must pass, its periods decide freshness; reloaded on change",
        default_text="the built-in crane defaults",
    )
    add_flag(
        general,
        "--policy-poll-interval",
        type=duration,
        default=5.0,
        metavar="DURATION",
        old_variable="LOADAWARE_POLL_INTERVAL",
        help="how often --descheduler-config and --policy are checked for changes (the name "
        "the other components use); a broken new file is logged and the previous one stays "
        "in force",
    )
    add_deprecated_alias(
        general, "--poll-interval", "--policy-poll-interval", "policy_poll_interval", type=duration
    )
    add_flag(
        general,
        "--kubeconfig",
        metavar="FILE",
        default_text="in-cluster config, then $KUBECONFIG, then ~/.kube/config",
        help="kubeconfig file",
    )
    add_own_flag(
        general,
        "descheduler",
        "--sync-timeout",
        type=duration,
        default=60.0,
        metavar="DURATION",
        help="how long a run waits for the node, pod and PDB caches to list before it gives "
        "up and evicts nothing",
    )
    add_own_flag(
        general,
        "descheduler",
        "--state-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        help="namespace of the ConfigMap that holds the descheduler's memory (recent "
        "evictions, debounce rounds); only its Role may write there",
        default_text="the pod's namespace, else 'default'",
    )
    add_flag(
        general,
        "--state-name",
        metavar="NAME",
        type=kubernetes_name,
        default=DEFAULT_STATE_NAME,
        help="name of that ConfigMap",
    )

    mode = parser.add_argument_group("mode")
    add_own_flag(
        mode,
        "descheduler",
        "--once",
        action="store_true",
        help="run one pass, print it and exit (CronJob style); off: loop every interval",
    )
    add_own_flag(
        mode,
        "descheduler",
        "--dry-run",
        action="store_true",
        help="plan and report, evict nothing and write nothing (also config dryRun: true); "
        "with --once the plan is printed as a table",
    )

    add_prometheus_flags(parser)
    add_leader_election_flags(parser, DEFAULT_LEASE_NAME)

    add_health_flags(parser, DEFAULT_HEALTH_PORT, "; not served with --once")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse descheduler flags alone (tests)."""
    parser = argparse.ArgumentParser(prog="loadaware descheduler")
    add_flags(parser)
    return parser.parse_args(argv)

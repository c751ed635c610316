"""``loadaware annotator``: flags, configuration and process lifecycle."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.commandline import (
    add_component,
    add_flag,
    add_own_flag,
    count,
    duration,
    fraction,
    kubernetes_name,
    kubernetes_namespace,
    positive_number,
)
from app.kube import ANNOTATOR_LEASE_NAME, STATE_NAME, WORKLOAD_USAGE_NAME
from app.load import SOFT_TAINT_EFFECT, SOFT_TAINT_KEY, SoftTaintSettings
from app.prom import add_prometheus_flags, label_matchers, prometheus_settings_from_args
from app.runtime import (
    add_health_flags,
    add_leader_election_flags,
    configured,
    default_lease_namespace,
    health_listener,
    kube_client,
    lease_settings_from_args,
    run_component,
    until_signalled,
)

if TYPE_CHECKING:
    from app.annotator.settings import AnnotatorConfig
    from app.policy import Policy
    from app.prom import PrometheusSettings
    from app.runtime import InForce

# The annotator itself, the Kubernetes and Prometheus clients and the service are
# imported in the functions that use them, after the flags are parsed: `--help` and a
# bad flag do not pay for them. The health port is bound once every input is known good,
# before the annotator and the web server are loaded: a port in use is told at once.

log = logging.getLogger(__name__)

DEFAULT_HEALTH_PORT = 8081
DEFAULT_LEASE_NAME = ANNOTATOR_LEASE_NAME

HELP = "write node load from Prometheus into node annotations"
DESCRIPTION = """\
Write each node's load from Prometheus into its annotations, for the loadaware
extender (or crane-scheduler) to read.

Each metric in the policy's syncPolicy is synced at start, then on its own
period. A sync makes ONE instant query per metric for all nodes
(<metric>{--query-selector}), divides values by --value-divisor (0-100 -> 0..1),
matches series to nodes by the `instance` label (InternalIP, then IP:port, then
node name, then a `node` label) and sends ONE merge patch per node carrying all
due metrics plus node_hot_value, for example
    cpu_usage_avg_5m: "0.63012,2026-11-22T15:04:32Z"    (usage 0..1, real UTC)
A node without a valid series keeps its old value, which goes stale on its own.
NaN, infinite and negative samples are dropped and counted, never written as 0.
Annotations that are not loadaware's are never touched.

Bindings are seen through a watch on pods; node_hot_value is rewritten within
--hot-value-interval on the nodes whose hot value changed.

Each workload's observed per-pod usage (the cAdvisor series of its running pods,
read only from each pod's own node) is written into one ConfigMap,
loadaware/loadaware-workload-usage, for the extender's estimate of pods just bound.

With --soft-taints (off by default), it also keeps the taint
loadaware.io/hot=true:PreferNoSchedule on the nodes whose fresh usage is above a
limit of the policy, so that a kube-scheduler without the extender (a managed
control plane) places there last. Only that taint is ever added or removed;
every other taint stays. With --soft-taints off, the leader takes that taint off
every node at start: turning the feature off is a restart.

Run two replicas: they elect a leader through a Lease and only the leader
writes. /healthz, /readyz and /metrics are served on --health-port; readiness
does not depend on leadership (a follower is a ready standby).

Durations take Go syntax (15s, 2m) or plain seconds. Every flag can also be set
through the environment variable shown in its help (LOADAWARE_PROMETHEUS_URL).
"""

EPILOG = """\
examples:
  loadaware annotator --prometheus-url http://prometheus.monitoring:9090
  loadaware annotator --prometheus-url https://mimir.example/prometheus \\
      --prometheus-header 'X-Scope-OrgID: prod' \\
      --prometheus-token-file /var/run/secrets/mimir/token \\
      --query-selector 'cluster="prod"'

exit codes: 0 stopped (SIGTERM or SIGINT), 1 a failure while running (the API server,
a lost lease), 2 bad usage or configuration (flags, files, a port in use)
"""


@dataclass(frozen=True, slots=True)
class Settings:
    annotator: AnnotatorConfig
    prometheus: PrometheusSettings
    policy_in_force: InForce[Policy]  # the annotator follows it once built


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed flags into configuration; raise ValueError or PolicyError with the fix."""
    from app.runtime import policy_in_force

    in_force = policy_in_force(args.policy, interval_s=args.policy_poll_interval)
    policy = in_force.value
    prometheus = prometheus_settings_from_args(args)
    lease = lease_settings_from_args(args)
    from app.annotator.settings import (
        AnnotatorConfig,
        DeschedulerState,
        QueryShape,
        WorkloadUsageTarget,
    )

    config = AnnotatorConfig(
        policy=policy,
        shape=QueryShape(selector=args.query_selector or "", divisor=args.value_divisor),
        patch_concurrency=args.patch_concurrency,
        hot_value_interval_s=args.hot_value_interval,
        lease=lease,
        health_host=args.health_host,
        health_port=args.health_port if args.health_port > 0 else None,
        soft_taints=SoftTaintSettings(
            release_margin=args.soft_taint_release_margin,
            min_hold_s=args.soft_taint_hold,
            max_share=args.soft_taint_max_share,
        )
        if args.soft_taints
        else None,
        soft_taint_interval_s=args.soft_taint_interval,
        descheduler_state=DeschedulerState(
            args.descheduler_state_namespace or default_lease_namespace(),
            args.descheduler_state_name,
        )
        if args.soft_taints
        else None,
        workload_usage=WorkloadUsageTarget(
            args.workload_usage_namespace or default_lease_namespace(), args.workload_usage_name
        )
        if args.workload_usage
        else None,
    )
    if config.patch_concurrency < 1:
        raise ValueError(f"--patch-concurrency must be at least 1, got {config.patch_concurrency}")
    return Settings(config, prometheus, in_force)


def run(args: argparse.Namespace) -> int:
    return run_component("annotator", serve, args)


def serve(args: argparse.Namespace) -> int:
    """The shared start-up sequence (``app.runtime.startup``), then the annotator."""
    settings = configured(settings_from_args, args)
    client = kube_client(args.kubeconfig)
    config = settings.annotator
    health_socket = health_listener(config.health_host, config.health_port)
    from app.annotator.annotator import Annotator
    from app.prom import PrometheusSource

    source = PrometheusSource(settings.prometheus)
    annotator = Annotator(
        config,
        client,
        source,
        policy_in_force=settings.policy_in_force,
        health_socket=health_socket,
    )
    return until_signalled("annotator", annotator.run(), closing=(source,))


def add_parser(components: Any) -> None:
    add_component(components, "annotator", (HELP, DESCRIPTION, EPILOG), add_flags, run)


def add_flags(parser: argparse.ArgumentParser) -> None:
    general = parser.add_argument_group("policy and cluster")
    add_flag(
        general,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML file; its syncPolicy lists the metrics and their "
        "periods, its hotValue the hot-value rule",
        default_text="the built-in crane defaults",
    )
    add_flag(
        general,
        "--policy-poll-interval",
        type=duration,
        default=5.0,
        metavar="DURATION",
        help="how often to check --policy for changes; a changed policy takes effect "
        "without a restart, a broken one is logged and ignored",
    )
    add_flag(
        general,
        "--kubeconfig",
        metavar="FILE",
        default_text="in-cluster config, then $KUBECONFIG, then ~/.kube/config",
        help="kubeconfig file",
    )

    prom = add_prometheus_flags(parser)
    add_own_flag(
        prom,
        "annotator",
        "--query-selector",
        type=label_matchers,
        metavar="MATCHERS",
        help="label matchers added to every query, e.g. 'cluster=\"prod\"' gives "
        'cpu_usage_avg_5m{cluster="prod"}',
    )
    add_own_flag(
        prom,
        "annotator",
        "--value-divisor",
        metavar="NUMBER",
        type=positive_number,
        default=100.0,
        help="divide query values by this to get a 0..1 fraction: 100 for crane's "
        "percentage rules, 1 for rules that already give 0..1",
    )

    writing = parser.add_argument_group("writing annotations")
    add_own_flag(
        writing,
        "annotator",
        "--patch-concurrency",
        metavar="N",
        type=count,
        default=16,
        help="node patches in flight at once (more only adds client overhead "
        "once the API server answers in a few milliseconds)",
    )
    add_own_flag(
        writing,
        "annotator",
        "--hot-value-interval",
        type=duration,
        default=15.0,
        metavar="DURATION",
        help="longest delay between a binding and its node_hot_value write; also how often "
        "decaying hot values are rewritten",
    )

    add_soft_taint_flags(parser)

    add_leader_election_flags(parser, DEFAULT_LEASE_NAME)

    add_health_flags(parser, DEFAULT_HEALTH_PORT)


def add_soft_taint_flags(parser: argparse.ArgumentParser) -> None:
    rule = SoftTaintSettings()
    taints = parser.add_argument_group("soft taints (for a kube-scheduler without the extender)")
    add_own_flag(
        taints,
        "annotator",
        "--soft-taints",
        action=argparse.BooleanOptionalAction,
        default=False,
        help=f"keep the taint {SOFT_TAINT_KEY}=true:{SOFT_TAINT_EFFECT} on nodes whose fresh "
        "usage is above a limit of the policy (README, 'Managed clusters'); off: the leader "
        "takes it off every node at start",
    )
    add_own_flag(
        taints,
        "annotator",
        "--soft-taint-release-margin",
        type=fraction,
        metavar="FRACTION",
        default=rule.release_margin,
        help="a tainted node keeps its taint while a reading is above its limit less "
        "this (the lower line), so that it does not flap around the limit; below 1",
    )
    add_own_flag(
        taints,
        "annotator",
        "--soft-taint-hold",
        type=duration,
        metavar="DURATION",
        default=rule.min_hold_s,
        help="a tainted node keeps its taint until it has been below the lower line this "
        "long, so that a short dip does not remove it",
    )
    add_own_flag(
        taints,
        "annotator",
        "--soft-taint-max-share",
        type=fraction,
        metavar="FRACTION",
        default=rule.max_share,
        help="taint at most this share of the nodes (at least one node once there are "
        "two), the hottest first, so that a cluster hot everywhere is not tainted "
        "everywhere; 0 taints none",
    )
    add_own_flag(
        taints,
        "annotator",
        "--soft-taint-interval",
        type=duration,
        metavar="DURATION",
        default=15.0,
        help="how often every node is judged from its annotations; a round that changes "
        "nothing makes no API call",
    )
    add_flag(
        taints,
        "--descheduler-state-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        command="annotator",
        help="namespace of the descheduler's state ConfigMap (its --state-namespace), read "
        "for its recent evictions: a tainted node evicted from within 6h keeps its soft "
        "taint while the largest pod evicted from it would take it back over a limit "
        "(docs/tuning.md, 'Soft taints')",
        default_text="the pod's namespace, else 'default'",
    )
    add_flag(
        taints,
        "--descheduler-state-name",
        metavar="NAME",
        type=kubernetes_name,
        command="annotator",
        default=STATE_NAME,
        help="name of that ConfigMap (the descheduler's --state-name)",
    )


    usage = parser.add_argument_group("workload usage")
    add_flag(
        usage,
        "--workload-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on the policy's shortest sync period, publish what each workload's running "
        "pods use (one pod: the 90th percentile, from the cAdvisor series, one query per "
        "resource) into one ConfigMap, which the extender raises its estimate of a "
        "just-bound pod of that workload to, and so does the soft-taint rule (README, "
        "'Burst-aware estimation')",
    )
    add_flag(
        usage,
        "--workload-usage-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        help="namespace of that ConfigMap; only the annotator's Role may write there",
        default_text="the pod's namespace, else 'default'",
    )
    add_flag(
        usage,
        "--workload-usage-name",
        metavar="NAME",
        type=kubernetes_name,
        default=WORKLOAD_USAGE_NAME,
        help="name of that ConfigMap",
    )


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse annotator flags alone (tests and the benchmark)."""
    parser = argparse.ArgumentParser(prog="loadaware annotator")
    add_flags(parser)
    return parser.parse_args(argv)


__all__ = ["Settings", "add_parser", "parse_args", "run", "settings_from_args"]

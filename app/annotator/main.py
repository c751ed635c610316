"""``loadaware annotator``: flags, configuration and process lifecycle."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.annotator.leader import LeaseSettings
from app.annotator.runtime import Annotator, AnnotatorConfig
from app.annotator.sync import QueryShape
from app.flags import add_flag, env_name
from app.kube.client import KubeConfigError, make_client
from app.policy import Policy, PolicyError, default_policy, parse_duration_s
from app.policy_watch import PolicyWatcher
from app.prom.client import PrometheusSettings, PrometheusSource, parse_header

log = logging.getLogger(__name__)

DEFAULT_HEALTH_PORT = 8081
DEFAULT_LEASE_NAME = "loadaware-annotator"
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

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
"""


def duration_s(text: str) -> float:
    """A flag value as seconds: a Go duration (``15s``, ``2m``) or a plain number."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration_s(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _boolean(value: Any) -> bool:
    # add_flag hands environment values to BooleanOptionalAction as strings.
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SystemExit(f"error: expected true or false, got {value!r}")


class _AppendHeaders(argparse.Action):
    """Repeatable ``--prometheus-header``; the command line replaces the environment's list.

    From the environment, several headers are separated by newlines or ``;``.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = list(current) if isinstance(current, list) else []
        items.append(str(values))
        setattr(namespace, self.dest, items)


def _header_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.replace(";", "\n").splitlines() if part.strip()]
    return list(value)


def _default_lease_namespace() -> str:
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def _default_identity() -> str:
    # Pod name (the hostname) plus a random part, so that a restarted pod with the same
    # name does not mistake its predecessor's lease for its own.
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Settings:
    annotator: AnnotatorConfig
    prometheus: PrometheusSettings
    policy_watcher: PolicyWatcher | None


def settings_from_args(
    args: argparse.Namespace, on_policy_change: Callable[[Policy], None] = lambda _p: None
) -> Settings:
    """Turn parsed flags into configuration; raise ValueError or PolicyError with the fix."""
    watcher = None
    if args.policy:
        watcher = PolicyWatcher(
            args.policy, on_change=on_policy_change, interval_s=args.policy_poll_interval
        )
        policy = watcher.load_initial()
    else:
        log.warning("no --policy given: using the built-in default policy (crane's defaults)")
        policy = default_policy()
    if not args.prometheus_url:
        raise ValueError(
            "--prometheus-url is required (or LOADAWARE_PROMETHEUS_URL), "
            "e.g. http://prometheus.monitoring:9090"
        )
    headers = dict(parse_header(text) for text in _header_list(args.prometheus_header))
    prometheus = PrometheusSettings(
        url=args.prometheus_url,
        token_file=Path(args.prometheus_token_file) if args.prometheus_token_file else None,
        username=args.prometheus_username or None,
        password_file=Path(args.prometheus_password_file)
        if args.prometheus_password_file
        else None,
        ca_file=Path(args.prometheus_ca_file) if args.prometheus_ca_file else None,
        insecure_skip_verify=bool(args.prometheus_insecure_skip_verify),
        headers=headers,
        timeout_s=args.query_timeout,
    )
    for path, flag in (
        (prometheus.token_file, "--prometheus-token-file"),
        (prometheus.password_file, "--prometheus-password-file"),
        (prometheus.ca_file, "--prometheus-ca-file"),
    ):
        if path is not None and not path.is_file():
            raise ValueError(f"{flag} {path} does not exist or is not a file")
    lease = None
    if _boolean(args.leader_elect):
        lease = LeaseSettings(
            namespace=args.lease_namespace or _default_lease_namespace(),
            name=args.lease_name,
            identity=args.leader_elect_identity or _default_identity(),
            lease_duration_s=args.leader_elect_lease_duration,
            renew_deadline_s=args.leader_elect_renew_deadline,
            retry_period_s=args.leader_elect_retry_period,
        )
    config = AnnotatorConfig(
        policy=policy,
        shape=QueryShape(selector=args.query_selector or "", divisor=args.value_divisor),
        patch_concurrency=args.patch_concurrency,
        hot_value_interval_s=args.hot_value_interval,
        lease=lease,
        health_host=args.health_host,
        health_port=args.health_port if args.health_port > 0 else None,
    )
    if config.patch_concurrency < 1:
        raise ValueError(f"--patch-concurrency must be at least 1, got {config.patch_concurrency}")
    return Settings(config, prometheus, watcher)


async def _run_until_signalled(annotator: Annotator) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await annotator.run()
    except asyncio.CancelledError:
        log.info("annotator stopped")


def run(args: argparse.Namespace) -> int:
    annotator: Annotator | None = None

    def adopt(policy: Policy) -> None:
        if annotator is not None:
            annotator.set_policy(policy)

    try:
        settings = settings_from_args(args, on_policy_change=adopt)
    except (ValueError, PolicyError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    source = PrometheusSource(settings.prometheus)
    try:
        client = make_client(args.kubeconfig)
    except KubeConfigError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    annotator = Annotator(
        settings.annotator, client, source, policy_watcher=settings.policy_watcher
    )
    try:
        asyncio.run(_run_until_signalled(annotator))
    finally:
        source.close()
    return 0


def add_parser(components: Any) -> None:
    parser: argparse.ArgumentParser = components.add_parser(
        "annotator",
        help="write node load from Prometheus into node annotations",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser)
    parser.set_defaults(run=run)


def add_flags(parser: argparse.ArgumentParser) -> None:
    general = parser.add_argument_group("policy and cluster")
    _add(
        general,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML file; its syncPolicy lists the metrics and their "
        "periods, its hotValue the hot-value rule (default: built-in crane defaults)",
    )
    _add(
        general,
        "--policy-poll-interval",
        type=duration_s,
        default=5.0,
        metavar="DURATION",
        help="how often to check --policy for changes; a changed policy takes effect "
        "without a restart, a broken one is logged and ignored (default 5s)",
    )
    _add(
        general,
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: in-cluster config, then $KUBECONFIG, ~/.kube/config)",
    )

    prom = parser.add_argument_group("Prometheus (also Thanos, Mimir, VictoriaMetrics)")
    _add(
        prom,
        "--prometheus-url",
        metavar="URL",
        help="base URL of the query API, e.g. http://prometheus.monitoring:9090 (required)",
    )
    _add(
        prom,
        "--prometheus-token-file",
        metavar="FILE",
        help="send 'Authorization: Bearer <contents>'; the file is re-read for every query, "
        "so rotated tokens are picked up without a restart",
    )
    _add(
        prom,
        "--prometheus-username",
        metavar="USER",
        help="basic-auth user (with --prometheus-password-file)",
    )
    _add(
        prom,
        "--prometheus-password-file",
        metavar="FILE",
        help="basic-auth password, re-read for every query",
    )
    _add(
        prom,
        "--prometheus-ca-file",
        metavar="FILE",
        help="PEM CA bundle to verify Prometheus' TLS certificate",
    )
    _add(
        prom,
        "--prometheus-insecure-skip-verify",
        action="store_true",
        help="do not verify Prometheus' TLS certificate (testing only)",
    )
    _add(
        prom,
        "--prometheus-header",
        action=_AppendHeaders,
        metavar="'NAME: VALUE'",
        help="extra HTTP header on every query, repeatable, e.g. 'X-Scope-OrgID: prod' for "
        "Mimir; in the environment separate several with ';'",
    )
    _add(
        prom,
        "--query-timeout",
        type=duration_s,
        default=30.0,
        metavar="DURATION",
        help="give up on one query after this long (default 30s)",
    )
    _add(
        prom,
        "--query-selector",
        metavar="MATCHERS",
        help="label matchers added to every query, e.g. 'cluster=\"prod\"' gives "
        'cpu_usage_avg_5m{cluster="prod"}',
    )
    _add(
        prom,
        "--value-divisor",
        metavar="NUMBER",
        type=float,
        default=100.0,
        help="divide query values by this to get a 0..1 fraction: 100 for crane's "
        "percentage rules (default), 1 for rules that already give 0..1",
    )

    writing = parser.add_argument_group("writing annotations")
    _add(
        writing,
        "--patch-concurrency",
        metavar="N",
        type=int,
        default=16,
        help="node patches in flight at once (default 16: more only adds client overhead "
        "once the API server answers in a few milliseconds)",
    )
    _add(
        writing,
        "--hot-value-interval",
        type=duration_s,
        default=15.0,
        metavar="DURATION",
        help="longest delay between a binding and its node_hot_value write; also how often "
        "decaying hot values are rewritten (default 15s)",
    )

    election = parser.add_argument_group("leader election (only the leader writes)")
    _add(
        election,
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect a leader through a coordination.k8s.io/v1 Lease (default on); "
        "--no-leader-elect for a single replica",
    )
    _add(
        election,
        "--lease-namespace",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: the pod's namespace, else 'default')",
    )
    _add(
        election,
        "--lease-name",
        metavar="NAME",
        default=DEFAULT_LEASE_NAME,
        help=f"name of the Lease (default {DEFAULT_LEASE_NAME})",
    )
    _add(
        election,
        "--leader-elect-identity",
        metavar="NAME",
        help="this replica's name in the Lease (default: hostname plus a random suffix)",
    )
    _add(
        election,
        "--leader-elect-lease-duration",
        type=duration_s,
        default=15.0,
        metavar="DURATION",
        help="how long followers wait before taking an unrenewed lease (default 15s)",
    )
    _add(
        election,
        "--leader-elect-renew-deadline",
        type=duration_s,
        default=10.0,
        metavar="DURATION",
        help="the leader stops writing if it could not renew for this long (default 10s)",
    )
    _add(
        election,
        "--leader-elect-retry-period",
        type=duration_s,
        default=2.0,
        metavar="DURATION",
        help="how often to try to acquire or renew (default 2s)",
    )

    serving = parser.add_argument_group("health and metrics")
    _add(
        serving,
        "--health-host",
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address for the health server",
    )
    _add(
        serving,
        "--health-port",
        metavar="PORT",
        type=int,
        default=DEFAULT_HEALTH_PORT,
        help=f"port for /healthz, /readyz and /metrics (default {DEFAULT_HEALTH_PORT}; 0 disables)",
    )


def _add(group: Any, flag: str, **kwargs: Any) -> None:
    # add_flag reports a bad boolean through parser.error, which argument groups lack.
    if kwargs.get("action") == "store_true":
        _boolean(os.environ.get(env_name(flag), "false"))
    add_flag(group, flag, **kwargs)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse annotator flags alone (tests and the benchmark)."""
    parser = argparse.ArgumentParser(prog="loadaware annotator")
    add_flags(parser)
    return parser.parse_args(argv)


__all__ = ["Settings", "add_parser", "duration_s", "parse_args", "run", "settings_from_args"]

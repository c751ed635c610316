"""``loadaware extender`` and ``loadaware demo``: serve the scheduler extender."""

from __future__ import annotations

import argparse
import logging
import ssl
from typing import Any

import uvicorn

from app.extender.demo import DemoExtender, curl_examples
from app.extender.estimates import DEFAULT_RESERVATION_TTL_S, scheduled_pod
from app.extender.http import DEFAULT_MAX_BODY_BYTES, ExtenderApp
from app.extender.service import Extender
from app.flags import add_flag
from app.kube.client import KubeConfigError, make_client
from app.kube.nodes import NodeCache
from app.kube.pods import PodCache
from app.policy import PolicyError, default_policy
from app.policy.watch import PolicyWatcher

log = logging.getLogger(__name__)

DEFAULT_PORT = 8888


def tls_options(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's TLS settings from --tls-cert, --tls-key and --client-ca."""
    if not (args.tls_cert or args.tls_key):
        if args.client_ca:
            raise SystemExit("error: --client-ca needs --tls-cert and --tls-key (mutual TLS)")
        return {}
    if not (args.tls_cert and args.tls_key):
        raise SystemExit("error: --tls-cert and --tls-key must be given together")
    options: dict[str, Any] = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
    if args.client_ca:
        options |= {"ssl_ca_certs": args.client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


# kube-scheduler's Go HTTP client keeps idle connections for 90 s and does not retry
# a POST whose reused connection the server closed meanwhile: that race fails a
# scheduling attempt. Idling longer than the client does leaves closing to it.
KEEP_ALIVE_S = 120


def server_config(app: ExtenderApp, args: argparse.Namespace) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level.lower(),
        # Per-request access logs would cost more than the verbs themselves.
        access_log=False,
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_S,
        **tls_options(args),
    )


def _serve(app: ExtenderApp, args: argparse.Namespace) -> None:
    uvicorn.Server(server_config(app, args)).run()


def run_extender(args: argparse.Namespace) -> int:
    watcher: PolicyWatcher | None = None
    if args.policy:
        # The callbacks run only after start-up, once `extender` exists.
        watcher = PolicyWatcher(
            args.policy,
            on_change=lambda new_policy: extender.set_policy(new_policy),
            on_result=lambda result: extender.on_policy_reload(result),
            interval_s=float(args.policy_poll_interval),
        )
        try:
            policy = watcher.load_initial()
        except PolicyError as error:
            raise SystemExit(f"error: {error}") from None
    else:
        log.warning("no --policy given: using the built-in default policy (crane's defaults)")
        policy = default_policy()
    client = None
    if args.node_cache:
        try:
            client = make_client(args.kubeconfig)
        except KubeConfigError as error:
            raise SystemExit(
                f"error: {error} (or use --no-node-cache: nodes then come from the requests)"
            ) from None
    node_cache = NodeCache(client) if client is not None else None
    pod_cache = None
    if client is not None and args.pod_cache:
        pod_cache = PodCache(
            client,
            scheduled_pod,
            while_down="pods placed since a node's last sample are not estimated",
        )
    elif args.pod_cache:
        log.warning(
            "--pod-cache needs the node cache (for each node's allocatable): burst "
            "estimation is off with --no-node-cache"
        )
    extender = Extender(
        policy,
        node_cache=node_cache,
        policy_watcher=watcher,
        pod_cache=pod_cache,
        reservation_ttl_s=float(args.reservation_ttl),
    )
    extender.on_policy_reload("success")
    log.info(
        "loadaware extender: mode %s, policy %s, listening on %s:%d%s",
        extender.mode,
        policy.source,
        args.host,
        args.port,
        " (TLS)" if args.tls_cert else "",
    )
    _serve(ExtenderApp(extender, max_body_bytes=int(args.max_body_bytes)), args)
    return 0


def run_demo(args: argparse.Namespace) -> int:
    extender = DemoExtender()
    base_url = f"http://{args.host}:{args.port}"
    print(f"loadaware demo: extender with a built-in 7-node cluster on {base_url}", flush=True)
    print(curl_examples(base_url), flush=True)
    args.tls_cert = args.tls_key = args.client_ca = None
    _serve(ExtenderApp(extender), args)
    return 0


def _add_server_flags(parser: argparse.ArgumentParser, default_host: str) -> None:
    add_flag(
        parser,
        "--host",
        default=default_host,
        metavar="ADDRESS",
        help="address to listen on (default %(default)s)",
    )
    add_flag(
        parser,
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="PORT",
        help="port to listen on (default %(default)s)",
    )


def add_parser(components: Any) -> None:
    extender = components.add_parser(
        "extender",
        help="serve the kube-scheduler extender (filter and prioritize verbs)",
        description="Serve POST /filter and /prioritize for kube-scheduler's `extenders:` "
        "config, plus /healthz, /readyz, /metrics and /debug/nodes.",
    )
    add_flag(
        extender,
        "--policy",
        metavar="FILE",
        help="DynamicSchedulerPolicy YAML file, reloaded when it changes "
        "(default: built-in crane defaults)",
    )
    add_flag(
        extender,
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: in-cluster config, then $KUBECONFIG, ~/.kube/config)",
    )
    _add_server_flags(extender, "0.0.0.0")
    add_flag(
        extender,
        "--node-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="watch Nodes so kube-scheduler can use nodeCacheCapable: true (recommended); "
        "--no-node-cache reads annotations from full-node requests instead "
        "(default %(default)s)",
    )
    add_flag(
        extender,
        "--pod-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="watch Pods to estimate the usage of pods placed since each node's last "
        "sample (policy spec.estimation; needs the node cache and RBAC list/watch pods) "
        "(default %(default)s)",
    )
    add_flag(
        extender,
        "--reservation-ttl",
        type=float,
        default=DEFAULT_RESERVATION_TTL_S,
        metavar="SECONDS",
        help="how long a pod's reservation waits for its binding to show in the pod watch "
        "(default %(default)s)",
    )
    add_flag(
        extender,
        "--tls-cert",
        metavar="FILE",
        help="serve HTTPS with this certificate (PEM) (default: none, plain HTTP)",
    )
    add_flag(
        extender,
        "--tls-key",
        metavar="FILE",
        help="private key for --tls-cert (PEM) (default: none)",
    )
    add_flag(
        extender,
        "--client-ca",
        metavar="FILE",
        help="require client certificates signed by this CA, mutual TLS "
        "(default: none, any client may connect)",
    )
    add_flag(
        extender,
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="BYTES",
        help="reject larger request bodies with HTTP 413 (default %(default)s)",
    )
    add_flag(
        extender,
        "--policy-poll-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between checks of the policy file for changes (default %(default)s)",
    )
    extender.set_defaults(run=run_extender)

    demo = components.add_parser(
        "demo",
        help="serve the extender over a built-in demo cluster (no Kubernetes needed)",
    )
    _add_server_flags(demo, "127.0.0.1")
    demo.set_defaults(run=run_demo)

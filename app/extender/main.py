"""``loadaware extender`` and ``loadaware demo``: serve the scheduler extender."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from app.commandline import (
    EXIT_OK,
    add_flag,
    add_own_flag,
    count,
    duration,
    host,
    kubernetes_name,
    kubernetes_namespace,
    port,
    port_or_off,
    timeout,
)
from app.extender.defaults import (
    FULL_NODES_MAX_BODY_BYTES,
    NODE_CACHE_MAX_BODY_BYTES,
    RESERVATION_TTL_S,
    WORKLOAD_USAGE_REFRESH_S,
)
from app.health import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    ConnectionLimits,
)
from app.kube import WORKLOAD_USAGE_MAX_AGE_S, WORKLOAD_USAGE_NAME
from app.runtime import (
    StartupError,
    configured,
    kube_client,
    run_component,
    serve_until_stopped,
    stop_on_signals,
)

if TYPE_CHECKING:
    import socket
    import ssl

    import uvicorn

    from app.extender.http import ExtenderApp
    from app.policy import Policy
    from app.runtime import InForce

# What serves (uvicorn, FastAPI, the Kubernetes client, the load model) is imported in
# the functions that run it, after the flags are parsed and checked: `--help` and a bad
# flag cost a few hundredths of a second, not the half second those imports take.

log = logging.getLogger(__name__)

DEFAULT_PORT = 8888


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS settings of --tls-cert, --tls-key and --client-ca (None: plain HTTP), each
    file loaded here so that a missing or unreadable one is reported before serving.
    The listener does the handshake itself (app/health/connections.py), so that a
    connection counts against the limits and has a deadline while it lasts."""
    if not (args.tls_cert or args.tls_key):
        if args.client_ca:
            config_error("--client-ca needs --tls-cert and --tls-key (mutual TLS)")
        return None
    if not (args.tls_cert and args.tls_key):
        config_error("--tls-cert and --tls-key must be given together")
    import ssl  # only with TLS: a bad flag does not pay for it

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as error:
        config_error(
            f"--tls-cert {args.tls_cert} / --tls-key {args.tls_key}: cannot load a PEM "
            f"certificate and its key: {getattr(error, 'strerror', None) or error}"
        )
    if args.client_ca:
        try:
            context.load_verify_locations(args.client_ca)
        except (OSError, ssl.SSLError) as error:
            config_error(
                f"--client-ca {args.client_ca}: cannot load PEM CA certificates: "
                f"{getattr(error, 'strerror', None) or error}"
            )
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def config_error(message: str) -> NoReturn:
    """A configuration the extender cannot start with: one line on stderr, exit code 2
    (``run_component``)."""
    raise StartupError(message)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine (this pod) can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_caller_authentication(args: argparse.Namespace) -> str | None:
    """Who may call the verbs: a client certificate (mutual TLS) or a loopback address
    authenticates the caller. Anything else serves every client that can reach the port,
    and must be asked for with --allow-unauthenticated; the warning returned is logged
    once the port is bound (not before a failure to listen, as it was)."""
    if args.client_ca or is_loopback(args.host):
        return None
    transport = "HTTPS without client certificates" if args.tls_cert else "plain HTTP"
    if not args.allow_unauthenticated:
        config_error(
            f"--host {args.host} with {transport} would let anyone who can reach the port "
            f"steer scheduling. Use mutual TLS (--tls-cert, --tls-key, --client-ca), or "
            f"--host 127.0.0.1 beside the scheduler, or say --allow-unauthenticated"
        )
    return (
        f"serving the extender's verbs with {transport} on {args.host}:{args.port} to ANY "
        "client (--allow-unauthenticated): anyone who can reach this port can reserve load "
        "and read node data; use mutual TLS or a loopback address (docs/security.md)"
    )


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    limits = ConnectionLimits(
        header_timeout_s=float(args.header_timeout),
        body_timeout_s=float(args.body_timeout),
        idle_timeout_s=float(args.idle_timeout),
        max_connections=int(args.max_connections),
        max_connections_per_client=int(args.max_connections_per_client),
        # `loadaware demo` serves no TLS, and has no such flag.
        handshake_timeout_s=float(
            getattr(args, "tls_handshake_timeout", DEFAULT_HANDSHAKE_TIMEOUT_S)
        ),
    )
    try:
        limits.check()
    except ValueError as error:
        config_error(str(error))
    return limits


def server_config(app: ExtenderApp, args: argparse.Namespace) -> uvicorn.Config:
    import uvicorn

    from app.health import guarded_protocol

    limits = connection_limits(args)
    return uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level.lower(),
        log_config=None,  # uvicorn's lines go through ours, in our format (app/commandline/logs.py)
        # Per-request access logs would cost more than the verbs themselves.
        access_log=False,
        lifespan="on",
        # TLS, when asked for, is done by the guarded protocol, not by uvicorn.
        http=guarded_protocol(limits, tls_context(args)),
        ws="none",  # no WebSockets: not served, and wsproto not loaded at start
        # uvicorn's keep-alive timeout is the idle timeout between requests.
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
    )


def health_config(app: ExtenderApp, args: argparse.Namespace) -> uvicorn.Config:
    """The plain listener for probes and Prometheus, when --health-port is set: the same
    limits as the verbs' port, with a connection budget of its own."""
    import uvicorn

    from app.extender.http import health_api
    from app.health import guarded_protocol

    limits = connection_limits(args)
    return uvicorn.Config(
        health_api(app.extender),
        host=args.health_host,
        port=args.health_port,
        log_level=args.log_level.lower(),
        log_config=None,
        access_log=False,
        lifespan="off",
        http=guarded_protocol(limits),
        ws="none",  # no WebSockets: not served, and wsproto not loaded at start
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
    )


def check_distinct_ports(args: argparse.Namespace) -> int:
    """--health-port (0: none), which must not be --port."""
    health_port = int(getattr(args, "health_port", 0) or 0)
    if health_port and health_port == args.port:
        config_error(
            f"--port and --health-port are both {args.port}: give the health server a "
            "port of its own, or --health-port 0 for none"
        )
    return health_port


def bind_listeners(args: argparse.Namespace) -> list[socket.socket]:
    """The verbs' socket, and the health server's with --health-port."""
    from app.health import CannotListen, listen

    health_port = check_distinct_ports(args)
    try:
        sockets = [listen(args.host, args.port, ("--host", "--port"))]
    except CannotListen as error:
        config_error(str(error))
    if health_port:
        try:
            sockets.append(
                listen(args.health_host, health_port, ("--health-host", "--health-port"))
            )
        except CannotListen as error:
            sockets[0].close()
            config_error(str(error))
    return sockets


def _serve(
    app: ExtenderApp,
    args: argparse.Namespace,
    sockets: list[socket.socket],
    ready: Callable[[], None] = lambda: None,
) -> None:
    """On ``sockets`` (``bind_listeners``), ``ready`` (the demo's banner), then serve
    until SIGTERM or SIGINT stop every server gracefully (``app.runtime.startup``) and
    the process exits 0."""
    from app.health import EmbeddedServer

    configs = [server_config(app, args)]
    if len(sockets) > 1:
        configs.append(health_config(app, args))
    servers = [EmbeddedServer(config) for config in configs]
    stop_on_signals(servers)
    # Listening before ``ready``: a client that connects as soon as the banner shows is
    # queued until the server accepts, not refused (a curl pasted from the demo's banner
    # at once was refused while uvicorn still loaded).
    for sock, config in zip(sockets, configs, strict=True):
        sock.listen(config.backlog)
    ready()
    serve_until_stopped(servers, sockets)


def max_body_bytes(args: argparse.Namespace) -> int:
    """--max-body-bytes, or the mode's default: a node-cache request carries one pod and
    node names, a full-nodes one every Node object (docs/security.md, "Request size")."""
    if args.max_body_bytes is not None:
        return int(args.max_body_bytes)
    return NODE_CACHE_MAX_BODY_BYTES if args.node_cache else FULL_NODES_MAX_BODY_BYTES


def run_extender(args: argparse.Namespace) -> int:
    return run_component("extender", serve_extender, args)


def policy_of(args: argparse.Namespace) -> InForce[Policy]:
    """The policy in force: the extender follows it once built, adopting each reload whole."""
    from app.runtime import policy_in_force

    return policy_in_force(args.policy, interval_s=float(args.policy_poll_interval))


def serve_extender(args: argparse.Namespace) -> int:
    """The shared start-up sequence (``app.runtime.startup``), the extender's own checks
    first and its own listeners, then serve until SIGTERM or SIGINT."""
    # Each check imports only what it needs, the cheapest first, so that a bad flag or
    # file is reported before the web server and the clients are loaded.
    unauthenticated = check_caller_authentication(args)
    connection_limits(args)
    tls_context(args)
    check_distinct_ports(args)
    from app.runtime import default_lease_namespace

    in_force = configured(policy_of, args)
    from app.extender.index import new_verdict_index

    try:
        new_verdict_index()  # LOADAWARE_VERDICT_INDEX, checked before anything starts
    except (ValueError, RuntimeError) as error:
        config_error(str(error))
    client = None
    if args.node_cache:
        client = kube_client(
            args.kubeconfig, " (or use --no-node-cache: nodes then come from the requests)"
        )
    # Bound once every input is known good, before the caches, the load model and the
    # web server are loaded (about a second): a port in use, or a host that does not
    # resolve, is told at once.
    sockets = bind_listeners(args)
    if unauthenticated is not None:
        log.warning("%s", unauthenticated)
    from app.extender.extender import Extender
    from app.extender.http import ExtenderApp
    from app.extender.workload_usage import WorkloadUsageSource
    from app.kube import NodeCache, PodCache, WorkloadUsageStore, scheduled_pod

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
    workload_usage = None
    if client is not None and pod_cache is not None and args.workload_usage:
        store = WorkloadUsageStore(
            client,
            args.workload_usage_namespace or default_lease_namespace(),
            args.workload_usage_name,
        )
        workload_usage = WorkloadUsageSource(
            store,
            max_age_s=float(args.workload_usage_max_age),
            refresh_s=float(args.workload_usage_refresh),
        )
    extender = Extender(
        in_force,
        node_cache=node_cache,
        pod_cache=pod_cache,
        reservation_ttl_s=float(args.reservation_ttl),
        workload_usage=workload_usage,
    )
    extender.on_policy_reload("success")

    listening = functools.partial(
        log.info,
        "loadaware extender: mode %s, policy %s, listening on %s:%d%s",
        extender.mode,
        in_force.value.source,
        args.host,
        args.port,
        " (TLS)" if args.tls_cert else "",
    )
    app = ExtenderApp(
        extender,
        max_body_bytes=max_body_bytes(args),
        body_timeout_s=float(args.body_timeout),
        debug_endpoints=bool(args.debug_endpoints),
    )
    _serve(app, args, sockets, listening)
    return EXIT_OK


def http_base_url(host: str, port: int) -> str:
    """``http://HOST:PORT``, an IPv6 address in brackets (``http://[::1]:8888``), as
    curl and every URL parser require."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def print_banner(base_url: str, examples: str) -> None:
    print(f"loadaware demo: extender with a built-in 7-node cluster on {base_url}", flush=True)
    print(examples, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    return run_component("extender", serve_demo, args)  # its errors say "extender"


def serve_demo(args: argparse.Namespace) -> int:
    args.tls_cert = args.tls_key = args.client_ca = None
    args.health_port = 0
    sockets = bind_listeners(args)  # before the web server is loaded: see run_extender
    from app.extender.demo import DemoExtender, curl_examples
    from app.extender.http import ExtenderApp

    extender = DemoExtender()
    base_url = http_base_url(args.host, args.port)
    app = ExtenderApp(extender, body_timeout_s=float(args.body_timeout))
    # The banner once the port is ours: a banner for a port in use would lie.
    _serve(app, args, sockets, functools.partial(print_banner, base_url, curl_examples(base_url)))
    return EXIT_OK


def _add_server_flags(parser: argparse.ArgumentParser, default_host: str) -> None:
    add_flag(
        parser,
        "--host",
        type=host,
        default=default_host,
        metavar="ADDRESS",
        help="address to listen on",
    )
    add_flag(
        parser, "--port", type=port, default=DEFAULT_PORT, metavar="PORT", help="port to listen on"
    )
    add_flag(
        parser,
        "--header-timeout",
        type=timeout,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="DURATION",
        help="close a connection whose request head has not arrived this long after its "
        "first byte (or after it opened)",
    )
    add_flag(
        parser,
        "--body-timeout",
        type=timeout,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="DURATION",
        help="a request body must be complete this long after its head, or the "
        "connection closes (the verbs answer 408 first)",
    )
    add_flag(
        parser,
        "--idle-timeout",
        type=timeout,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="DURATION",
        help="close a kept-alive connection idle this long; keep it above kube-scheduler's own 90s",
    )
    add_flag(
        parser,
        "--max-connections",
        type=count,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="answer 503 and close connections beyond this many open ones",
    )
    add_flag(
        parser,
        "--max-connections-per-client",
        type=count,
        default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        metavar="N",
        help="answer 503 and close connections beyond this many open ones from one "
        "address, so that no client takes the others' share of --max-connections",
    )


def add_parser(components: Any) -> None:
    extender = components.add_parser(
        "extender",
        help="serve the kube-scheduler extender (filter and prioritize verbs)",
        description="Serve POST /filter and /prioritize for kube-scheduler's `extenders:` "
        "config, plus /healthz, /readyz and /metrics (and /debug/nodes with "
        "--debug-endpoints). Exit codes: 0 stopped (SIGTERM or SIGINT), 1 failed while "
        "running, 2 bad usage or configuration (a port in use or a --host that does not "
        "resolve included).",
    )
    add_flag(
        extender,
        "--policy",
        metavar="FILE",
        default_text="the built-in crane defaults",
        help="DynamicSchedulerPolicy YAML file, reloaded when it changes",
    )
    add_flag(
        extender,
        "--kubeconfig",
        metavar="FILE",
        default_text="in-cluster config, then $KUBECONFIG, then ~/.kube/config",
        help="kubeconfig file",
    )
    _add_server_flags(extender, "127.0.0.1")
    add_own_flag(
        extender,
        "extender",
        "--node-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="watch Nodes so kube-scheduler can use nodeCacheCapable: true "
        "(recommended); --no-node-cache reads annotations from full-node requests",
    )
    add_own_flag(
        extender,
        "extender",
        "--pod-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="watch Pods to estimate the usage of pods placed since each node's last "
        "sample (policy spec.estimation; needs the node cache and RBAC list/watch pods)",
    )
    add_own_flag(
        extender,
        "extender",
        "--reservation-ttl",
        type=duration,
        default=RESERVATION_TTL_S,
        metavar="DURATION",
        help="how long a pod's reservation waits for its binding to show in the pod watch",
    )
    add_flag(
        extender,
        "--workload-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="follow the annotator's ConfigMap of each workload's observed per-pod usage, "
        "and estimate a pod placed through the scheduler at what its workload's pods use "
        "where that is 3x or more its estimate from requests and limits (policy "
        "spec.estimation.workloadUsage; needs the pod cache and RBAC get on that ConfigMap)",
    )
    add_flag(
        extender,
        "--workload-usage-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        help="namespace of that ConfigMap (the annotator's)",
        default_text="the pod's namespace, else 'default'",
    )
    add_flag(
        extender,
        "--workload-usage-name",
        metavar="NAME",
        type=kubernetes_name,
        default=WORKLOAD_USAGE_NAME,
        help="name of that ConfigMap",
    )
    add_own_flag(
        extender,
        "extender",
        "--workload-usage-max-age",
        type=duration,
        default=WORKLOAD_USAGE_MAX_AGE_S,
        metavar="DURATION",
        help="a document published longer ago than this is ignored (estimates from "
        "requests and limits alone): the annotator is down or has lost Prometheus",
    )
    add_own_flag(
        extender,
        "extender",
        "--workload-usage-refresh",
        type=duration,
        default=WORKLOAD_USAGE_REFRESH_S,
        metavar="DURATION",
        help="how often that ConfigMap is read (one GET, off the scheduling path)",
    )
    add_own_flag(
        extender,
        "extender",
        "--tls-cert",
        metavar="FILE",
        default_text="none, plain HTTP",
        help="serve HTTPS with this certificate (PEM)",
    )
    add_own_flag(
        extender, "extender", "--tls-key", metavar="FILE", help="private key for --tls-cert (PEM)"
    )
    add_own_flag(
        extender,
        "extender",
        "--client-ca",
        metavar="FILE",
        default_text="none, any client may connect",
        help="require client certificates signed by this CA (mutual TLS)",
    )
    add_own_flag(
        extender,
        "extender",
        "--allow-unauthenticated",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve the verbs on a non-loopback --host without --client-ca, to any "
        "client that can reach the port; logged as a warning at start",
    )
    add_own_flag(
        extender,
        "extender",
        "--tls-handshake-timeout",
        type=duration,
        default=DEFAULT_HANDSHAKE_TIMEOUT_S,
        metavar="DURATION",
        help="close a connection whose TLS handshake has not finished this long after it "
        "opened; it counts against the connection limits meanwhile",
    )
    add_flag(
        extender,
        "--health-port",
        type=port_or_off,
        default=0,
        metavar="PORT",
        help="also serve /healthz, /readyz and /metrics (nothing else) over plain HTTP "
        "on this port, for probes and Prometheus beside mutual TLS; 0: off",
    )
    add_flag(
        extender,
        "--health-host",
        type=host,
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address for --health-port",
    )
    add_own_flag(
        extender,
        "extender",
        "--debug-endpoints",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve /debug/nodes, /docs and /openapi.json on the verbs' port, behind the "
        "same authentication; they list every node and the pods behind its estimate",
    )
    add_own_flag(
        extender,
        "extender",
        "--max-body-bytes",
        type=count,
        metavar="BYTES",
        default_text=f"{NODE_CACHE_MAX_BODY_BYTES >> 20} MiB with the node cache, "
        f"{FULL_NODES_MAX_BODY_BYTES >> 20} MiB with --no-node-cache",
        help="reject larger request bodies with HTTP 413",
    )
    add_flag(
        extender,
        "--policy-poll-interval",
        type=duration,
        default=5.0,
        metavar="DURATION",
        help="how often the policy file is checked for changes",
    )
    extender.set_defaults(run=run_extender)

    demo = components.add_parser(
        "demo",
        help="serve the extender over a built-in demo cluster (no Kubernetes needed)",
        epilog="exit codes: 0 stopped (SIGTERM or SIGINT), 2 bad usage or configuration "
        "(a port in use or a --host that does not resolve included)",
    )
    _add_server_flags(demo, "127.0.0.1")
    demo.set_defaults(run=run_demo)

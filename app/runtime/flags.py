"""The flags every loop component shares, and what they give: leader election
(``--leader-elect``, ``--lease-*``, ``--leader-elect-*``: the ``LeaseSettings`` the
elector in ``leader_election`` runs on) and the health server (``--health-host``,
``--health-port``). Here, apart from the elector and the service (the Kubernetes client,
the web server), so that a command's parser, its ``--help`` and a bad flag need neither.
"""

from __future__ import annotations

import argparse
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from app.commandline import (
    add_flag,
    duration,
    host,
    kubernetes_name,
    kubernetes_namespace,
    port_or_off,
)

__all__ = [
    "LeaseSettings",
    "add_health_flags",
    "add_leader_election_flags",
    "default_identity",
    "default_lease_namespace",
    "lease_settings_from_args",
]


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError(
                f"--leader-elect-lease-duration ({self.lease_duration_s:g}s) must be longer "
                f"than --leader-elect-renew-deadline ({self.renew_deadline_s:g}s), or two "
                "replicas could write at once"
            )
        if not self.renew_deadline_s > self.retry_period_s > 0:
            raise ValueError(
                f"--leader-elect-renew-deadline ({self.renew_deadline_s:g}s) must be longer "
                f"than --leader-elect-retry-period ({self.retry_period_s:g}s), which must be "
                "positive"
            )


_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_lease_namespace() -> str:
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def default_identity() -> str:
    # Pod name (the hostname) plus a random part, so that a restarted pod with the same
    # name does not mistake its predecessor's lease for its own.
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def add_leader_election_flags(parser: argparse.ArgumentParser, default_lease_name: str) -> None:
    election = parser.add_argument_group("leader election (only the leader writes)")
    add_flag(
        election,
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect a leader through a coordination.k8s.io/v1 Lease; "
        "--no-leader-elect for a single replica",
    )
    add_flag(
        election,
        "--lease-namespace",
        metavar="NAMESPACE",
        type=kubernetes_namespace,
        default_text="the pod's namespace, else 'default'",
        help="namespace of the Lease",
    )
    add_flag(
        election,
        "--lease-name",
        metavar="NAME",
        type=kubernetes_name,
        default=default_lease_name,
        help="name of the Lease",
    )
    add_flag(
        election,
        "--leader-elect-identity",
        metavar="NAME",
        default_text="the hostname plus a random suffix",
        help="this replica's name in the Lease",
    )
    add_flag(
        election,
        "--leader-elect-lease-duration",
        type=duration,
        default=15.0,
        metavar="DURATION",
        help="how long followers wait before taking an unrenewed lease",
    )
    add_flag(
        election,
        "--leader-elect-renew-deadline",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="the leader stops writing if it could not renew for this long",
    )
    add_flag(
        election,
        "--leader-elect-retry-period",
        type=duration,
        default=2.0,
        metavar="DURATION",
        help="how often to try to acquire or renew",
    )


def lease_settings_from_args(args: argparse.Namespace) -> LeaseSettings | None:
    """The Lease to elect a leader on, or None with --no-leader-elect."""
    lease = None
    if args.leader_elect:
        lease = LeaseSettings(
            namespace=args.lease_namespace or default_lease_namespace(),
            name=args.lease_name,
            identity=args.leader_elect_identity or default_identity(),
            lease_duration_s=args.leader_elect_lease_duration,
            renew_deadline_s=args.leader_elect_renew_deadline,
            retry_period_s=args.leader_elect_retry_period,
        )
    return lease


def add_health_flags(parser: argparse.ArgumentParser, default_port: int, note: str = "") -> None:
    """``--health-host`` and ``--health-port``, the same in every loop component."""
    serving = parser.add_argument_group("health and metrics")
    add_flag(
        serving,
        "--health-host",
        type=host,
        default="0.0.0.0",
        metavar="ADDRESS",
        help="address for the health server",
    )
    add_flag(
        serving,
        "--health-port",
        metavar="PORT",
        type=port_or_off,
        default=default_port,
        help=f"port for /healthz, /readyz and /metrics; 0 disables{note}",
    )

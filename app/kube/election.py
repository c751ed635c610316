"""Leader-election flags (a ``coordination.k8s.io/v1`` Lease), shared by the loop components."""

from __future__ import annotations

import argparse
import socket
import uuid
from pathlib import Path

from app.flags import add_flag, duration
from app.kube.lease import LeaseSettings

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
        default_text="the pod's namespace, else 'default'",
        help="namespace of the Lease",
    )
    add_flag(
        election,
        "--lease-name",
        metavar="NAME",
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

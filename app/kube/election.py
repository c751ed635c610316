"""Leader-election flags (a ``coordination.k8s.io/v1`` Lease), shared by the loop components."""

from __future__ import annotations

import argparse
import socket
import uuid
from pathlib import Path

from app.flags import add_group_flag, boolean, duration_s
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
    add_group_flag(
        election,
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="elect a leader through a coordination.k8s.io/v1 Lease (default on); "
        "--no-leader-elect for a single replica",
    )
    add_group_flag(
        election,
        "--lease-namespace",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: the pod's namespace, else 'default')",
    )
    add_group_flag(
        election,
        "--lease-name",
        metavar="NAME",
        default=default_lease_name,
        help=f"name of the Lease (default {default_lease_name})",
    )
    add_group_flag(
        election,
        "--leader-elect-identity",
        metavar="NAME",
        help="this replica's name in the Lease (default: hostname plus a random suffix)",
    )
    add_group_flag(
        election,
        "--leader-elect-lease-duration",
        type=duration_s,
        default=15.0,
        metavar="DURATION",
        help="how long followers wait before taking an unrenewed lease (default 15s)",
    )
    add_group_flag(
        election,
        "--leader-elect-renew-deadline",
        type=duration_s,
        default=10.0,
        metavar="DURATION",
        help="the leader stops writing if it could not renew for this long (default 10s)",
    )
    add_group_flag(
        election,
        "--leader-elect-retry-period",
        type=duration_s,
        default=2.0,
        metavar="DURATION",
        help="how often to try to acquire or renew (default 2s)",
    )


def lease_settings_from_args(args: argparse.Namespace) -> LeaseSettings | None:
    """The Lease to elect a leader on, or None with --no-leader-elect."""
    lease = None
    if boolean(args.leader_elect):
        lease = LeaseSettings(
            namespace=args.lease_namespace or default_lease_namespace(),
            name=args.lease_name,
            identity=args.leader_elect_identity or default_identity(),
            lease_duration_s=args.leader_elect_lease_duration,
            renew_deadline_s=args.leader_elect_renew_deadline,
            retry_period_s=args.leader_elect_retry_period,
        )
    return lease

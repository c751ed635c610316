"""What every long-running component shares, one floor above the API adapter.

- ``service``: the leader-elected service skeleton (caches, watchers, health server,
  Lease; the one status shape), ``run_once`` for a single unit of work, and running
  until SIGTERM;
- ``leader_election``: the ``coordination.k8s.io/v1`` Lease election;
- ``flags``: the election's and the health server's flags, and the ``LeaseSettings``
  they give;
- ``filewatch``: reloading a configuration file when it changes;
- ``in_force``: the one owner of a value a process runs on (built once, reloaded in
  one place, read through it);
- ``policy_reload``: the policy in force (``--policy`` or the default), its watcher
  and reload metrics;
- ``startup``: the start-up sequence every long-running component runs (settings and
  policy, client, health port, serving until a signal, shutdown).

The health server itself is ``app/health`` (a floor down): the extender serves it too.

The flags load at once; the rest (the Kubernetes client, the web server, Prometheus'
client: a few tenths of a second) on first use, so that a command that stops at a bad
flag, or prints its help, never pays for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_on_use
from app.runtime.flags import (
    LeaseSettings,
    add_health_flags,
    add_leader_election_flags,
    default_identity,
    default_lease_namespace,
    lease_settings_from_args,
)
from app.runtime.startup import (
    StartupError,
    configured,
    health_listener,
    kube_client,
    run_component,
    serve_until_stopped,
    stop_on_signals,
    until_signalled,
)

if TYPE_CHECKING:
    from app.runtime.filewatch import FileWatcher
    from app.runtime.in_force import InForce
    from app.runtime.leader_election import LeaderElector
    from app.runtime.policy_reload import PolicyReloadMetrics, policy_in_force
    from app.runtime.service import (
        LeaderElectedService,
        LeadershipNotAcquired,
        Runnable,
        run_until_signalled,
    )

__all__ = [
    "FileWatcher",
    "InForce",
    "LeaderElectedService",
    "LeaderElector",
    "LeadershipNotAcquired",
    "LeaseSettings",
    "PolicyReloadMetrics",
    "Runnable",
    "StartupError",
    "add_health_flags",
    "add_leader_election_flags",
    "configured",
    "default_identity",
    "default_lease_namespace",
    "health_listener",
    "kube_client",
    "lease_settings_from_args",
    "policy_in_force",
    "run_component",
    "run_until_signalled",
    "serve_until_stopped",
    "stop_on_signals",
    "until_signalled",
]

# Each name loaded on first use, with its module (PEP 562).
__getattr__ = load_on_use(
    __name__,
    {
        "filewatch": ("FileWatcher",),
        "leader_election": ("LeaderElector",),
        "in_force": ("InForce",),
        "policy_reload": ("PolicyReloadMetrics", "policy_in_force"),
        "service": (
            "LeaderElectedService",
            "LeadershipNotAcquired",
            "Runnable",
            "run_until_signalled",
        ),
    },
    globals(),
)

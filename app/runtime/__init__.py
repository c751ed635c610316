"""What every long-running component shares, one floor above the API adapter.

- ``service``: the leader-elected service skeleton (caches, watchers, health server,
  Lease; the one status shape), ``run_once`` for a single unit of work, and running
  until SIGTERM;
- ``leader_election``: the ``coordination.k8s.io/v1`` Lease election and its flags;
- ``filewatch``: reloading a configuration file when it changes;
- ``policy_reload``: the policy a component starts with (``--policy`` or the
  default), its watcher and reload metrics.

The health server itself is ``app/health`` (a floor down): the extender serves it too.
"""

from app.runtime.filewatch import FileWatcher
from app.runtime.leader_election import (
    LeaderElector,
    LeaseSettings,
    add_leader_election_flags,
    default_identity,
    default_lease_namespace,
    lease_settings_from_args,
)
from app.runtime.policy_reload import PolicyReloadMetrics, PolicyWatcher, starting_policy
from app.runtime.service import (
    LeaderElectedService,
    LeadershipNotAcquired,
    Runnable,
    add_health_flags,
    run_until_signalled,
)

__all__ = [
    "FileWatcher",
    "LeaderElectedService",
    "LeaderElector",
    "LeadershipNotAcquired",
    "LeaseSettings",
    "PolicyReloadMetrics",
    "PolicyWatcher",
    "Runnable",
    "add_health_flags",
    "add_leader_election_flags",
    "default_identity",
    "default_lease_namespace",
    "lease_settings_from_args",
    "run_until_signalled",
    "starting_policy",
]

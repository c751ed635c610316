"""The real-load descheduling planner: pure functions from a cluster view to a plan.

No I/O and no client: the descheduler loop (``app/descheduler``) and the simulator
build a ``ClusterView`` from their caches and call ``plan``. Modules, one job each,
in the order a plan is made:

- ``view``: what the planner is given (``ClusterView``);
- ``config``: the configuration schema (the descheduler reads the file);
- ``agreement``: whether its thresholds and the scheduler's load filter agree;
- ``usage``: where a pod's usage comes from (Prometheus, or its requests);
- ``measure``: each node's usage per resource, through the load model;
- ``convergence``: usage the samples do not show yet;
- ``classes``: node classes; ``debounce``: the consecutive hot rounds kept between
  runs, for the descheduler's state and the simulator alike;
- ``victims``: protections, the autoscalers' opt-outs and order;
- ``attribution``: a source's excess attributed to the pods above their requests
  (what pods within theirs may relieve, and the node's report when they may not);
- ``fit``: node selector, affinity, taints; ``placement``: inter-pod affinity and
  topology spread for a replacement; ``kube_scheduler``: where a request-based
  kube-scheduler puts a replacement, reading ``rule_masks`` (the node rules per node);
- ``destinations``: where an evicted pod can go;
- ``run_guards``: the run's guards (per node, namespace, workload, PDB);
- ``outcome``: what the planner returns; ``plan``: the orchestration;
- ``consolidation``: the nodes to drain for a node autoscaler to remove;
  ``drain_taint``: the taint that marks a node being drained, and since when;
  ``packing_rooms``: its destinations, fullest first, and the floor's totals;
- ``render``: the dry-run table;
- ``aftermath``: settleTime after a move, whether it helped; ``backoff``: where
  recent moves did not help, the nodes and workloads left alone.

Each module lists its names once, in its ``__all__``. The configuration, the
outcome's types and the small rules load at once; the planner itself (``plan``,
``replacement_scheduler``, ``consolidation``, ``drain_taint``, ``render``: numpy and the load model,
about a tenth of a second) on first use, so that reading a configuration or a
scenario, or stopping at a bad one, never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.objects import load_modules_on_use
from app.rebalance.aftermath import *  # noqa: F403
from app.rebalance.agreement import *  # noqa: F403
from app.rebalance.backoff import *  # noqa: F403
from app.rebalance.config import *  # noqa: F403
from app.rebalance.debounce import *  # noqa: F403
from app.rebalance.fit import *  # noqa: F403
from app.rebalance.outcome import *  # noqa: F403
from app.rebalance.victims import *  # noqa: F403
from app.rebalance.view import *  # noqa: F403

if TYPE_CHECKING:
    from app.rebalance.consolidation import *  # noqa: F403
    from app.rebalance.drain_taint import *  # noqa: F403
    from app.rebalance.plan import *  # noqa: F403
    from app.rebalance.render import *  # noqa: F403
    from app.rebalance.replacement_scheduler import *  # noqa: F403
    from app.rebalance.rise import *  # noqa: F403

# Each name loaded on first use, with its module (PEP 562). ``plan`` is the name of a
# module and of the function it holds: the front sets the function over the module as
# the module loads, so import the module itself only through this front.
__getattr__ = load_modules_on_use(
    __name__,
    (
        "replacement_scheduler",
        "consolidation",
        "drain_taint",
        "plan",
        "render",
        "rise",
    ),
    globals(),
)

"""The real-load descheduling planner: pure functions from a cluster view to a plan.

No I/O and no client: the descheduler loop (``app/descheduler``) and the simulator
build a ``ClusterView`` from their caches and call ``plan``. Modules, one job each:
``config`` (the configuration schema; the descheduler reads the file), ``usage``
(where a pod's usage comes from), ``classes`` (node classes and debounce),
``debounce`` (the consecutive hot rounds kept between runs, for the descheduler's
memory and the simulator alike), ``convergence`` (usage the samples do not show yet),
``victims`` (protections and order), ``fit`` (node selector, affinity, taints),
``destinations`` (where an evicted pod can go), ``plan`` (the orchestration) and
``render`` (the dry-run table).
"""

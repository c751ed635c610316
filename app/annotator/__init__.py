"""``loadaware annotator``: node load from Prometheus, written into node annotations.

One job per module:

- ``schedule``: which metrics are due when (pure);
- ``sync``: one tick, one query per due metric and one patch per node;
- ``metric_loop``: while leading, a tick whenever metrics fall due, and each metric's
  last success and error;
- ``bindings``: a listener on the shared pod cache: binding windows and hot values;
- ``hotvalue``: which nodes need their ``node_hot_value`` rewritten (pure);
- ``softtaints``: with ``--soft-taints``, loadaware's ``PreferNoSchedule`` taint kept
  on the hot nodes by the load model's rule (``app.load.taints``);
- ``telemetry``: the ``loadaware_annotator_*`` metrics;
- ``leading``: the writing loops while leading, each round and its pause;
- ``annotator``: the parts wired together; ``main``: flags and process lifecycle.

What it shares with the descheduler lives floors down: the node and pod caches and
annotation patching in ``app/kube``, the leader-elected service skeleton (``/healthz``,
``/readyz``, ``/metrics``, Lease, status) in ``app/runtime``.
"""

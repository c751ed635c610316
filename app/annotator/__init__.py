"""``loadaware annotator``: node load from Prometheus, written into node annotations.

One job per module:

- ``schedule``: which metrics are due when (pure);
- ``sync``: one tick, one query per due metric and one patch per node;
- ``patcher``: bounded-concurrency merge patches with 404/409/5xx handling;
- ``bindings``: pod watch to per-node binding windows to hot values;
- ``hotvalue``: which nodes need their ``node_hot_value`` rewritten (pure);
- ``leader``: Lease-based leader election;
- ``server``: ``/healthz``, ``/readyz``, ``/metrics``;
- ``telemetry``: the ``loadaware_annotator_*`` metrics;
- ``runtime``: the parts wired together; ``main``: flags and process lifecycle.
"""

"""``loadaware annotator``: node load from Prometheus, written into node annotations.

One job per module:

- ``schedule``: which metrics are due when (pure);
- ``sync``: one tick, one query per due metric and one patch per node;
- ``bindings``: a listener on the shared pod cache: binding windows and hot values;
- ``hotvalue``: which nodes need their ``node_hot_value`` rewritten (pure);
- ``server``: ``/healthz``, ``/readyz``, ``/metrics``;
- ``telemetry``: the ``loadaware_annotator_*`` metrics;
- ``runtime``: the parts wired together; ``main``: flags and process lifecycle.

Kubernetes access it shares with other components lives in ``app/kube``: the node and
pod caches, annotation patching and Lease-based leader election.
"""

"""``loadaware descheduler``: the loop that evicts pods from nodes hot on real usage.

The decisions are made by the pure planner in ``app/rebalance``; this package is the
I/O around it: caches, Prometheus, Events, evictions, leader election and metrics.
"""

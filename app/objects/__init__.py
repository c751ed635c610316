"""The ground floor: pure values every other floor shares.

Quantities and resources, durations, the views of nodes, pods and
PodDisruptionBudgets, label selectors, eviction records and the one pod-demand rule.
Frozen dataclasses and pure functions; nothing here imports anything else of the
project, so policy, load, kube, prom, rebalance and every component can build on it.
"""

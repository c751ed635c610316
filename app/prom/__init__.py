"""Prometheus access: instant queries (``client``) and matching series to nodes (``matching``)."""

"""``loadaware capture``: a live cluster and its Prometheus history as a scenario."""

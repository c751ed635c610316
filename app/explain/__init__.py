"""``loadaware explain``: why a pod goes where it goes, and what the descheduler sees.

A command, not a component: it reads the cluster once (``cluster``), runs the same
pure code the components run on what it read (``pod``: the load model with the
extender's estimate; ``node``: the descheduler's planner), and prints the answer
(``render``). It never writes to the cluster; the read-only RBAC it needs is
``deploy/base/explain-rbac.yaml`` (``app/kube/permissions.py``, ``EXPLAIN``).
"""

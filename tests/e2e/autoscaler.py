"""A stand-in for a node autoscaler's scale-down, for the consolidation tests.

No cluster autoscaler or Karpenter can run here (no cloud, no node groups), so this
does the one part of their work consolidation relies on: a Node that has been empty
for ``empty_for_s`` is deleted, as the cluster autoscaler removes a node empty for
``--scale-down-unneeded-time`` and Karpenter one empty for ``consolidateAfter``.

*Empty* is as both autoscalers count it: no pod bound to the node but DaemonSet pods,
mirror pods and pods that are finished or being deleted. A node annotated
``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` or
``karpenter.sh/do-not-disrupt: "true"`` is never removed. Only the test's own Nodes
(``TEST_LABEL``) are looked at. It scales nothing up, and removes no node that still
has pods (the autoscalers' request-based scale-down of underused nodes is theirs, and
not what the tests measure).

It polls the API server every ``poll_s`` from a thread, and records what it deleted
and when (``removed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod

from tests.e2e.harness import TEST_LABEL

KEEP_ANNOTATIONS = {
    "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true",
    "karpenter.sh/do-not-disrupt": "true",
}


def counts_for_scale_down(pod: Pod) -> bool:
    """Whether ``pod`` keeps its node from being empty."""
    metadata = pod.metadata
    if metadata is None or metadata.deletionTimestamp is not None:
        return False
    if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
        return False
    annotations = metadata.annotations or {}
    if "kubernetes.io/config.mirror" in annotations:
        return False
    owners = metadata.ownerReferences or []
    return not any(o.kind == "DaemonSet" for o in owners)


class StandInAutoscaler:
    def __init__(self, client: Client, empty_for_s: float, poll_s: float = 0.2) -> None:
        self.client = client
        self.empty_for_s = empty_for_s
        self.poll_s = poll_s
        self.empty_since: dict[str, float] = {}
        self.removed: dict[str, float] = {}  # node -> time.time() when deleted
        self._stop = threading.Event()
        self.error: Exception | None = None

    def step(self, now_s: float) -> None:
        busy = {
            pod.spec.nodeName
            for pod in self.client.list(Pod, namespace="*")
            if pod.spec is not None and pod.spec.nodeName and counts_for_scale_down(pod)
        }
        for node in self.client.list(Node, labels={TEST_LABEL: "true"}):
            name = node.metadata.name if node.metadata else None
            if not name or name in self.removed:
                continue
            annotations = (node.metadata.annotations if node.metadata else None) or {}
            kept = any(annotations.get(k) == v for k, v in KEEP_ANNOTATIONS.items())
            if kept or name in busy:
                self.empty_since.pop(name, None)
                continue
            since = self.empty_since.setdefault(name, now_s)
            if now_s - since >= self.empty_for_s:
                try:
                    self.client.delete(Node, name)
                except ApiError as error:
                    if error.status.code != 404:
                        raise
                self.removed[name] = time.time()

    def run(self) -> None:
        try:
            while not self._stop.wait(self.poll_s):
                self.step(time.monotonic())
        except Exception as error:  # told by running() to the test, not lost in the thread
            self.error = error

    @contextmanager
    def running(self) -> Iterator[StandInAutoscaler]:
        thread = threading.Thread(target=self.run, name="stand-in-autoscaler", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=10)
        if self.error is not None:
            raise AssertionError(f"the stand-in autoscaler failed: {self.error!r}")

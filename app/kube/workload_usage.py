"""What each workload's running pods use, one pod: one ConfigMap the annotator writes
and the extender reads.

The extender estimates a pod just bound from its requests and limits; a workload that
requests 100m and uses 0.7 core is estimated at 85m, and a wave of its pods piles onto
one node. So the annotator (its leader), each round, measures every running pod's usage
from Prometheus (``app.prom.read_pod_usage``, one query per resource), groups the pods
by workload (``app.objects.workload_key``: namespace, controller kind and name, a
ReplicaSet standing for its Deployment) and writes one pod's usage per workload
(``app.load.workload_per_pod_usage``) into one ConfigMap in its own namespace (default
``loadaware/loadaware-workload-usage``, key ``usage.json``), which its Role alone
grants it to write; the extender raises its estimate of a pod of that workload to it
(``app.load.estimate_scheduled``).

The document::

    {"version": 1, "publishedAt": 1700000000.0,
     "workloads": {"shop/Deployment/web": [0.71, 5.3e8, 12], ...}}

with CPU in cores, memory in bytes, and how many running pods were measured (the
bounds on the raise, ``app.load.estimate``: no more of a workload's pods raised at
once; an entry without the count, as an older annotator wrote it, raises nothing).
At most ``MAX_WORKLOADS`` workloads are kept, in at most ``MAX_DOCUMENT_BYTES``, taken
in turns by namespace and within one those with the most running pods first
(``fair_order``): a tenant with long names or many workloads can neither make the
document exceed a ConfigMap's 1 MiB nor push other namespaces out of it (issue 42,
point 2).

Reading is defensive (an operator may edit it, or a bug write garbage): a workload
whose key is not ``namespace/Kind/name`` or whose values are not two finite numbers in
``0..MAX_CPU_CORES`` and ``0..MAX_MEMORY_BYTES`` is skipped; more than
``MAX_WORKLOADS`` entries are cut there; a document that is not JSON, has another
version or no finite ``publishedAt``, or one dated more than ``FUTURE_SLACK_S`` ahead,
is unreadable (``WorkloadUsageUnreadable``), and the reader then estimates as if
nothing were published.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import ConfigMap

from app.kube.configmaps import OwnConfigMapStore, own_config_map
from app.kube.defaults import WORKLOAD_USAGE_MAX_AGE_S, WORKLOAD_USAGE_NAME
from app.objects import Resources

__all__ = [
    "PublishedUsage",
    "WorkloadUsageStore",
    "WorkloadUsageUnreadable",
]

USAGE_KEY = "usage.json"
VERSION = 1
DEFAULT_NAME = WORKLOAD_USAGE_NAME
MAX_WORKLOADS = 5000
MAX_CPU_CORES = 1024.0  # no node has more; a pod's usage beyond it is garbage
MAX_MEMORY_BYTES = 64 * 2.0**40  # 64 TiB
MAX_PODS = 1_000_000  # pods measured per workload: more is garbage, cut here
FUTURE_SLACK_S = 60.0  # clocks disagree a little; more than this ahead is not trusted
# A ConfigMap holds at most 1 MiB (data, keys and metadata together): the document keeps
# to 3/4 of that whatever its keys are (at most ~400 bytes an entry).
MAX_DOCUMENT_BYTES = 768 * 1024
_ENVELOPE_BYTES = 128  # version, publishedAt and the braces around the entries
DEFAULT_MAX_AGE_S = WORKLOAD_USAGE_MAX_AGE_S
# namespace (a DNS label) / Kind / name (at most 253 characters)
_KEY = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[A-Za-z][A-Za-z0-9]{0,62}/[^/\s]{1,253}$")


class WorkloadUsageUnreadable(ValueError):
    """The object exists but is not a workload-usage document."""


@dataclass(frozen=True)
class PublishedUsage:
    """One pod's usage per workload key, as published at ``published_at_s``."""

    published_at_s: float
    workloads: Mapping[str, Resources]
    # per workload, how many running pods were measured (0: not said)
    pods: Mapping[str, int] = field(default_factory=dict)

    def observed(self, workload: str | None) -> Resources | None:
        return self.workloads.get(workload) if workload is not None else None


def fair_order(keys: Iterable[str]) -> list[int]:
    """The positions of ``keys`` (``namespace/...``, most important first) taken in
    turns by namespace: every namespace's first, then every namespace's second, ...;
    namespaces in the order their first key comes. So a tenant with many entries
    cannot push another namespace's first ones out of a bounded document."""
    rank_in: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    order: list[tuple[int, int, int]] = []
    for position, key in enumerate(keys):
        namespace = key.split("/", 1)[0]
        rank = rank_in.get(namespace, 0)
        rank_in[namespace] = rank + 1
        first_seen.setdefault(namespace, len(first_seen))
        order.append((rank, first_seen[namespace], position))
    return [position for _, _, position in sorted(order)]


def encode(workloads: Iterable[tuple[str, Resources, int]], now_s: float) -> str:
    """The document for ``workloads`` (key, one pod's usage, pods measured; most
    important first), published at ``now_s``:
    keys a reader would skip are left out, the rest taken in turns by namespace
    (``fair_order``) while there are at most ``MAX_WORKLOADS`` and the document stays
    within ``MAX_DOCUMENT_BYTES`` (a ConfigMap holds at most 1 MiB): no entry, and no
    tenant, can make the document unwritable."""
    entries = [(key, usage, pods) for key, usage, pods in workloads if _KEY.match(key)]
    kept: dict[str, list[float]] = {}
    size = _ENVELOPE_BYTES
    for position in fair_order(key for key, _, _ in entries):
        if len(kept) >= MAX_WORKLOADS:
            break
        key, usage, pods = entries[position]
        value = [round(usage.cpu_cores, 6), round(usage.memory_bytes), pods]
        entry_bytes = len(json.dumps({key: value}, separators=(",", ":")))
        if size + entry_bytes > MAX_DOCUMENT_BYTES:
            continue  # a shorter key may still fit
        size += entry_bytes
        kept[key] = value
    document = {"version": VERSION, "publishedAt": now_s, "workloads": kept}
    return json.dumps(document, separators=(",", ":"))


def decode(text: str, now_s: float) -> tuple[PublishedUsage, int]:
    """The published usage and how many entries were skipped (module doc).

    Raises WorkloadUsageUnreadable for a document that cannot be trusted at all."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise WorkloadUsageUnreadable(f"not JSON ({error})") from None
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise WorkloadUsageUnreadable(f"not a version {VERSION} workload-usage document")
    published_at_s = _finite(document.get("publishedAt"))
    if published_at_s is None:
        raise WorkloadUsageUnreadable("publishedAt is not a number")
    if published_at_s > now_s + FUTURE_SLACK_S:
        raise WorkloadUsageUnreadable("publishedAt lies in the future")
    entries = document.get("workloads")
    if not isinstance(entries, dict):
        raise WorkloadUsageUnreadable("workloads is not a map")
    workloads: dict[str, Resources] = {}
    pods: dict[str, int] = {}
    skipped = 0
    for key, value in entries.items():
        usage = _usage(value)
        if len(workloads) >= MAX_WORKLOADS or usage is None or not _KEY.match(key):
            skipped += 1
            continue
        workloads[key] = usage
        pods[key] = _pods(value)
    published = PublishedUsage(published_at_s, MappingProxyType(workloads), MappingProxyType(pods))
    return published, skipped


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _usage(value: Any) -> Resources | None:
    if not isinstance(value, list) or len(value) not in (2, 3):
        return None
    cpu, memory = _finite(value[0]), _finite(value[1])
    if cpu is None or memory is None:
        return None
    if not (0 <= cpu <= MAX_CPU_CORES and 0 <= memory <= MAX_MEMORY_BYTES):
        return None
    return Resources(cpu, memory)


def _pods(value: list[Any]) -> int:
    """The entry's count of measured pods; 0 where it has none or a bad one."""
    pods = value[2] if len(value) == 3 else 0
    if isinstance(pods, bool) or not isinstance(pods, int):
        return 0
    return min(max(pods, 0), MAX_PODS)


class WorkloadUsageStore(OwnConfigMapStore):
    """Reads and writes the ConfigMap: the annotator ``get``, ``create`` and ``update``
    in its own namespace, the extender ``get`` (app/kube/permissions.py)."""

    default_name = DEFAULT_NAME

    async def read(self, now_s: float) -> tuple[PublishedUsage, int] | None:
        """What is published and how many entries were skipped; None: no object.

        Raises what the client raises, and WorkloadUsageUnreadable."""
        try:
            stored = await self._client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as error:
            if error.status.code == 404:
                return None
            raise
        return decode((stored.data or {}).get(USAGE_KEY, ""), now_s)

    async def publish(
        self, workloads: Iterable[tuple[str, Resources, int]], now_s: float
    ) -> PublishedUsage:
        """Write the document (replace, or create the object on first use) and return
        it as a reader decodes it (rounded, cut at ``MAX_WORKLOADS``); raises what the
        client raises. One writer (the leader) at a time: the last write wins."""
        text = encode(workloads, now_s)
        body = own_config_map(self.name, self.namespace, "annotator", {USAGE_KEY: text})
        try:
            await self._client.replace(body)
        except ApiError as error:
            if error.status.code != 404:
                raise
            await self._client.create(body)
        return decode(text, now_s)[0]

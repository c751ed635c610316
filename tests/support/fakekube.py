"""A small fake Kubernetes API server for tests.

It speaks the real REST wire protocol (JSON over HTTP/1.1 on loopback), so the
production client library, lightkube, talks to it unchanged. It serves only
what loadaware uses: nodes, pods (with the binding and eviction subresources),
PodDisruptionBudgets, events (core/v1 and events.k8s.io/v1) and leases, with
list, watch, get, create, replace, patch and delete.

Where the real server has a documented behaviour that clients depend on, the
fake copies it: Status error bodies, 410 Expired as an ERROR watch event, 429
from evictions blocked by a PDB, 409 on resourceVersion conflicts, 422 when a
JSON patch cannot be applied, status reset on create of pods and PDBs, no new
resourceVersion for a no-op update.

Known simplifications: strategic merge patch replaces lists instead of
merging them by key; deletes (and evictions) take effect at once, without a
grace period; core/v1 and events.k8s.io/v1 events are stored apart, without
conversion; bodies are JSON only (no YAML, protobuf or server-side apply);
namespaces need not exist; there is no validation or admission beyond what is
noted in the code; list continue tokens do not pin a snapshot.

Layout: selectors and patches (pure functions), the store (objects, event
history, open watches), fault injection and the request log, the ASGI app,
and the uvicorn runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import fnmatch
import re
import secrets
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson
import uvicorn
from starlette.datastructures import Headers, QueryParams
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

JSON = dict[str, Any]

__all__ = [
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "NODES",
    "PDBS",
    "PODS",
    "ApiProblem",
    "FakeKubeApp",
    "FakeKubeServer",
    "FakeKubeStore",
    "Faults",
    "RecordedRequest",
    "RequestLog",
    "ResourceType",
]


# --------------------------------------------------------------------------
# Resource types


@dataclass(frozen=True)
class ResourceType:
    """One REST resource the fake serves, with the facts the handlers need."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    #: Whether the resource has a /status subresource. For those, the real
    #: server ignores status changes sent to the main resource and vice versa.
    has_status: bool = False
    #: Pods answer DELETE with the object itself; most resources with a Status.
    returns_deleted_object: bool = False
    #: Field selectors the real server accepts for this resource, beyond
    #: metadata.name and metadata.namespace.
    fields: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """Name used in real error messages, e.g. 'leases.coordination.k8s.io'."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str, uid: str | None = None) -> JSON:
        """StatusDetails as the real server fills them (kind holds the plural)."""
        out: JSON = {"name": name}
        if self.group:
            out["group"] = self.group
        out["kind"] = self.plural
        if uid:
            out["uid"] = uid
        return out


NODES: Final = ResourceType(
    "", "v1", "nodes", "Node", namespaced=False, has_status=True,
    fields=frozenset({"spec.unschedulable"}),
)
PODS: Final = ResourceType(
    "", "v1", "pods", "Pod", namespaced=True, has_status=True, returns_deleted_object=True,
    fields=frozenset({
        "spec.nodeName", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
        "spec.restartPolicy", "status.phase", "status.podIP", "status.nominatedNodeName",
    }),
)
PDBS: Final = ResourceType(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True,
    has_status=True,
)
EVENTS: Final = ResourceType(
    "", "v1", "events", "Event", namespaced=True,
    fields=frozenset({
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "type",
    }),
)
EVENTS_V1: Final = ResourceType(
    "events.k8s.io", "v1", "events", "Event", namespaced=True,
    fields=frozenset({
        "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
        "reason", "reportingController", "type",
    }),
)
LEASES: Final = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CONFIGMAPS: Final = ResourceType("", "v1", "configmaps", "ConfigMap", namespaced=True)
#: The pods/binding subresource also exists as a plain "bindings" collection.
BINDINGS: Final = ResourceType("", "v1", "bindings", "Binding", namespaced=True)

_SERVED: Final = (NODES, PODS, PDBS, EVENTS, EVENTS_V1, LEASES, CONFIGMAPS, BINDINGS)
_BY_PATH: Final = {(r.group, r.version, r.plural): r for r in _SERVED}


# --------------------------------------------------------------------------
# Errors: every failure leaves the server as a k8s Status object

_REASONS: Final = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
    504: "Timeout",
}

PATCH_TYPES: Final = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def status_body(code: int, message: str = "", reason: str = "", details: JSON | None = None,
                *, success: bool = False) -> JSON:
    """A meta/v1 Status with the real server's field order and omissions."""
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                  "status": "Success" if success else "Failure"}
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    if code:
        body["code"] = code
    return body


class ApiProblem(Exception):
    """An error answer. Raised anywhere below the app; rendered as a Status."""

    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def body(self) -> JSON:
        return status_body(self.code, self.message, self.reason, self.details)


def bad_request(message: str) -> ApiProblem:
    return ApiProblem(400, "BadRequest", message)


def invalid(message: str) -> ApiProblem:
    return ApiProblem(422, "Invalid", message)


def not_found(rt: ResourceType, name: str) -> ApiProblem:
    return ApiProblem(404, "NotFound", f'{rt.qualified} "{name}" not found', rt.details(name))


def already_exists(rt: ResourceType, name: str) -> ApiProblem:
    return ApiProblem(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists',
                      rt.details(name))


def conflict(what: str, name: str, why: str, details: JSON | None = None) -> ApiProblem:
    return ApiProblem(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {why}',
                      details)


def stale_object(rt: ResourceType, name: str) -> ApiProblem:
    return conflict(rt.qualified, name, "the object has been modified; please apply your "
                    "changes to the latest version and try again", rt.details(name))


# --------------------------------------------------------------------------
# Label and field selectors

_SET_TERM = re.compile(r"^(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_EQ_TERM = re.compile(r"^(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)$")
_EXISTS_TERM = re.compile(r"^(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)$")


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector: key op values."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return has and value in self.values
        if self.op in ("!=", "notin"):
            # As in the real server, a missing label satisfies a negative term.
            return not has or value not in self.values
        return has if self.op == "exists" else not has


def _split_terms(text: str) -> list[str]:
    """Split a selector on commas that are not inside 'in (a,b)' parentheses."""
    terms: list[str] = []
    depth = start = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    reqs = []
    for term in _split_terms(text):
        if m := _SET_TERM.match(term):
            values = tuple(v.strip() for v in m["values"].split(",") if v.strip())
            reqs.append(Requirement(m["key"], m["op"], values))
        elif m := _EQ_TERM.match(term):
            op = "!=" if m["op"] == "!=" else "="
            reqs.append(Requirement(m["key"], op, (m["value"],)))
        elif m := _EXISTS_TERM.match(term):
            reqs.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {term!r}")
    return tuple(reqs)


def parse_field_selector(rt: ResourceType, text: str) -> tuple[Requirement, ...]:
    allowed = rt.fields | {"metadata.name", "metadata.namespace"}
    reqs = []
    for term in _split_terms(text):
        m = _EQ_TERM.match(term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        if m["key"] not in allowed:
            raise bad_request(f"field label not supported: {m['key']}")
        op = "!=" if m["op"] == "!=" else "="
        reqs.append(Requirement(m["key"], op, (m["value"],)))
    return tuple(reqs)


def field_value(obj: JSON, path: str) -> str:
    """A field as the real server compares it: missing is '', booleans lowercase."""
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def label_selector_matches(selector: JSON | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector object (as in a PDB spec). Null selects nothing."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            return False
        if not Requirement(expr["key"], op, tuple(expr.get("values") or ())).matches(labels):
            return False
    return True


@dataclass(frozen=True)
class Filter:
    """What a list or watch selects: a namespace (None for all) plus selectors."""

    namespace: str | None = None
    labels: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    @classmethod
    def from_query(cls, rt: ResourceType, namespace: str | None, query: QueryParams) -> Filter:
        return cls(
            namespace=namespace,
            labels=parse_label_selector(query.get("labelSelector", "")),
            fields=parse_field_selector(rt, query.get("fieldSelector", "")),
        )

    def matches(self, obj: JSON) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        labels = meta.get("labels") or {}
        if not all(req.matches(labels) for req in self.labels):
            return False
        return all(
            req.matches({req.key: field_value(obj, req.key)}) for req in self.fields
        )


# --------------------------------------------------------------------------
# Patches


class PatchError(Exception):
    """A well-formed JSON patch that cannot be applied; the real server says 422."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes a key, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: Any) -> list[str]:
    """RFC 6901 pointer tokens; '~1' is '/' and '~0' is '~' (in that order)."""
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchError(f"invalid JSON pointer: {path!r}")
    if not path:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(token: str, size: int, *, for_insert: bool = False) -> int:
    if for_insert and token == "-":
        return size
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index: {token!r}")
    index = int(token)
    if index > (size if for_insert else size - 1):
        raise PatchError(f"array index out of range: {index}")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token)
    return node


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"missing value at {token!r}")
        return node[token]
    if isinstance(node, list):
        return node[_index(token, len(node))]
    raise PatchError(f"cannot descend into a scalar at {token!r}")


def _get(doc: Any, tokens: list[str]) -> Any:
    return _child(_parent(doc, tokens), tokens[-1]) if tokens else doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), for_insert=True), value)
    else:
        raise PatchError(f"cannot add to a scalar at {last!r}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    _child(parent, last)  # must exist
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[_index(last, len(parent))]
    return doc


def _same_json(a: Any, b: Any) -> bool:
    # Python's == says True == 1; JSON does not.
    sort = orjson.OPT_SORT_KEYS
    return orjson.dumps(a, option=sort) == orjson.dumps(b, option=sort)


def _value(op: JSON) -> Any:
    if "value" not in op:
        raise PatchError(f"operation {op.get('op')!r} has no value")
    return copy.deepcopy(op["value"])


def _apply_op(doc: Any, op: JSON) -> Any:
    kind, tokens = op.get("op"), _pointer(op.get("path"))
    if kind == "add":
        return _add(doc, tokens, _value(op))
    if kind == "remove":
        return _remove(doc, tokens)
    if kind == "replace":
        _get(doc, tokens)  # must exist
        return _add(_remove(doc, tokens), tokens, _value(op)) if tokens else _value(op)
    if kind in ("move", "copy"):
        source = _pointer(op.get("from"))
        value = copy.deepcopy(_get(doc, source))
        if kind == "move":
            doc = _remove(doc, source)
        return _add(doc, tokens, value)
    if kind == "test":
        if not _same_json(_get(doc, tokens), _value(op)):
            raise PatchError(f"testing value {op.get('path')} failed: test failed")
        return doc
    raise PatchError(f"unexpected kind: {kind!r}")


def json_patch(doc: Any, ops: list[JSON]) -> Any:
    """RFC 6902 on a copy of doc; raises PatchError and leaves doc untouched."""
    result = copy.deepcopy(doc)
    for op in ops:
        result = _apply_op(result, op)
    return result


def apply_patch(content_type: str, current: JSON, patch: Any) -> JSON:
    """Apply a PATCH body of one of PATCH_TYPES; raise ApiProblem as the real server would."""
    if content_type == "application/json-patch+json":
        if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
            raise bad_request("a JSON patch must be an array of operations")
        try:
            result = json_patch(current, patch)
        except PatchError as exc:
            raise invalid(str(exc)) from exc
    else:
        # Strategic merge patch is a merge patch here. That is exact for maps
        # (metadata, annotations, labels); unlike the real server it replaces
        # lists instead of merging them by key.
        if not isinstance(patch, dict):
            raise bad_request("invalid JSON merge patch: the patch must be a JSON object")
        result = merge_patch(current, patch)
    if not isinstance(result, dict):
        raise invalid("the patched object is not a JSON object")
    return result


# --------------------------------------------------------------------------
# Store


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _check_shape(obj: JSON) -> None:
    """Reject what the real server cannot decode into its typed objects."""
    if not isinstance(obj.get("metadata", {}), dict):
        raise bad_request("json: cannot unmarshal metadata: expected an object")
    for kind in ("labels", "annotations"):
        values = _meta(obj).get(kind)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise bad_request(f"json: cannot unmarshal metadata.{kind}: values must be strings")


class _Signal(enum.Enum):
    BOOKMARK = "BOOKMARK"
    CLOSE = "CLOSE"


@dataclass(frozen=True)
class WatchEvent:
    """A change in the history. old is the previous state, kept for MODIFIED."""

    rv: int
    type: str
    rt: ResourceType
    obj: JSON
    old: JSON | None = None

    def view(self, flt: Filter) -> tuple[str, JSON] | None:
        """The event as a watch with flt sees it.

        Like the real server, an object that moves into a selection arrives as
        ADDED and one that moves out of it leaves as DELETED.
        """
        now = flt.matches(self.obj)
        if self.type != "MODIFIED":
            return (self.type, self.obj) if now else None
        before = self.old is not None and flt.matches(self.old)
        if now:
            return ("MODIFIED" if before else "ADDED", self.obj)
        return ("DELETED", self.obj) if before else None


class Expired(Exception):
    """A watch asked for a resourceVersion older than the kept history."""


class Watch:
    """One open watch: its queue lives on the server's event loop and is fed
    from whichever thread changed the store."""

    def __init__(self, rt: ResourceType, flt: Filter, loop: asyncio.AbstractEventLoop,
                 initial: list[WatchEvent]) -> None:
        self.rt = rt
        self.filter = flt
        self.initial = initial
        self.queue: asyncio.Queue[WatchEvent | _Signal] = asyncio.Queue()
        self._loop = loop

    def push(self, item: WatchEvent | _Signal) -> bool:
        """Queue item from any thread; False once the loop is gone."""
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            return False
        return True


_Key = tuple[ResourceType, str, str]


class FakeKubeStore:
    """In-memory objects with a global resourceVersion, a bounded event
    history and the open watches.

    Thread-safe: tests seed and inspect from their own thread while the server
    runs on its loop thread. Stored dicts are never mutated in place (every
    change stores a new dict), so history entries and watch events can be read
    without the lock. Everything handed out is a deep copy.
    """

    def __init__(self, history_limit: int = 1000) -> None:
        self._lock = threading.RLock()
        self._objects: dict[_Key, JSON] = {}
        self._rv = 0
        self._history: deque[WatchEvent] = deque(maxlen=history_limit)
        # A watch from a resourceVersion below this needs forgotten events: 410.
        self._expired_below = 0
        self._watches: set[Watch] = set()

    # ---- primitives with API semantics (used by the app, usable by tests)

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def insert(self, rt: ResourceType, namespace: str, obj: JSON, *, dry_run: bool = False,
               as_given: bool = False) -> JSON:
        """Create obj (ADDED event). Fills uid, resourceVersion, creationTimestamp (kept
        when ``as_given`` and set: seeding an object that has existed a while)."""
        obj = copy.deepcopy(obj)
        _check_shape(obj)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            name = meta.get("name") or self._generate_name(rt, namespace, meta.get("generateName"))
            if (rt, namespace, name) in self._objects:
                raise already_exists(rt, name)
            created = meta.get("creationTimestamp") if as_given else None
            meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=created or _now())
            if rt.namespaced:
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
            if dry_run:
                return obj
            meta["resourceVersion"] = str(self._bump())
            self._objects[(rt, namespace, name)] = obj
            self._record("ADDED", rt, obj)
            return copy.deepcopy(obj)

    def read(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        with self._lock:
            return copy.deepcopy(self._require(rt, namespace, name))

    def select(self, rt: ResourceType, flt: Filter = Filter()) -> tuple[list[JSON], int]:
        """Matching objects sorted by namespace and name, and the list's resourceVersion."""
        with self._lock:
            found = [(k[1], k[2], o) for k, o in self._objects.items() if k[0] is rt]
            found.sort(key=lambda item: (item[0], item[1]))
            return [copy.deepcopy(o) for _, _, o in found if flt.matches(o)], self._rv

    def update(self, rt: ResourceType, namespace: str, name: str,
               change: Callable[[JSON], JSON], *, dry_run: bool = False) -> JSON:
        """Replace an object by change(copy of current) (MODIFIED event).

        A metadata.resourceVersion in the result that differs from the stored
        one is a precondition failure (409), as with the real server's PUT and
        PATCH. Server-owned metadata cannot be changed. An update that changes
        nothing is not written and gets no new resourceVersion.
        """
        with self._lock:
            current = self._require(rt, namespace, name)
            proposed = change(copy.deepcopy(current))
            return self._write(rt, current, proposed, dry_run=dry_run)

    def remove(self, rt: ResourceType, namespace: str, name: str, *, dry_run: bool = False) -> JSON:
        """Delete an object at once (DELETED event); returns its final state."""
        with self._lock:
            current = self._require(rt, namespace, name)
            if dry_run:
                return copy.deepcopy(current)
            del self._objects[(rt, namespace, name)]
            gone = copy.deepcopy(current)
            gone["metadata"]["resourceVersion"] = str(self._bump())
            self._record("DELETED", rt, gone)
            return copy.deepcopy(gone)

    def evict(self, namespace: str, name: str, *, dry_run: bool = False) -> None:
        """The eviction subresource: check and charge the pod's PDB, then delete.

        Like the real server, pods that are Pending, Succeeded or Failed are
        deleted without consulting PDBs, and a pod selected by more than one
        PDB cannot be evicted at all.
        """
        with self._lock:
            pod = self._require(PODS, namespace, name)
            phase = (pod.get("status") or {}).get("phase")
            if phase not in ("Pending", "Succeeded", "Failed"):
                labels = _meta(pod).get("labels") or {}
                budgets = [
                    pdb for (rt, ns, _), pdb in self._objects.items()
                    if rt is PDBS and ns == namespace
                    and label_selector_matches((pdb.get("spec") or {}).get("selector"), labels)
                ]
                if len(budgets) > 1:
                    raise ApiProblem(500, "", "This pod has more than one PodDisruptionBudget, "
                                     "which the eviction subresource does not support.")
                if budgets:
                    self._spend_disruption(budgets[0], name, dry_run=dry_run)
            if not dry_run:
                self.remove(PODS, namespace, name)

    def bind(self, namespace: str, name: str, node: str, *,
             annotations: Mapping[str, str] | None = None, dry_run: bool = False) -> JSON:
        """The binding subresource: set spec.nodeName once and merge the
        Binding's annotations into the pod, as the real server does (MODIFIED event)."""

        def assign(pod: JSON) -> JSON:
            if annotations:
                pod["metadata"].setdefault("annotations", {}).update(annotations)
            spec = pod.setdefault("spec", {})
            if spec.get("nodeName"):
                raise conflict("pods/binding", name, f'pod {name} is already assigned to node '
                               f'"{spec["nodeName"]}"')
            spec["nodeName"] = node
            conditions = pod.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastTransitionTime": _now()})
            return pod

        return self.update(PODS, namespace, name, assign, dry_run=dry_run)

    # ---- watches

    def open_watch(self, rt: ResourceType, flt: Filter, since: int | None,
                   loop: asyncio.AbstractEventLoop) -> Watch:
        """Start a watch from resourceVersion since.

        since None or 0 starts with a synthetic ADDED event per current object,
        as the real server does; otherwise the history after since is replayed.
        Taking the history and registering happen under one lock, so no event
        is lost or doubled between them.
        """
        with self._lock:
            if since and since < self._expired_below:
                raise Expired(f"too old resource version: {since} ({self._expired_below})")
            if since:
                initial = [e for e in self._history if e.rt is rt and e.rv > since]
            else:
                initial = [
                    WatchEvent(int(o["metadata"]["resourceVersion"]), "ADDED", rt, o)
                    for o in self.select(rt)[0]
                ]
            watch = Watch(rt, flt, loop, initial)
            self._watches.add(watch)
            return watch

    def release_watch(self, watch: Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    @property
    def open_watches(self) -> int:
        with self._lock:
            return len(self._watches)

    def compact(self) -> None:
        """Forget the event history, like etcd compaction.

        Every resourceVersion handed out so far becomes too old: a watch that
        resumes from one gets 410 Expired and must relist. The counter moves on
        by one so that a list made after compact() returns a version that can
        be watched from.
        """
        with self._lock:
            self._history.clear()
            self._expired_below = self._bump()

    def close_watches(self) -> None:
        """End every open watch stream normally (clients reconnect from their last version)."""
        self._signal(_Signal.CLOSE)

    def bookmark(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to watches that allow them."""
        self._signal(_Signal.BOOKMARK)

    # ---- seeding and inspection helpers for tests (no API-only rules applied)

    def add(self, rt: ResourceType, obj: JSON) -> JSON:
        """Store obj as given (status and creationTimestamp included), with an ADDED
        event."""
        namespace = (_meta(obj).get("namespace") or "default") if rt.namespaced else ""
        return self.insert(rt, namespace, obj, as_given=True)

    def get(self, rt: ResourceType, name: str, namespace: str = "") -> JSON | None:
        with self._lock:
            obj = self._objects.get((rt, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def modify(self, rt: ResourceType, name: str, mutate: Callable[[JSON], None],
               namespace: str = "") -> JSON:
        """Change an object in place through mutate(obj) (MODIFIED event)."""

        def change(obj: JSON) -> JSON:
            mutate(obj)
            return obj

        return self.update(rt, namespace, name, change)

    def delete(self, rt: ResourceType, name: str, namespace: str = "") -> JSON:
        return self.remove(rt, namespace, name)

    def objects(self, rt: ResourceType, namespace: str | None = None) -> list[JSON]:
        return self.select(rt, Filter(namespace=namespace))[0]

    def add_node(self, name: str, *, labels: Mapping[str, str] | None = None,
                 annotations: Mapping[str, str] | None = None, internal_ip: str | None = None,
                 allocatable: Mapping[str, str] | None = None, unschedulable: bool = False,
                 ready: bool = True) -> JSON:
        addresses = [{"type": "Hostname", "address": name}]
        if internal_ip:
            addresses.insert(0, {"type": "InternalIP", "address": internal_ip})
        resources = dict(allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"})
        node: JSON = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                         "annotations": dict(annotations or {})},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "addresses": addresses, "allocatable": resources, "capacity": dict(resources),
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
        return self.add(NODES, node)

    def add_pod(self, name: str, namespace: str = "default", *, node_name: str | None = None,
                phase: str = "Running", labels: Mapping[str, str] | None = None,
                annotations: Mapping[str, str] | None = None,
                requests: Mapping[str, str] | None = None,
                owner: tuple[str, str] | None = None, priority: int | None = None) -> JSON:
        """A one-container pod; owner is (kind, name), e.g. ("ReplicaSet", "web-1")."""
        container: JSON = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
        if requests:
            container["resources"] = {"requests": dict(requests)}
        meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                      "annotations": dict(annotations or {})}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0],
                                        "name": owner[1], "uid": str(uuid.uuid4()),
                                        "controller": True}]
        spec: JSON = {"containers": [container]}
        if node_name:
            spec["nodeName"] = node_name
        if priority is not None:
            spec["priority"] = priority
        return self.add(PODS, {"metadata": meta, "spec": spec, "status": {"phase": phase}})

    def add_pdb(self, name: str, namespace: str = "default", *,
                match_labels: Mapping[str, str] | None = None,
                match_expressions: list[JSON] | None = None, disruptions_allowed: int = 0,
                desired_healthy: int = 1, current_healthy: int | None = None) -> JSON:
        """A PDB whose status is as the disruption controller would have set it."""
        selector: JSON = {}
        if match_labels is not None:
            selector["matchLabels"] = dict(match_labels)
        if match_expressions is not None:
            selector["matchExpressions"] = list(match_expressions)
        healthy = current_healthy
        if healthy is None:
            healthy = desired_healthy + disruptions_allowed
        pdb: JSON = {
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"selector": selector, "minAvailable": desired_healthy},
            "status": {"observedGeneration": 1, "disruptionsAllowed": disruptions_allowed,
                       "currentHealthy": healthy, "desiredHealthy": desired_healthy,
                       "expectedPods": healthy},
        }
        return self.add(PDBS, pdb)

    def get_node(self, name: str) -> JSON | None:
        return self.get(NODES, name)

    def get_pod(self, name: str, namespace: str = "default") -> JSON | None:
        return self.get(PODS, name, namespace)

    def get_pdb(self, name: str, namespace: str = "default") -> JSON | None:
        return self.get(PDBS, name, namespace)

    def get_lease(self, name: str, namespace: str = "default") -> JSON | None:
        return self.get(LEASES, name, namespace)

    def nodes(self) -> list[JSON]:
        return self.objects(NODES)

    def pods(self, namespace: str | None = None, node_name: str | None = None) -> list[JSON]:
        pods = self.objects(PODS, namespace)
        if node_name is None:
            return pods
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node_name]

    def events(self, namespace: str | None = None) -> list[JSON]:
        """Events from both APIs (core/v1 first); tell them apart by apiVersion."""
        return self.objects(EVENTS, namespace) + self.objects(EVENTS_V1, namespace)

    # ---- internals (call with the lock held)

    def _bump(self) -> int:
        self._rv += 1
        return self._rv

    def _require(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        obj = self._objects.get((rt, namespace, name))
        if obj is None:
            raise not_found(rt, name)
        return obj

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: Any) -> str:
        if not prefix:
            raise invalid(f"{rt.kind} \"\" is invalid: metadata.name: Required value: "
                          "name or generateName is required")
        while True:
            # The real server's alphabet for generated suffixes (no vowels, no 0/1/3).
            name = str(prefix) + "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789")
                                         for _ in range(5))
            if (rt, namespace, name) not in self._objects:
                return name

    def _write(self, rt: ResourceType, current: JSON, proposed: JSON, *, dry_run: bool) -> JSON:
        _check_shape(proposed)
        meta, old = proposed.setdefault("metadata", {}), current["metadata"]
        if meta.get("resourceVersion") not in (None, "", old["resourceVersion"]):
            raise stale_object(rt, old["name"])
        if meta.get("name") not in (None, "", old["name"]):
            raise bad_request(f"the name of the object ({meta['name']}) does not match the "
                              f"name on the URL ({old['name']})")
        for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
            if key in old:
                meta[key] = old[key]
        proposed["kind"], proposed["apiVersion"] = rt.kind, rt.api_version
        if proposed == current or dry_run:
            return copy.deepcopy(proposed)
        meta["resourceVersion"] = str(self._bump())
        self._objects[(rt, old.get("namespace", ""), old["name"])] = proposed
        self._record("MODIFIED", rt, proposed, old=current)
        return copy.deepcopy(proposed)

    def _spend_disruption(self, pdb: JSON, pod_name: str, *, dry_run: bool) -> None:
        name, namespace = pdb["metadata"]["name"], pdb["metadata"]["namespace"]
        status = pdb.get("status") or {}
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed < 0:
            raise ApiProblem(403, "Forbidden", f'{PDBS.qualified} "{name}" is forbidden: '
                             "pdb disruptions allowed is negative", PDBS.details(name))
        if allowed == 0:
            cause = {"reason": "DisruptionBudget",
                     "message": f"The disruption budget {name} needs "
                                f"{status.get('desiredHealthy', 0)} healthy pods and has "
                                f"{status.get('currentHealthy', 0)} currently"}
            raise ApiProblem(429, "TooManyRequests", "Cannot evict pod as it would violate the "
                             "pod's disruption budget.", {"causes": [cause]})
        if dry_run:
            return

        def charge(obj: JSON) -> JSON:
            st = obj.setdefault("status", {})
            st["disruptionsAllowed"] = allowed - 1
            st.setdefault("disruptedPods", {})[pod_name] = _now()
            return obj

        self.update(PDBS, namespace, name, charge)

    def _record(self, kind: str, rt: ResourceType, obj: JSON, old: JSON | None = None) -> None:
        event = WatchEvent(int(obj["metadata"]["resourceVersion"]), kind, rt, obj, old)
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            # The oldest event is about to be forgotten: watching from before it becomes 410.
            self._expired_below = max(self._expired_below, self._history[0].rv)
        self._history.append(event)
        for watch in list(self._watches):
            if watch.rt is rt and not watch.push(event):
                self._watches.discard(watch)

    def _signal(self, signal: _Signal) -> None:
        with self._lock:
            for watch in list(self._watches):
                if not watch.push(signal):
                    self._watches.discard(watch)


# --------------------------------------------------------------------------
# Fault injection and the request log


def _method_matches(pattern: str, method: str) -> bool:
    return pattern == "*" or pattern.upper() == method


@dataclass
class _Fault:
    method: str
    path: str
    status: int
    remaining: int
    reason: str | None
    message: str | None
    retry_after: int | None


@dataclass
class _Delay:
    method: str
    path: str
    seconds: float
    remaining: int | None


class Faults:
    """Failures and delays for requests matching a method and a path glob.

    Method "*" matches any method; the path is matched with fnmatch against
    the URL path without the query, e.g. "/api/v1/nodes/*".
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._delays: list[_Delay] = []

    def fail(self, method: str, path: str, status: int = 500, *, times: int = 1,
             reason: str | None = None, message: str | None = None,
             retry_after: int | None = None) -> None:
        """Answer the next `times` matching requests with a Status of code `status`."""
        with self._lock:
            self._faults.append(_Fault(method, path, status, times, reason, message, retry_after))

    def delay(self, method: str, path: str, seconds: float, *, times: int | None = None) -> None:
        """Hold matching requests for `seconds` before handling them (times=None: always)."""
        with self._lock:
            self._delays.append(_Delay(method, path, seconds, times))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._delays.clear()

    def take_fault(self, method: str, path: str) -> ApiProblem | None:
        with self._lock:
            for fault in self._faults:
                if _method_matches(fault.method, method) and fnmatch.fnmatchcase(path, fault.path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return self._problem(fault)
        return None

    def take_delay(self, method: str, path: str) -> float:
        with self._lock:
            for delay in self._delays:
                if _method_matches(delay.method, method) and fnmatch.fnmatchcase(path, delay.path):
                    if delay.remaining is not None:
                        delay.remaining -= 1
                        if delay.remaining <= 0:
                            self._delays.remove(delay)
                    return delay.seconds
        return 0.0

    @staticmethod
    def _problem(fault: _Fault) -> ApiProblem:
        reason = fault.reason if fault.reason is not None else _REASONS.get(fault.status, "")
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        details = {"retryAfterSeconds": fault.retry_after} if fault.retry_after else None
        message = fault.message or f"injected fault: {fault.status} {reason}".strip()
        return ApiProblem(fault.status, reason, message, details, headers)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    #: Parsed JSON body; the raw text if it is not JSON; None if empty.
    body: Any

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


class RequestLog:
    """Every request that reached the server, in arrival order (faulted ones too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RecordedRequest] = []

    def add(self, record: RecordedRequest) -> None:
        with self._lock:
            self._records.append(record)

    def matching(self, method: str = "*", path: str = "*") -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._records
                    if _method_matches(method, r.method) and fnmatch.fnmatchcase(r.path, path)]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self.matching())


# --------------------------------------------------------------------------
# The ASGI app


def json_response(code: int, body: Any, headers: Mapping[str, str] | None = None) -> Response:
    # Exactly "application/json": lightkube only turns an error into ApiError
    # when the Content-Type header equals that string.
    return Response(orjson.dumps(body), code, headers=headers, media_type="application/json")


def problem_response(problem: ApiProblem) -> Response:
    return json_response(problem.code, problem.body(), problem.headers)


def _truthy(value: str | None) -> bool:
    return value in ("true", "1")


def _parse_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped, or all namespaces
    name: str | None
    subresource: str | None

    @property
    def target(self) -> str:
        if self.name is None:
            return "collection"
        return self.subresource or "item"

    @property
    def ns(self) -> str:
        return self.namespace or ""


def no_route() -> ApiProblem:
    return ApiProblem(404, "NotFound", "the server could not find the requested resource", {})


def parse_route(path: str) -> Route:
    """/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{sub}]] and the /apis/{group}/... form."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise no_route()
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    rt = _BY_PATH.get((group, version, rest[0]))
    if rt is None or len(rest) > 3 or (namespace is not None and not rt.namespaced):
        raise no_route()
    if rt.namespaced and len(rest) > 1 and namespace is None:
        raise no_route()  # a namespaced object needs its namespace in the path
    return Route(rt, namespace, rest[1] if len(rest) > 1 else None,
                 rest[2] if len(rest) > 2 else None)


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str
    query: QueryParams
    content_type: str
    raw: bytes

    @property
    def dry_run(self) -> bool:
        value = self.query.get("dryRun")
        if value not in (None, "All"):
            raise bad_request(f'unsupported dry run value "{value}", supported: "All"')
        return value == "All"

    def json(self) -> Any:
        try:
            return orjson.loads(self.raw)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"error decoding request body: {exc}") from exc

    def object(self, kind: str) -> JSON:
        """A JSON object body for POST/PUT, of the given kind if it says one."""
        if self.content_type != "application/json":
            raise ApiProblem(415, "UnsupportedMediaType", "the body of the request was in an "
                             "unknown format - accepted media types include: application/json")
        body = self.json()
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        if body.get("kind") not in (None, "", kind):
            raise bad_request(f"the kind in the request body ({body['kind']}) is not {kind}")
        return body


Handler = Callable[[Route, ApiRequest], Awaitable[ASGIApp]]


class FakeKubeApp:
    """The ASGI app: fault injection and request log, then one handler per verb."""

    def __init__(self, store: FakeKubeStore, faults: Faults, log: RequestLog) -> None:
        self.store = store
        self.faults = faults
        self.log = log
        #: Set while stopping: new watches are refused so shutdown cannot hang.
        self.closing = False
        self._handlers: dict[tuple[str, str], Handler] = {
            ("collection", "GET"): self._list_or_watch,
            ("collection", "POST"): self._create,
            ("item", "GET"): self._get,
            ("item", "PUT"): self._replace,
            ("item", "PATCH"): self._patch,
            ("item", "DELETE"): self._delete,
            ("status", "GET"): self._get,
            ("status", "PUT"): self._replace,
            ("status", "PATCH"): self._patch,
            ("eviction", "POST"): self._evict,
            ("binding", "POST"): self._bind,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is switched off in the runner
        raw = await _read_body(receive)
        headers = Headers(scope=scope)
        request = ApiRequest(
            method=scope["method"], path=scope["path"],
            query=QueryParams(scope["query_string"].decode("latin-1")),
            content_type=headers.get("content-type", "").split(";")[0].strip().lower(),
            raw=raw,
        )
        self.log.add(RecordedRequest(request.method, request.path, dict(request.query),
                                     request.content_type or None, _parse_body(raw)))
        response = await self._respond(request)
        # The original receive: after the body it reports the client disconnecting,
        # which is how a watch stream notices it is no longer wanted.
        await response(scope, receive, send)

    async def _respond(self, request: ApiRequest) -> ASGIApp:
        try:
            if seconds := self.faults.take_delay(request.method, request.path):
                await asyncio.sleep(seconds)
            if problem := self.faults.take_fault(request.method, request.path):
                raise problem
            extra = _non_resource(request.path)
            if extra is not None:
                return extra
            route = parse_route(request.path)
            handler = self._pick(route, request.method)
            return await handler(route, request)
        except ApiProblem as problem:
            return problem_response(problem)

    def _pick(self, route: Route, method: str) -> Handler:
        target = route.target
        if route.rt is BINDINGS:
            target = "binding" if target == "collection" else "none"
        elif (target == "status" and not route.rt.has_status) or (
            target in ("eviction", "binding") and route.rt is not PODS
        ):
            target = "none"
        if not any(t == target for t, _ in self._handlers):
            raise no_route()
        handler = self._handlers.get((target, method))
        if handler is None:
            raise ApiProblem(405, "MethodNotAllowed",
                             "the server does not allow this method on the requested resource")
        return handler

    # ---- verbs

    async def _list_or_watch(self, route: Route, request: ApiRequest) -> ASGIApp:
        flt = Filter.from_query(route.rt, route.namespace, request.query)
        if _truthy(request.query.get("watch")):
            return self._watch(route, request, flt)
        items, rv = self.store.select(route.rt, flt)
        metadata: JSON = {"resourceVersion": str(rv)}
        items = _paginate(items, request.query, metadata)
        for item in items:
            # Items of a typed list carry no kind/apiVersion on the real server.
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return json_response(200, {"kind": f"{route.rt.kind}List",
                                   "apiVersion": route.rt.api_version,
                                   "metadata": metadata, "items": items})

    def _watch(self, route: Route, request: ApiRequest, flt: Filter) -> ASGIApp:
        if self.closing:
            raise ApiProblem(503, "ServiceUnavailable", "apiserver is shutting down")
        since = _int_param(request.query, "resourceVersion")
        timeout = _int_param(request.query, "timeoutSeconds")
        try:
            watch = self.store.open_watch(route.rt, flt, since, asyncio.get_running_loop())
        except Expired as exc:
            # The real server answers 200 and reports expiry as the stream's only event.
            error = status_body(410, str(exc), "Expired")
            return Response(orjson.dumps({"type": "ERROR", "object": error}) + b"\n", 200,
                            media_type="application/json")
        return WatchStream(self.store, watch, timeout,
                           bookmarks=_truthy(request.query.get("allowWatchBookmarks")))

    async def _create(self, route: Route, request: ApiRequest) -> ASGIApp:
        if route.rt.namespaced and route.namespace is None:
            raise ApiProblem(405, "MethodNotAllowed", "create needs a namespace in the path")
        obj = request.object(route.rt.kind)
        body_ns = _meta(obj).get("namespace")
        if route.rt.namespaced and body_ns not in (None, "", route.namespace):
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        _reset_status_on_create(route.rt, obj)
        created = self.store.insert(route.rt, route.ns, obj, dry_run=request.dry_run)
        return json_response(201, created)

    async def _get(self, route: Route, request: ApiRequest) -> ASGIApp:
        assert route.name is not None
        return json_response(200, self.store.read(route.rt, route.ns, route.name))

    async def _replace(self, route: Route, request: ApiRequest) -> ASGIApp:
        assert route.name is not None
        body = request.object(route.rt.kind)
        updated = self.store.update(
            route.rt, route.ns, route.name,
            lambda current: _keep_other_half(route, current, body), dry_run=request.dry_run,
        )
        return json_response(200, updated)

    async def _patch(self, route: Route, request: ApiRequest) -> ASGIApp:
        assert route.name is not None
        if request.content_type not in PATCH_TYPES:
            raise ApiProblem(415, "UnsupportedMediaType", "the body of the request was in an "
                             "unknown format - accepted media types include: "
                             + ", ".join(PATCH_TYPES))
        patch = request.json()

        def change(current: JSON) -> JSON:
            patched = apply_patch(request.content_type, current, patch)
            return _keep_other_half(route, current, patched)

        updated = self.store.update(route.rt, route.ns, route.name, change, dry_run=request.dry_run)
        return json_response(200, updated)

    async def _delete(self, route: Route, request: ApiRequest) -> ASGIApp:
        assert route.name is not None
        gone = self.store.remove(route.rt, route.ns, route.name, dry_run=request.dry_run)
        if route.rt.returns_deleted_object:
            return json_response(200, gone)
        details = route.rt.details(route.name, _meta(gone).get("uid"))
        return json_response(200, status_body(0, details=details, success=True))

    async def _evict(self, route: Route, request: ApiRequest) -> ASGIApp:
        assert route.name is not None
        body = request.object("Eviction")
        if _meta(body).get("name") not in (None, "", route.name):
            raise bad_request("name in URL does not match name in Eviction object")
        dry_run_in_body = "All" in ((body.get("deleteOptions") or {}).get("dryRun") or [])
        self.store.evict(route.ns, route.name, dry_run=request.dry_run or dry_run_in_body)
        return json_response(201, status_body(201, success=True))

    async def _bind(self, route: Route, request: ApiRequest) -> ASGIApp:
        body = request.object("Binding")
        pod = route.name or _meta(body).get("name")
        if not pod or _meta(body).get("name") not in (None, "", pod):
            raise bad_request("name in URL does not match name in Binding object")
        node = (body.get("target") or {}).get("name")
        if not node:
            raise invalid("Binding.target.name: Required value")
        self.store.bind(route.ns, pod, node, annotations=_meta(body).get("annotations"),
                        dry_run=request.dry_run)
        return json_response(201, status_body(201, success=True))


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def _non_resource(path: str) -> Response | None:
    """The few non-resource endpoints clients probe."""
    if path in ("/healthz", "/readyz", "/livez"):
        return Response(b"ok", 200, media_type="text/plain")
    if path == "/version":
        return json_response(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fakekube"})
    return None


def _int_param(query: QueryParams, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except ValueError:
        raise bad_request(f"invalid {name}: {value!r}") from None
    if number < 0:
        raise bad_request(f"invalid {name}: {value!r}")
    return number


def _paginate(items: list[JSON], query: QueryParams, metadata: JSON) -> list[JSON]:
    """limit/continue. The token is the offset; unlike the real server a
    continued list sees current data rather than the first page's snapshot."""
    start = _int_param(query, "continue") or 0
    limit = _int_param(query, "limit")
    if not limit:
        return items[start:]
    end = start + limit
    if end < len(items):
        metadata["continue"] = str(end)
        metadata["remainingItemCount"] = len(items) - end
    return items[start:end]


def _reset_status_on_create(rt: ResourceType, obj: JSON) -> None:
    """What the real server's create strategies do to status."""
    if rt is PODS:
        obj["status"] = {"phase": "Pending"}
    elif rt is PDBS:
        # Only the disruption controller sets these; there is none here, so a
        # PDB created through the API blocks evictions until its status is set.
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                         "expectedPods": 0}


def _keep_other_half(route: Route, current: JSON, proposed: JSON) -> JSON:
    """For resources with a status subresource, the main resource cannot change
    status and the status subresource cannot change spec."""
    if not route.rt.has_status:
        return proposed
    kept = "spec" if route.subresource == "status" else "status"
    proposed.pop(kept, None)
    if kept in current:
        proposed[kept] = current[kept]
    return proposed


class WatchStream:
    """A watch response: newline-delimited JSON events over a chunked body.

    It ends on timeoutSeconds, on store.close_watches(), or when the client
    goes away, and always releases its registration in the store.
    """

    def __init__(self, store: FakeKubeStore, watch: Watch, timeout: int | None, *,
                 bookmarks: bool) -> None:
        self._store = store
        self._watch = watch
        self._timeout = timeout
        self._bookmarks = bookmarks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        pump = asyncio.ensure_future(self._pump(send))
        hangup = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            await asyncio.wait({pump, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, hangup):
                task.cancel()
            await asyncio.gather(pump, hangup, return_exceptions=True)
            self._store.release_watch(self._watch)
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self, send: Send) -> None:
        for event in self._watch.initial:
            await self._emit(send, event)
        loop = asyncio.get_running_loop()
        deadline = None if self._timeout is None else loop.time() + self._timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                item = await asyncio.wait_for(self._watch.queue.get(), wait)
            except TimeoutError:
                await self._bookmark(send)
                return
            if item is _Signal.CLOSE:
                return
            if item is _Signal.BOOKMARK:
                await self._bookmark(send)
            elif isinstance(item, WatchEvent):
                await self._emit(send, item)

    async def _emit(self, send: Send, event: WatchEvent) -> None:
        seen = event.view(self._watch.filter)
        if seen is not None:
            await _send_line(send, {"type": seen[0], "object": seen[1]})

    async def _bookmark(self, send: Send) -> None:
        if self._bookmarks:
            rt = self._watch.rt
            obj = {"kind": rt.kind, "apiVersion": rt.api_version,
                   "metadata": {"resourceVersion": str(self._store.resource_version)}}
            await _send_line(send, {"type": "BOOKMARK", "object": obj})


async def _send_line(send: Send, event: JSON) -> None:
    await send({"type": "http.response.body", "body": orjson.dumps(event) + b"\n",
                "more_body": True})


async def _wait_for_disconnect(receive: Receive) -> None:
    message: Message = {}
    while message.get("type") != "http.disconnect":
        message = await receive()


# --------------------------------------------------------------------------
# Runner


class _Uvicorn(uvicorn.Server):
    """uvicorn.Server that leaves its main loop as soon as asked, instead of
    noticing should_exit on its next 0.1 s poll (that adds up over a test run)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit = asyncio.Event()

    async def main_loop(self) -> None:
        await self.on_tick(0)  # sets the default response headers once
        self._loop = asyncio.get_running_loop()
        if not self.should_exit:
            await self._exit.wait()

    def request_exit(self) -> None:
        """Thread-safe. should_exit first: main_loop checks it after publishing _loop."""
        self.should_exit = True
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._exit.set)


class FakeKubeServer:
    """Serves a FakeKubeApp with uvicorn on 127.0.0.1, on a free port, in a
    background thread. Use start()/stop() or as a context manager."""

    def __init__(self, store: FakeKubeStore | None = None) -> None:
        self.store = store if store is not None else FakeKubeStore()
        self.faults = Faults()
        self.requests = RequestLog()
        self.app = FakeKubeApp(self.store, self.faults, self.requests)
        self.url = ""
        self._server: _Uvicorn | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 5.0, *, port: int = 0) -> str:
        """Start serving and wait until the socket accepts; returns the base URL.

        port=0 picks a free port. A given port lets a test restart the API server
        where its clients expect it: stop() this server, then start a new
        FakeKubeServer(same store) on the old port (see restarted()).
        """
        if self._thread is not None:
            raise RuntimeError("fake kube server already started")
        # Binding the socket here, not in uvicorn, gives us the port with no race.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # A restart rebinds a port whose old connections may sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this. Without it every reply on a
        # kept-alive connection stalls ~40 ms: uvicorn writes headers and body
        # separately and Nagle holds the body until the client's delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, loop="asyncio", http="h11", lifespan="off", log_config=None,
            log_level="warning", access_log=False, timeout_graceful_shutdown=2,
        )
        self._server = _Uvicorn(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name=f"fakekube-{port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake kube server did not start")
            time.sleep(0.005)
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def request_stop(self) -> None:
        """Begin shutdown without waiting: refuse new watches, end open ones, stop uvicorn."""
        if self._server is None:
            return
        self.app.closing = True
        self.store.close_watches()
        self._server.request_exit()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the server thread; force uvicorn down if it overstays timeout."""
        if self._server is None or self._thread is None:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"fake kube server at {self.url} did not shut down")
        self._server = None

    def stop(self, timeout: float = 5.0) -> None:
        """request_stop() then join(). Idempotent."""
        self.request_stop()
        self.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def restarted(self, timeout: float = 5.0) -> FakeKubeServer:
        """Stop this server (its watches end, connections close) and start a new one
        on the same port with the same store, as an API server restart looks to its
        clients: objects and resourceVersions survive; faults and the request log
        start empty, as a new process's would."""
        port = int(self.url.rsplit(":", 1)[1])
        self.stop(timeout)
        successor = FakeKubeServer(self.store)
        successor.start(timeout, port=port)
        return successor

    def __enter__(self) -> FakeKubeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

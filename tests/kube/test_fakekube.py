"""The fake API server, driven through the real lightkube client (sync and async).

Each test pins one behaviour of the real Kubernetes API server that loadaware
relies on, so code tested against the fake behaves the same in a cluster.
A few wire-level cases lightkube cannot produce (bad content type, bad JSON)
use httpx directly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import httpx
import msgspec
import pytest
from lightkube import ALL_NS, ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.operators import not_equal
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod, PodBinding, PodEviction
from lightkube.resources.events_v1 import Event as EventV1
from lightkube.types import PatchType, on_error_retry

from tests.support.fakekube import JSON, NODES, PODS, FakeKubeServer
from tests.support.fakekube_fixtures import FakeKube

T = TypeVar("T")
WAIT = 5.0  # seconds; a watch that has not delivered by then never will


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def take(stream: AsyncIterable[T], count: int) -> list[T]:
    """The first `count` items of an async stream, failing after WAIT seconds."""

    async def collect() -> list[T]:
        items: list[T] = []
        async for item in stream:
            items.append(item)
            if len(items) == count:
                break
        return items

    return await asyncio.wait_for(collect(), WAIT)


def evict(client: Any, pod: str, namespace: str = "default", **kwargs: Any) -> Any:
    eviction = PodEviction(metadata=ObjectMeta(name=pod, namespace=namespace))
    return client.create(eviction, name=pod, namespace=namespace, **kwargs)


def stored(obj: JSON | None) -> JSON:
    """An object read from the store, which must exist."""
    assert obj is not None, "expected the object in the store"
    return obj


def present(value: T | None) -> T:
    """A field the server fills in; lightkube's models declare every field Optional."""
    assert value is not None, "expected the field to be set"
    return value


class HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta | None: ...


def name_of(obj: HasMetadata) -> str:
    return present(present(obj.metadata).name)


def version_of(obj: HasMetadata) -> int:
    return int(present(present(obj.metadata).resourceVersion))


def node_annotations(fake_kube: FakeKube, node: str) -> dict[str, str]:
    return dict(stored(fake_kube.store.get_node(node))["metadata"].get("annotations") or {})


# ---- nodes: list and get


def test_list_nodes_returns_seeded_nodes_and_list_resource_version(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n2")
    fake_kube.store.add_node("n1")

    nodes = fake_kube.client().list(Node)
    names = [name_of(n) for n in nodes]

    assert names == ["n1", "n2"]
    assert nodes.resourceVersion == str(fake_kube.store.resource_version)


def test_list_nodes_filters_by_label_selector(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("gpu", labels={"pool": "gpu"})
    fake_kube.store.add_node("cpu", labels={"pool": "cpu"})

    nodes = fake_kube.client().list(Node, labels={"pool": "gpu"})

    assert [name_of(n) for n in nodes] == ["gpu"]


def test_get_node_returns_annotations_and_internal_ip(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1", annotations={"loadaware.io/cpu": "0.4"},
                             internal_ip="10.0.0.7")

    node = fake_kube.client().get(Node, "n1")

    metadata = present(node.metadata)
    assert metadata.annotations == {"loadaware.io/cpu": "0.4"}
    assert metadata.uid
    assert metadata.creationTimestamp
    addresses = {a.type: a.address for a in present(present(node.status).addresses)}
    assert addresses["InternalIP"] == "10.0.0.7"


def test_get_missing_node_raises_api_error_404(fake_kube: FakeKube) -> None:
    with pytest.raises(ApiError) as err:
        fake_kube.client().get(Node, "ghost")

    assert err.value.status.code == 404
    assert err.value.status.reason == "NotFound"
    assert err.value.status.message == 'nodes "ghost" not found'


# ---- watch


@pytest.mark.anyio
async def test_async_watch_replays_history_then_streams_live_changes(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    store.add_node("n1")
    async with fake_kube.async_client() as client:
        listed = client.list(Node)
        assert [name_of(n) async for n in listed] == ["n1"]
        store.add_node("n2")  # before the watch starts: must be replayed from history

        seen: list[tuple[str, str]] = []
        async for kind, node in client.watch(Node, resource_version=listed.resourceVersion):
            seen.append((kind, name_of(node)))
            if len(seen) == 1:  # from here on, changes arrive over the open stream
                store.modify(NODES, "n1", lambda n: n["metadata"].update(labels={"x": "y"}))
                store.delete(NODES, "n2")
            if len(seen) == 3:
                break

    assert seen == [("ADDED", "n2"), ("MODIFIED", "n1"), ("DELETED", "n2")]


@pytest.mark.anyio
async def test_watch_from_compacted_resource_version_raises_api_error_410(
    fake_kube: FakeKube,
) -> None:
    fake_kube.store.add_node("n1")
    old_version = str(fake_kube.store.resource_version)
    fake_kube.store.compact()

    async with fake_kube.async_client() as client:
        with pytest.raises(ApiError) as err:
            await take(client.watch(Node, resource_version=old_version), 1)

    # The real server reports expiry as an ERROR event in a 200 stream; lightkube
    # raises it as an ApiError that has a Status but no HTTP response.
    assert err.value.status.code == 410
    assert err.value.status.reason == "Expired"
    message = present(err.value.status.message)
    assert message.startswith(f"too old resource version: {old_version} (")


@pytest.mark.anyio
async def test_watch_with_on_error_retry_relists_after_expiry(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    store.add_node("n1")
    start = str(store.resource_version)
    async with fake_kube.async_client() as client:
        seen: list[tuple[str, str]] = []
        watch = client.watch(Node, resource_version=start, on_error=on_error_retry)
        store.add_node("n2")
        async for kind, node in watch:
            seen.append((kind, name_of(node)))
            if len(seen) == 1:
                # The client now holds n2's version. Forget history and drop the
                # stream: its reconnect gets 410, and it restarts with a full relist.
                store.compact()
                store.close_watches()
            if len(seen) == 3:
                break

    assert seen == [("ADDED", "n2"), ("ADDED", "n1"), ("ADDED", "n2")]
    watches = [r for r in fake_kube.requests("GET", "/api/v1/nodes") if r.is_watch]
    assert [r.query.get("resourceVersion") for r in watches][-1] is None


def test_watch_stream_ends_after_timeout_seconds_with_a_bookmark(fake_kube: FakeKube) -> None:
    node = fake_kube.store.add_node("n1")
    params = {"watch": "true", "timeoutSeconds": "1", "allowWatchBookmarks": "true"}

    started = time.monotonic()
    with fake_kube.http().stream("GET", "/api/v1/nodes", params=params) as response:
        events = [json.loads(line) for line in response.iter_lines() if line]
    elapsed = time.monotonic() - started

    assert elapsed > 0.9  # it waited for timeoutSeconds (ending at all is the liveness check)
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    bookmark = events[1]["object"]
    assert bookmark["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]


def test_store_bookmark_reaches_watches_that_allow_bookmarks(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")
    version = str(fake_kube.store.resource_version)
    params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"}

    with fake_kube.http().stream("GET", "/api/v1/nodes", params=params) as response:
        fake_kube.store.bookmark()  # the watch is registered once headers have arrived
        fake_kube.store.close_watches()
        events = [json.loads(line) for line in response.iter_lines() if line]

    assert events == [{"type": "BOOKMARK", "object": {
        "kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": version}}}]


def test_sync_watch_with_field_selector_sees_pod_bound_onto_node_as_added(
    fake_kube: FakeKube,
) -> None:
    store = fake_kube.store
    store.add_pod("web", node_name=None, phase="Pending")
    store.add_pod("db", node_name="n2")
    start = str(store.resource_version)
    store.bind("default", "web", "n1")
    store.modify(PODS, "db", lambda p: p["metadata"].update(labels={"touched": "yes"}),
                 namespace="default")

    watch = fake_kube.client().watch(Pod, namespace=ALL_NS, resource_version=start,
                                     fields={"spec.nodeName": "n1"})
    kind, pod = next(iter(watch))

    assert (kind, name_of(pod), present(pod.spec).nodeName) == ("ADDED", "web", "n1")


def test_stop_ends_open_watch_streams_without_hanging() -> None:
    server = FakeKubeServer()
    url = server.start()
    with httpx.Client(base_url=url, verify=False) as client, \
            client.stream("GET", "/api/v1/nodes?watch=true"):
        started = time.monotonic()
        server.stop()
        elapsed = time.monotonic() - started

    assert elapsed < 10  # 'without hanging': a hung stop takes forever, a slow one does not
    assert not server.running
    assert server.store.open_watches == 0


# ---- patch


def test_merge_patch_sets_and_deletes_annotations_by_null(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1", annotations={"old": "1", "keep": "2"})

    fake_kube.client().patch(Node, "n1", {"metadata": {"annotations": {"new": "3", "old": None}}},
                             patch_type=PatchType.MERGE)

    assert node_annotations(fake_kube, "n1") == {"keep": "2", "new": "3"}


def test_strategic_patch_handles_annotation_keys_with_slash(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1", annotations={"loadaware.io/stale": "x"})
    patch = {"metadata": {"annotations": {"loadaware.io/cpu": "0.7", "loadaware.io/stale": None}}}

    fake_kube.client().patch(Node, "n1", patch)  # lightkube's default is strategic merge

    assert node_annotations(fake_kube, "n1") == {"loadaware.io/cpu": "0.7"}
    [request] = fake_kube.requests("PATCH", "/api/v1/nodes/n1")
    assert request.content_type == "application/strategic-merge-patch+json"


def test_json_patch_reads_tilde_one_as_slash_in_annotation_keys(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1", annotations={"loadaware.io/old": "x"})
    ops = [
        {"op": "add", "path": "/metadata/annotations/loadaware.io~1cpu", "value": "0.5"},
        {"op": "remove", "path": "/metadata/annotations/loadaware.io~1old"},
    ]

    fake_kube.client().patch(Node, "n1", ops, patch_type=PatchType.JSON)

    assert node_annotations(fake_kube, "n1") == {"loadaware.io/cpu": "0.5"}


def test_json_patch_with_failing_test_op_is_rejected_with_422_and_changes_nothing(
    fake_kube: FakeKube,
) -> None:
    # The real server answers 422 Invalid (not 409) when a JSON patch cannot be applied.
    fake_kube.store.add_node("n1", annotations={"a": "1"})
    ops = [
        {"op": "test", "path": "/metadata/annotations/a", "value": "2"},
        {"op": "replace", "path": "/metadata/annotations/a", "value": "3"},
    ]

    with pytest.raises(ApiError) as err:
        fake_kube.client().patch(Node, "n1", ops, patch_type=PatchType.JSON)

    assert (err.value.status.code, err.value.status.reason) == (422, "Invalid")
    assert node_annotations(fake_kube, "n1") == {"a": "1"}


def test_patch_carrying_stale_resource_version_raises_409_conflict(fake_kube: FakeKube) -> None:
    node = fake_kube.store.add_node("n1")
    fake_kube.store.modify(NODES, "n1", lambda n: n["metadata"].update(labels={"v": "2"}))
    patch = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"],
                          "annotations": {"a": "1"}}}

    with pytest.raises(ApiError) as err:
        fake_kube.client().patch(Node, "n1", patch, patch_type=PatchType.MERGE)

    assert (err.value.status.code, err.value.status.reason) == (409, "Conflict")
    assert node_annotations(fake_kube, "n1") == {}


def test_patch_of_missing_node_raises_api_error_404(fake_kube: FakeKube) -> None:
    with pytest.raises(ApiError) as err:
        fake_kube.client().patch(Node, "ghost", {"metadata": {"annotations": {"a": "1"}}},
                                 patch_type=PatchType.MERGE)

    assert err.value.status.code == 404


def test_patch_that_changes_nothing_keeps_resource_version(fake_kube: FakeKube) -> None:
    node = fake_kube.store.add_node("n1", annotations={"a": "1"})

    patched = fake_kube.client().patch(Node, "n1", {"metadata": {"annotations": {"a": "1"}}},
                                       patch_type=PatchType.MERGE)

    assert present(patched.metadata).resourceVersion == node["metadata"]["resourceVersion"]


def test_patch_with_unknown_content_type_is_415(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")

    response = fake_kube.http().patch("/api/v1/nodes/n1", content=b"{}",
                                      headers={"Content-Type": "text/plain"})

    assert response.status_code == 415
    assert response.json()["reason"] == "UnsupportedMediaType"


def test_patch_with_malformed_json_is_400(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")

    response = fake_kube.http().patch("/api/v1/nodes/n1", content=b"{not json",
                                      headers={"Content-Type": "application/merge-patch+json"})

    assert response.status_code == 400
    assert response.json()["kind"] == "Status"


def test_patch_to_main_resource_cannot_change_node_status(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1", internal_ip="10.0.0.1")

    fake_kube.client().patch(Node, "n1", {"status": {"addresses": []}},
                             patch_type=PatchType.MERGE)

    node = stored(fake_kube.store.get_node("n1"))
    assert node["status"]["addresses"][0]["address"] == "10.0.0.1"


# ---- pods: field selectors and binding


def test_list_pods_by_spec_node_name_field_selector(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("a", node_name="n1")
    fake_kube.store.add_pod("b", "other", node_name="n1")
    fake_kube.store.add_pod("c", node_name="n2")

    pods = fake_kube.client().list(Pod, namespace=ALL_NS, fields={"spec.nodeName": "n1"})

    assert sorted(name_of(p) for p in pods) == ["a", "b"]


def test_list_pods_field_selector_combines_not_equal_terms(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("running", node_name="n1")
    fake_kube.store.add_pod("done", node_name="n1", phase="Succeeded")
    fake_kube.store.add_pod("elsewhere", node_name="n2")

    pods = fake_kube.client().list(
        Pod, fields={"spec.nodeName": "n1", "status.phase": not_equal("Succeeded")}
    )

    assert [name_of(p) for p in pods] == ["running"]
    [request] = fake_kube.requests("GET", "/api/v1/namespaces/default/pods")
    assert request.query["fieldSelector"] == "spec.nodeName=n1,status.phase!=Succeeded"


def test_unsupported_field_selector_is_400(fake_kube: FakeKube) -> None:
    with pytest.raises(ApiError) as err:
        list(fake_kube.client().list(Pod, fields={"spec.priority": "1"}))

    assert err.value.status.code == 400
    assert err.value.status.message == "field label not supported: spec.priority"


def test_binding_sets_node_name_and_answers_201_success(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("web", phase="Pending")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}

    response = fake_kube.http().post("/api/v1/namespaces/default/pods/web/binding",
                                     json=binding)

    assert response.status_code == 201
    assert response.json()["status"] == "Success"
    assert stored(fake_kube.store.get_pod("web"))["spec"]["nodeName"] == "n1"


def test_binding_an_already_bound_pod_raises_409(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("web", node_name="n1")
    binding = PodBinding(metadata=ObjectMeta(name="web"),
                         target=ObjectReference(kind="Node", name="n2"))

    with pytest.raises(ApiError) as err:
        fake_kube.client().create(binding, name="web", namespace="default")

    assert err.value.status.code == 409


def test_lightkube_pod_binding_cannot_decode_the_status_reply_of_a_successful_bind(
    fake_kube: FakeKube,
) -> None:
    # lightkube 1.0.1 decodes the reply as a Binding, but the real server
    # answers with a Status, which lacks the required `target`. The bind has
    # happened by then, so callers must treat this error as success.
    fake_kube.store.add_pod("web", phase="Pending")
    binding = PodBinding(metadata=ObjectMeta(name="web"),
                         target=ObjectReference(kind="Node", name="n1"))

    with pytest.raises(msgspec.ValidationError):
        fake_kube.client().create(binding, name="web", namespace="default")

    assert stored(fake_kube.store.get_pod("web"))["spec"]["nodeName"] == "n1"


def test_pod_created_through_api_starts_pending(fake_kube: FakeKube) -> None:
    pod = Pod.from_dict({"metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": "x"}]},
                         "status": {"phase": "Running"}})
    assert isinstance(pod, Pod)  # from_dict is annotated as returning the DictMixin base

    created = fake_kube.client().create(pod)

    assert present(created.status).phase == "Pending"


# ---- eviction


def test_eviction_deletes_pod_and_spends_one_pdb_disruption(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    store.add_pod("web-1", labels={"app": "web"}, node_name="n1")
    store.add_pdb("web", match_labels={"app": "web"}, disruptions_allowed=2)
    start = str(store.resource_version)
    client = fake_kube.client()

    evict(client, "web-1")

    assert store.get_pod("web-1") is None
    pdb = stored(store.get_pdb("web"))
    assert pdb["status"]["disruptionsAllowed"] == 1
    assert "web-1" in pdb["status"]["disruptedPods"]
    kind, pod = next(iter(client.watch(Pod, resource_version=start)))
    assert (kind, name_of(pod)) == ("DELETED", "web-1")


def test_eviction_blocked_by_pdb_raises_429_with_disruption_budget_cause(
    fake_kube: FakeKube,
) -> None:
    fake_kube.store.add_pod("web-1", labels={"app": "web"}, node_name="n1")
    fake_kube.store.add_pdb("web", match_labels={"app": "web"}, disruptions_allowed=0,
                            desired_healthy=3, current_healthy=3)

    with pytest.raises(ApiError) as err:
        evict(fake_kube.client(), "web-1")

    status = err.value.status
    assert (status.code, status.reason) == (429, "TooManyRequests")
    assert status.message == "Cannot evict pod as it would violate the pod's disruption budget."
    [cause] = present(present(status.details).causes)
    assert cause.reason == "DisruptionBudget"
    assert cause.message == "The disruption budget web needs 3 healthy pods and has 3 currently"
    assert fake_kube.store.get_pod("web-1") is not None


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ({"key": "tier", "operator": "In", "values": ["front", "back"]}, True),
        ({"key": "tier", "operator": "NotIn", "values": ["front"]}, False),
        ({"key": "tier", "operator": "Exists"}, True),
        ({"key": "tier", "operator": "DoesNotExist"}, False),
    ],
)
def test_eviction_honours_pdb_match_expressions(
    fake_kube: FakeKube, expression: dict[str, Any], selected: bool
) -> None:
    fake_kube.store.add_pod("web-1", labels={"tier": "front"}, node_name="n1")
    fake_kube.store.add_pdb("frontends", match_expressions=[expression], disruptions_allowed=0)

    if selected:
        with pytest.raises(ApiError) as err:
            evict(fake_kube.client(), "web-1")
        assert err.value.status.code == 429
    else:
        evict(fake_kube.client(), "web-1")
        assert fake_kube.store.get_pod("web-1") is None


def test_eviction_dry_run_changes_nothing(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("web-1", labels={"app": "web"}, node_name="n1")
    fake_kube.store.add_pdb("web", match_labels={"app": "web"}, disruptions_allowed=1)
    version = fake_kube.store.resource_version

    evict(fake_kube.client(), "web-1", dry_run=True)

    assert fake_kube.store.get_pod("web-1") is not None
    assert fake_kube.store.resource_version == version
    [request] = fake_kube.requests("POST", "*/eviction")
    assert request.query == {"dryRun": "All"}


def test_eviction_of_missing_pod_raises_404(fake_kube: FakeKube) -> None:
    with pytest.raises(ApiError) as err:
        evict(fake_kube.client(), "ghost")

    assert err.value.status.code == 404
    assert err.value.status.message == 'pods "ghost" not found'


def test_eviction_of_pod_selected_by_two_pdbs_raises_500(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("web-1", labels={"app": "web"}, node_name="n1")
    fake_kube.store.add_pdb("a", match_labels={"app": "web"}, disruptions_allowed=1)
    fake_kube.store.add_pdb("b", match_expressions=[{"key": "app", "operator": "Exists"}],
                            disruptions_allowed=1)

    with pytest.raises(ApiError) as err:
        evict(fake_kube.client(), "web-1")

    assert err.value.status.code == 500
    assert "more than one PodDisruptionBudget" in present(err.value.status.message)


def test_eviction_of_pending_pod_ignores_its_pdb(fake_kube: FakeKube) -> None:
    fake_kube.store.add_pod("web-1", labels={"app": "web"}, phase="Pending")
    fake_kube.store.add_pdb("web", match_labels={"app": "web"}, disruptions_allowed=0)

    evict(fake_kube.client(), "web-1")

    assert fake_kube.store.get_pod("web-1") is None


# ---- events


def test_core_events_are_created_and_listed_per_namespace_and_cluster_wide(
    fake_kube: FakeKube,
) -> None:
    client = fake_kube.client()
    for namespace in ("default", "kube-system"):
        client.create(Event(metadata=ObjectMeta(generateName="n1.", namespace=namespace),
                            involvedObject=ObjectReference(kind="Node", name="n1"),
                            reason="HotNode", message="cpu 0.93", type="Warning"))

    in_default = list(client.list(Event, namespace="default"))
    everywhere = list(client.list(Event, namespace=ALL_NS))

    assert [e.reason for e in in_default] == ["HotNode"]
    assert name_of(in_default[0]).startswith("n1.")
    namespaces = sorted(present(present(e.metadata).namespace) for e in everywhere)
    assert namespaces == ["default", "kube-system"]


def test_events_k8s_io_events_are_created_and_listed(fake_kube: FakeKube) -> None:
    client = fake_kube.client()
    client.create(EventV1(metadata=ObjectMeta(name="evict.1", namespace="default"),
                          eventTime=datetime.now(UTC), action="Evict", reason="Descheduled",
                          regarding=ObjectReference(kind="Pod", name="web-1"),
                          reportingController="loadaware.io/descheduler",
                          reportingInstance="descheduler-0", type="Normal", note="node hot"))

    [event] = client.list(EventV1, namespace=ALL_NS)

    assert (event.reason, present(event.regarding).name) == ("Descheduled", "web-1")
    assert [e["apiVersion"] for e in fake_kube.store.events()] == ["events.k8s.io/v1"]


# ---- leases


def lease(holder: str) -> Lease:
    return Lease(metadata=ObjectMeta(name="loadaware-leader", namespace="default"),
                 spec=LeaseSpec(holderIdentity=holder, leaseDurationSeconds=15))


def test_lease_created_twice_raises_409_already_exists(fake_kube: FakeKube) -> None:
    client = fake_kube.client()
    client.create(lease("a"))

    with pytest.raises(ApiError) as err:
        client.create(lease("b"))

    assert (err.value.status.code, err.value.status.reason) == (409, "AlreadyExists")


def test_lease_replace_with_current_version_takes_over(fake_kube: FakeKube) -> None:
    client = fake_kube.client()
    current = client.create(lease("a"))
    present(current.spec).holderIdentity = "b"

    replaced = client.replace(current)

    assert present(replaced.spec).holderIdentity == "b"
    assert version_of(replaced) > version_of(current)


def test_lease_replace_with_stale_version_raises_409_conflict(fake_kube: FakeKube) -> None:
    client = fake_kube.client()
    mine = client.create(lease("a"))
    theirs = client.get(Lease, "loadaware-leader")
    present(theirs.spec).holderIdentity = "b"
    client.replace(theirs)
    present(mine.spec).holderIdentity = "a-renewed"

    with pytest.raises(ApiError) as err:
        client.replace(mine)

    assert (err.value.status.code, err.value.status.reason) == (409, "Conflict")
    assert stored(fake_kube.store.get_lease("loadaware-leader"))["spec"]["holderIdentity"] == "b"


# ---- fault injection and observation


@pytest.mark.parametrize("code", [500, 409, 429, 503])
def test_injected_fault_raises_api_error_with_its_code_once(fake_kube: FakeKube, code: int) -> None:
    fake_kube.store.add_node("n1")
    fake_kube.fail_next("GET", "/api/v1/nodes/*", code)
    client = fake_kube.client()

    with pytest.raises(ApiError) as err:
        client.get(Node, "n1")

    assert err.value.status.code == code
    assert name_of(client.get(Node, "n1")) == "n1"


def test_injected_fault_only_hits_matching_method_and_path(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")
    fake_kube.fail_next("PATCH", "/api/v1/nodes/*", 503)
    client = fake_kube.client()

    assert [name_of(n) for n in client.list(Node)] == ["n1"]
    assert name_of(client.get(Node, "n1")) == "n1"
    with pytest.raises(ApiError):
        client.patch(Node, "n1", {"metadata": {"labels": {"a": "b"}}})


def test_injected_delay_holds_matching_requests(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")
    fake_kube.delay("GET", "/api/v1/nodes/n1", 0.3, times=1)
    client = fake_kube.client()

    started = time.monotonic()
    client.get(Node, "n1")
    slow = time.monotonic() - started
    started = time.monotonic()
    client.get(Node, "n1")
    fast = time.monotonic() - started

    assert slow >= 0.3 > fast


def test_request_log_records_patch_bodies_and_content_types(fake_kube: FakeKube) -> None:
    fake_kube.store.add_node("n1")
    fake_kube.store.add_node("n2")
    client = fake_kube.client()

    for name in ("n1", "n2"):
        client.patch(Node, name, {"metadata": {"annotations": {"a": name}}},
                     patch_type=PatchType.MERGE)

    patches = fake_kube.requests("PATCH", "/api/v1/nodes/*")
    assert [(r.path, r.content_type) for r in patches] == [
        ("/api/v1/nodes/n1", "application/merge-patch+json"),
        ("/api/v1/nodes/n2", "application/merge-patch+json"),
    ]
    assert patches[1].body == {"metadata": {"annotations": {"a": "n2"}}}


@pytest.mark.anyio
async def test_async_client_sees_injected_fault(fake_kube: FakeKube) -> None:
    fake_kube.fail_next("*", "/api/v1/nodes", 503, message="etcd leader changed")

    client: AsyncClient
    async with fake_kube.async_client() as client:
        with pytest.raises(ApiError) as err:
            [n async for n in client.list(Node)]

    assert err.value.status.code == 503
    assert err.value.status.message == "etcd leader changed"

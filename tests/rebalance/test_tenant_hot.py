"""A tenant makes a node hot, and others' pods are evicted (issue 42, point 3): replayed.

The tenant's burner requests 1m CPU and uses cores, protected by what the tenant
controls. Before the fix the planner evicted the other tenants' pods, which use no
more than they request, to cool the node the burner heats; beside a request-based
scheduler the node then looks empty by requests, new pods land on it and are evicted
the next run. Now the node's excess is attributed to the pods above their requests:
what protected ones hold is reported on the node (``held_hot``), and pods within their
requests are never moved for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.objects.budgets import PodDisruptionBudgetView
from app.objects.pods import PodInfo
from app.objects.resources import Resources
from app.objects.selectors import LabelSelector
from app.rebalance import SkipCode, plan
from tests.rebalance.builders import GI, NOW, POLICY, cluster, config, node, pod

NODES = [node("hot", 0.9), node("cool", 0.1), node("cool-2", 0.1)]
TENANT = "tenant-a"

# What protects the burner, each set by the tenant alone: (its fields, its budgets).
PROTECTIONS: dict[str, tuple[dict[str, Any], list[PodDisruptionBudgetView]]] = {
    "emptyDir": ({"local_storage": True}, []),
    "last Ready replica": ({}, []),
    "bare pod": ({"owner": None}, []),
    "PDB": (
        {"labels": {"app": "burner"}},
        [PodDisruptionBudgetView(TENANT, "burner", LabelSelector({"app": "burner"}), 0)],
    ),
    "safe-to-evict": ({"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
                      []),
}


def burner(cpu_used: float, **fields: Any) -> tuple[PodInfo, Resources]:
    values: dict[str, Any] = {"namespace": TENANT, "owner": "burner-rs", "cpu": 0.001}
    values.update(fields)
    return pod("burner", "hot", **values), Resources(cpu_used, 0.1 * GI)


def neighbours(count: int = 6) -> list[PodInfo]:
    """Other tenants' pods using exactly what they request (the builders' usage)."""
    return [pod(f"web-{i}", "hot", namespace="tenant-b", owner="web-rs", cpu=0.5)
            for i in range(count)] + [pod("web-twin", "cool", namespace="tenant-b",
                                          owner="web-rs", cpu=0.5)]


def view(burner_pod: PodInfo, burner_usage: Resources, others: list[PodInfo],
         budgets: list[PodDisruptionBudgetView] | None = None) -> Any:
    pods = [burner_pod, *others]
    usage = {p.key: p.requests for p in others}
    usage[burner_pod.key] = burner_usage
    return cluster(NODES, pods, usage=usage, budgets=budgets or [])


@pytest.mark.parametrize("scheduler", ["extender", "requests"])
@pytest.mark.parametrize("protected_by", sorted(PROTECTIONS))
def test_a_protected_burner_gets_no_neighbour_evicted(protected_by: str, scheduler: str) -> None:
    fields, budgets = PROTECTIONS[protected_by]
    the_burner, used = burner(5.0, **fields)
    result = plan(view(the_burner, used, neighbours(), budgets), config(scheduler=scheduler),
                  POLICY, NOW, {})
    # Before the fix: five of tenant-b's pods (2.5 cores of the node's excess) evicted.
    assert result.evictions == []
    within = [s for s in result.skipped if s.code is SkipCode.WITHIN_REQUESTS]
    assert sorted(s.pod_key for s in within) == [f"tenant-b/web-{i}" for i in range(6)]
    held = result.held_hot["hot"]
    assert [(key, resource) for key, resource, _ in held.pods] == [("tenant-a/burner", "cpu")]
    assert held.pods[0][2] == pytest.approx(4.999)  # cores above its 1m request
    assert held.held["cpu"] == pytest.approx(0.25)  # the whole excess, 90 % - 65 %
    assert "tenant-a/burner" in held.reason
    assert any(n.startswith("hot: hot from pods above their requests that stay on it")
               for n in result.notes)


@pytest.mark.parametrize(
    "hint",
    [
        {"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}},
        {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "2147483647"}},
        {"qos": "Guaranteed"},
    ],
    ids=["prefer-no-eviction", "pod-deletion-cost", "qos"],
)
def test_a_burners_ordering_hints_are_ignored(hint: dict[str, Any]) -> None:
    """An evictable burner that asks to go last goes first: it is what makes the node hot."""
    the_burner, used = burner(3.0, **hint)
    twin = pod("burner-twin", "cool-2", namespace=TENANT, owner="burner-rs", cpu=0.001)
    result = plan(view(the_burner, used, [*neighbours(), twin]), config(), POLICY, NOW, {})
    # Before the fix: the burner sorted last and five neighbours went instead.
    assert [e.pod.key for e in result.evictions] == ["tenant-a/burner"]
    assert "hot" not in result.held_hot


def test_neighbours_relieve_only_the_excess_no_burner_explains() -> None:
    """A node packed past the threshold by requests, plus a protected burner: the part of
    the excess that requests explain is shed as before, the burner's part is not."""
    the_burner, used = burner(1.001, local_storage=True)
    # 90 % of 10 cores, threshold 65 %: 2.5 cores of excess, 1 core of it the burner's.
    result = plan(view(the_burner, used, neighbours(16)), config(), POLICY, NOW, {})
    assert len(result.evictions) == 3  # 1.5 cores: what the burner does not explain
    assert all(e.pod.namespace == "tenant-b" for e in result.evictions)
    assert result.held_hot["hot"].held["cpu"] == pytest.approx(0.1)


def test_without_a_pod_above_its_requests_the_plan_is_unchanged() -> None:
    the_burner, used = burner(0.001, local_storage=True)  # uses what it requests
    result = plan(view(the_burner, used, neighbours(12)), config(), POLICY, NOW, {})
    assert len(result.evictions) == 5  # 2.5 cores of 0.5-core pods, as always
    assert result.held_hot == {}
    assert SkipCode.WITHIN_REQUESTS not in {s.code for s in result.skipped}


def test_an_estimate_is_no_evidence_against_a_pod() -> None:
    """A pod Prometheus has no series for is judged by its estimate, which may exceed
    its requests (a limit above them): that does not make it a cause of the excess."""
    the_burner, _ = burner(5.0, local_storage=True,
                           limits=Resources(8.0, 1 * GI))
    others = neighbours(12)
    usage = {p.key: p.requests for p in others}  # no series for the burner
    result = plan(cluster(NODES, [the_burner, *others], usage=usage), config(), POLICY, NOW, {})
    assert len(result.evictions) == 5
    assert result.held_hot == {}


def test_a_burner_no_destination_takes_is_reported_and_its_neighbours_stay() -> None:
    """Evictable, but too big for any destination: the neighbours are not moved in its
    place (they would not cool what it heats), and the node says who keeps it hot."""
    the_burner, used = burner(5.0)
    twin = pod("burner-twin", "cool-2", namespace=TENANT, owner="burner-rs", cpu=0.001)
    result = plan(view(the_burner, used, [*neighbours(), twin]), config(), POLICY, NOW, {})
    assert result.evictions == []
    codes = {s.pod_key: s.code for s in result.skipped}
    assert codes["tenant-a/burner"] is SkipCode.NO_DESTINATION
    assert {codes[f"tenant-b/web-{i}"] for i in range(6)} == {SkipCode.WITHIN_REQUESTS}
    assert [key for key, _, _ in result.held_hot["hot"].pods] == ["tenant-a/burner"]


def test_neighbours_a_little_above_their_requests_are_not_its_victims() -> None:
    """Most pods use a little more than they request (a 5-minute rate wobbles): up to
    25 % above their requests they count as within them, and do not move for the
    burner; a pod well above its requests is a cause of its own and may."""
    the_burner, used = burner(5.0, local_storage=True)
    others = neighbours()
    usage = {p.key: Resources(0.6, GI) for p in others}  # 20 % above their 500m each
    usage[the_burner.key] = used
    result = plan(cluster(NODES, [the_burner, *others], usage=usage), config(), POLICY, NOW, {})
    assert result.evictions == []  # before the fix: five of them
    codes = {s.pod_key: s.code for s in result.skipped}
    assert {codes[p.key] for p in others if p.node_name == "hot"} == {SkipCode.WITHIN_REQUESTS}
    usage = {**usage, "tenant-b/web-0": Resources(1.5, GI)}  # three times its request
    result = plan(cluster(NODES, [the_burner, *others], usage=usage), config(), POLICY, NOW, {})
    assert [e.pod.key for e in result.evictions] == ["tenant-b/web-0"]

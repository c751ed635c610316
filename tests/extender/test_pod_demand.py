"""Reading a request Pod's demand: the native reader must answer as its Python twin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube.resources.core_v1 import Pod

from app.extender import request_pod
from app.extender.request_pod import demand_of_request_pod, request_pod_demand
from app.kube.pods import pod_info, scheduled_pod
from app.objects.demand import Demand, container_demand
from app.objects.resources import parse_quantity
from app.simulate.scenario import Workload

GiB = 2.0**30


def native() -> Callable[[dict[str, Any]], Demand]:
    reader = request_pod.native_pod_demand
    if reader is None:
        pytest.fail("the native pod demand reader was not built; run scripts/setup --for-tests")
    return lambda pod: reader(pod, request_pod._cached_quantity)


@pytest.fixture(params=["python", "native"])
def read(request: pytest.FixtureRequest) -> Callable[[dict[str, Any]], Demand]:
    return native() if request.param == "native" else demand_of_request_pod


def test_the_native_reader_is_built_and_is_what_the_extender_calls() -> None:
    assert request_pod.native_pod_demand is not None, "app/extender/_pod_demand.c was not compiled"
    assert request_pod_demand is not demand_of_request_pod


def test_containers_sum_against_the_largest_init_container_plus_overhead(
    read: Callable[[dict[str, Any]], Demand],
) -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "300m", "memory": "1Gi"}}},
                {"name": "no-resources"},
                "not a container",
            ],
            "initContainers": [
                {"resources": {"requests": {"cpu": "2"}}},
                {"resources": {"limits": {"memory": "512Mi"}}},
            ],
            "overhead": {"cpu": "50m"},
        }
    }
    assert read(pod) == (2.05, GiB, 1.05, 0.5 * GiB)


def sidecar(cpu: str, memory: str = "0") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    return {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": requests}}


def init(cpu: str, memory: str = "0") -> dict[str, Any]:
    return {"name": "init", "resources": {"requests": {"cpu": cpu, "memory": memory}}}


def app_container(cpu: str, memory: str, limits: tuple[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits is not None:
        resources["limits"] = {"cpu": limits[0], "memory": limits[1]}
    return {"name": "app", "resources": resources}


@pytest.mark.parametrize(
    ("init_containers", "cpu", "memory"),
    [
        # A sidecar runs beside the app: 1 + 0.5, not max(1, 0.5).
        ([sidecar("500m", "1Gi")], 1.5, 3 * GiB),
        # A regular init container after a sidecar runs beside it: 0.5 + 2 > 1.5.
        ([sidecar("500m"), init("2")], 2.5, 2 * GiB),
        # Before the sidecar starts, the init container runs alone: max(1.5, 2).
        ([init("2"), sidecar("500m")], 2.0, 2 * GiB),
        # Sidecars accumulate; the regular init container sees both before it.
        ([sidecar("250m"), sidecar("250m"), init("1500m", "3Gi")], 2.0, 3 * GiB),
    ],
)
def test_sidecars_count_as_kubernetes_counts_them(
    read: Callable[[dict[str, Any]], Demand],
    init_containers: list[dict[str, Any]],
    cpu: float,
    memory: float,
) -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
            ],
            "initContainers": init_containers,
        }
    }
    assert read(pod)[:2] == (cpu, memory)


def lightkube_pod(spec: dict[str, Any]) -> Pod:
    return cast(
        Pod,
        Pod.from_dict(
            {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": spec}
        ),
    )


def scenario_workload(spec: dict[str, Any]) -> Workload:
    """The same pod as a simulator workload: the app containers' amounts summed."""
    requests = {"cpu": 0.0, "memory": 0.0}
    limits = {"cpu": 0.0, "memory": 0.0}
    for container in spec["containers"]:
        for amounts, key in ((requests, "requests"), (limits, "limits")):
            for resource, value in container["resources"].get(key, {}).items():
                amounts[resource] += parse_quantity(value)
    return Workload.model_validate(
        {
            "name": "w",
            "replicas": 1,
            "requests": requests,
            "limits": limits,
            "usage": {"profile": "constant", "cpu": "0", "memory": "0"},
            "initContainers": [
                {k: v for k, v in c.items() if k == "restartPolicy"} | c.get("resources", {})
                for c in spec.get("initContainers", [])
            ],
            "overhead": spec.get("overhead", {}),
        }
    )


# Every reader of a pod's demand, over one table: the extender's request readers
# (Python and native), the pod cache's two views (the extender's estimate and the
# descheduler's rules) and the simulator's workloads.
DEMAND_CASES = [
    pytest.param(
        {
            "containers": [app_container("1", "2Gi", limits=("2", "4Gi"))],
            "initContainers": [sidecar("500m", "1Gi")],
        },
        (1.5, 3 * GiB, 2.0, 4 * GiB),
        id="sidecar-beside-the-app",
    ),
    pytest.param(
        {
            "containers": [app_container("1", "2Gi")],
            "initContainers": [init("4", "8Gi"), sidecar("500m")],
        },
        (4.0, 8 * GiB, 0.0, 0.0),
        id="init-container-larger-than-the-app",
    ),
    pytest.param(
        {
            "containers": [app_container("1", "2Gi", limits=("1", "2Gi"))],
            "initContainers": [sidecar("250m"), init("2", "1Gi")],
            "overhead": {"cpu": "100m", "memory": "64Mi"},
        },
        (2.35, 2 * GiB + 64 * 2**20, 1.1, 2 * GiB + 64 * 2**20),
        id="overhead-on-top-of-both-phases",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), DEMAND_CASES)
def test_every_reader_of_a_pod_gets_the_same_demand(
    spec: dict[str, Any], expected: tuple[float, float, float, float]
) -> None:
    readers: dict[str, Demand] = {
        "request (python)": demand_of_request_pod({"spec": spec}),
        "request (native)": native()({"spec": spec}),
    }
    pod = lightkube_pod(spec)
    estimate = scheduled_pod(pod)
    readers["extender pod cache"] = container_demand(estimate.requests, estimate.limits)
    info = pod_info(pod)
    readers["descheduler pod cache"] = container_demand(info.requests, info.limits)
    requests, limits = scenario_workload(spec).pod_requests_and_limits
    readers["simulator"] = container_demand(requests, limits)
    for reader, demand in readers.items():
        assert demand == pytest.approx(expected), reader


@pytest.mark.parametrize(
    "pod",
    [
        {},
        {"spec": None},
        {"spec": "garbage"},
        {"spec": {}},
        {"spec": {"containers": []}},
        {"spec": {"containers": [{"resources": None}]}},
        {"spec": {"containers": [{"resources": {"requests": None, "limits": {}}}]}},
        {"spec": {"containers": [{"resources": {"requests": {"cpu": None}}}]}},
        {"spec": {"overhead": "garbage"}},  # not a map: ignored, as in the Python twin
    ],
)
def test_nothing_declared_reads_as_zero(
    read: Callable[[dict[str, Any]], Demand], pod: dict[str, Any]
) -> None:
    assert read(pod) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"spec": {"containers": "c"}}, "spec.containers is not a list"),
        ({"spec": {"initContainers": {"a": 1}}}, "spec.initContainers is not a list"),
        ({"spec": {"containers": [{"resources": ["x"]}]}}, "container resources are not a map"),
        ({"spec": {"containers": [{"resources": {"limits": [1]}}]}}, "not a map of quantities"),
        ({"spec": {"containers": [{"resources": {"limits": {"cpu": "x"}}}]}}, "not a quantity"),
        ({"spec": {"containers": [{"resources": {"limits": {"cpu": []}}}]}}, "not a quantity"),
        ({"spec": {"containers": [{"resources": {"limits": {"cpu": "-1"}}}]}}, "not a usable"),
        ({"spec": {"overhead": {"memory": True}}}, "not a quantity"),
    ],
)
def test_unreadable_resources_raise_value_error(
    read: Callable[[dict[str, Any]], Demand], pod: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        read(pod)


def test_the_native_reader_refuses_a_pod_that_is_not_a_dict() -> None:
    with pytest.raises(TypeError, match="must be a dict"):
        native()([])  # type: ignore[arg-type]


# Values that are sometimes quantities and sometimes garbage of every JSON type.
quantities = st.one_of(
    st.sampled_from(["100m", "1", "2.5", "1Gi", "512Mi", "0", "-0", "1e3", "7k", "x", "-1"]),
    st.integers(-2, 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
amounts = st.one_of(
    st.fixed_dictionaries({}, optional={"cpu": quantities, "memory": quantities, "x": quantities}),
    st.none(),
    st.just([]),
    st.just("garbage"),
)
resources = st.one_of(
    st.fixed_dictionaries({}, optional={"requests": amounts, "limits": amounts}),
    st.none(),
    st.just(""),
    st.just([1]),
)
restart_policies = st.one_of(st.sampled_from(["Always", "OnFailure", "always", ""]), st.integers())
containers = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {}, optional={"resources": resources, "restartPolicy": restart_policies}
        ),
        st.just("c"),
    ),
    max_size=4,
)
container_lists = st.one_of(containers, st.none(), st.just({}), st.just("garbage"), st.just(0))
pods = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "spec": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "containers": container_lists,
                        "initContainers": container_lists,
                        "overhead": amounts,
                    },
                ),
                st.none(),
                st.integers(),
            )
        },
    ),
)


def outcome(read: Callable[[dict[str, Any]], Demand], pod: dict[str, Any]) -> object:
    try:
        return read(pod)
    except ValueError as error:
        return ("ValueError", str(error))


@settings(max_examples=400, deadline=None)
@given(pod=pods)
def test_native_and_python_read_every_pod_alike(pod: dict[str, Any]) -> None:
    assert outcome(native(), pod) == outcome(demand_of_request_pod, pod)

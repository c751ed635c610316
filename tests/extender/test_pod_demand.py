"""Reading a request Pod's demand: the native reader must answer as its Python twin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender import estimates
from app.extender.estimates import Demand, demand_of_request_pod, request_pod_demand

GiB = 2.0**30


def native() -> Callable[[dict[str, Any]], Demand]:
    reader = estimates.native_pod_demand
    if reader is None:
        pytest.fail("the native pod demand reader was not built; run scripts/setup --for-tests")
    return lambda pod: reader(pod, estimates._cached_quantity)


@pytest.fixture(params=["python", "native"])
def read(request: pytest.FixtureRequest) -> Callable[[dict[str, Any]], Demand]:
    return native() if request.param == "native" else demand_of_request_pod


def test_the_native_reader_is_built_and_is_what_the_extender_calls() -> None:
    assert estimates.native_pod_demand is not None, "app/extender/_pod_demand.c was not compiled"
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
    # The descheduler's reading of the same pod (app/kube/pods.py) agrees.
    from lightkube.models.core_v1 import PodSpec

    from app.kube.pods import _effective

    spec = cast(PodSpec, PodSpec.from_dict(pod["spec"]))
    effective = _effective(list(spec.containers), list(spec.initContainers or []), "requests")
    assert (effective.cpu_cores, effective.memory_bytes) == (cpu, memory)


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

"""Issue 40 on ``tests/fixtures/simulate/two-peaks-hpa.yaml``: a scale-up beside soft taints.

Each service scales from 110 to 150 pods at 2h, 320 new pods in one scheduling pass,
when no node is near a limit. kube-scheduler places them by requests, and the 40 nodes
of a batch pod (half a core asked, four used) are the emptiest by requests: they took
2.5 service pods more each (5.5 against 3.0 before the scale-up) and were over the
limit at the 4h peak, where the descheduler beside soft taints needed 1.5 times the
node-minutes above the limits of the descheduler beside the extender. The warm taint
(``app/load/warm_taint.py``) marks them before the scale-up. Run for the first 5 hours
(the first scale-up and peak): about 2 CPU-seconds a run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.summary import Summary, summarise

FIXTURE = str(Path(__file__).parents[1] / "fixtures" / "simulate" / "two-peaks-hpa.yaml")
FIVE_HOURS_S = 5 * 3600.0
GIB = 2.0**30


def run(policy: str, seed: int) -> tuple[SimulatedCluster, Summary]:
    scenario = load_scenario(FIXTURE).model_copy(
        update={"seed": seed, "duration_s": FIVE_HOURS_S}
    )
    cluster = SimulatedCluster(scenario, plan_for(policy))
    return cluster, summarise(cluster.simulate())


def above(summary: Summary) -> float:
    return summary.cpu_node_minutes_above + summary.memory_node_minutes_above


def service_pods_on_batch_nodes(cluster: SimulatedCluster) -> float:
    """The mean of the service pods (500m, 1 GiB each) on the nodes of a batch pod
    (500m, 2 GiB): told apart by their requests, 1 GiB more memory than twice the CPU."""
    requests = cluster.state.requests
    batch = np.isclose(requests.requested_memory / GIB - 2 * requests.requested_cpu, 1.0)
    assert int(batch.sum()) == 40
    return float((requests.requested_cpu[batch] / 0.5 - 1).mean())


@pytest.mark.parametrize("seed", [1, 2])
def test_the_scale_up_beside_soft_taints_keeps_off_the_batch_pods_nodes(seed: int) -> None:
    cluster, _ = run("default+taints", seed)
    assert service_pods_on_batch_nodes(cluster) <= 3.5  # 5.5 without the warm taint
    warm = cluster.soft_taints.warm if cluster.soft_taints is not None else None
    assert warm is not None
    assert warm.last is not None


@pytest.mark.parametrize("seed", [1, 2])
def test_beside_soft_taints_the_descheduler_is_within_a_quarter_of_the_extender_s(
    seed: int,
) -> None:
    _, with_taints = run("default+taints+desched", seed)
    _, with_loadaware = run("loadaware+desched", seed)
    assert above(with_taints) <= 1.25 * above(with_loadaware)
    assert with_taints.evictions_bought_nothing == 0

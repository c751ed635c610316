"""The simulator's extender answer is ``app.load.prioritize.host_priorities``, node for node; its
choice from the ranks kept between pods is the choice made afresh over every node."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest

from app.load import PLAIN_MAX_SCORE, plain_priority, preferred_priority
from app.load.prioritize import host_priorities
from app.simulate.cluster import SimulatedCluster
from app.simulate.policies import plan_for
from app.simulate.scenario import load_scenario
from app.simulate.scheduling import (
    _AFRESH,
    BestNodes,
    ExtenderTerms,
    NodeRequests,
    PodShape,
    Scheduler,
)

GiB = 2.0**30
LOWEST = int(np.iinfo(np.int64).min)  # how the scheduler ranks an infeasible node


def asked_in_order(
    scores: list[int], preferable: list[bool], roomy: list[bool], asked: list[int], first: int
) -> list[int]:
    """``host_priorities`` asked as kube-scheduler asks: the asked nodes listed from node
    ``first`` on, then from node 0; the answer put back in node order (0: not asked)."""
    order = [n for n in asked if n >= first] + [n for n in asked if n < first]
    listed = host_priorities(
        [scores[n] for n in order], [preferable[n] for n in order], [roomy[n] for n in order]
    )
    answer = [0] * len(scores)
    for node, score in zip(order, listed, strict=True):
        answer[node] = score
    return answer


@dataclass
class View:
    """The load filter's arrays the extender's answer reads (``ExtenderView``)."""

    extender_score: npt.NDArray[np.int64]
    preferable: npt.NDArray[np.bool_]
    room_cpu: npt.NDArray[np.float64]
    room_memory: npt.NDArray[np.float64]
    evaluated: set[int] = field(default_factory=set)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("preferable_share", [0.7, 0.03])
def test_the_kept_terms_answer_as_the_whole_array_answer_after_every_change(
    seed: int, preferable_share: float
) -> None:
    """Kept between pods and re-made only where nodes were re-evaluated, the terms give
    every pod the same total as ``host_priorities`` asked in the request's order: after
    one node's change, many at once (a sync), a new estimate and a new cap. They count
    the nodes that can be preferred, which the scheduler reads to leave the search out
    where there are none (with few preferable nodes, often)."""
    rng = np.random.default_rng(seed)
    count, factor = 40, 30
    cpu, memory = rng.uniform(1, 8, count), rng.uniform(1, 8, count)
    view = View(
        rng.integers(-1, 11, count),
        rng.random(count) < preferable_share,
        rng.uniform(0, 1, count),
        rng.uniform(0, 1, count),
    )
    terms = ExtenderTerms(view, cpu, memory, factor)
    estimates = [(0.5, 0.5), (2.0, 1.0), (0.0, 0.0)]
    estimate = estimates[0]
    for _ in range(400):
        changes = 1 if rng.random() < 0.8 else int(rng.integers(2, count))
        for node in rng.choice(count, changes, replace=False).tolist():
            view.extender_score[node] = rng.integers(-1, 11)
            view.preferable[node] = rng.random() < preferable_share
            view.room_cpu[node] = rng.uniform(0, 1) if rng.random() < 0.9 else math.inf
            view.room_memory[node] = rng.uniform(0, 1)
            view.evaluated.add(node)
        if rng.random() < 0.1:
            estimate = estimates[int(rng.integers(len(estimates)))]
        asked = rng.random(count) < 0.8
        if not asked.any():
            continue
        listed = np.flatnonzero(asked)
        k = int(rng.integers(len(listed)))
        roomy = (estimate[0] / cpu <= view.room_cpu) & (estimate[1] / memory <= view.room_memory)
        expected = np.array(
            asked_in_order(
                view.extender_score.tolist(),
                view.preferable.tolist(),
                roomy.tolist(),
                listed.tolist(),
                int(listed[k]),
            )
        )

        terms.follow(estimate)
        assert not view.evaluated
        assert terms.preferable_nodes == np.count_nonzero(terms.can_rank >= 0)
        best = terms.preferred(listed, k)
        if terms.preferable_nodes == 0:
            assert best == -1
        scores = view.extender_score
        cap = PLAIN_MAX_SCORE if best < 0 else plain_priority(int(scores[best]))
        got = terms.plain(cap).copy()
        if best >= 0:
            got[best] = factor * preferred_priority(int(scores[best]))
        assert (got[asked] == expected[asked] * factor).all()


@pytest.mark.parametrize("seed", range(3))
def test_the_kept_best_nodes_are_the_ones_the_whole_array_shows(seed: int) -> None:
    """Brought up to date node by node, the best rank, the nodes tied at it (in node
    order) and the feasible count are what the whole array shows after every change:
    a rank raised above the best, lowered out of it (the last tied one too), made
    infeasible or feasible again."""
    rng = np.random.default_rng(seed)
    count = 30
    feasible = rng.random(count) < 0.8
    ranks = np.where(feasible, rng.integers(0, 6, count), LOWEST)
    kept = BestNodes(ranks.copy(), feasible)
    for _ in range(500):
        node = int(rng.integers(count))
        feasible[node] = rng.random() < 0.8
        ranks[node] = int(rng.integers(0, 8)) if feasible[node] else LOWEST
        kept.rank(node, bool(feasible[node]), int(ranks[node]))
        assert kept.feasible == np.count_nonzero(feasible)
        assert kept.best == ranks.max()
        expected = np.flatnonzero(ranks == ranks.max()).tolist() if feasible.any() else []
        assert kept.tied == expected


def choices(scheduler: Scheduler, pods: list[PodShape], rng: np.random.Generator) -> list[int]:
    """Where each pod goes, bound there; now and then a bound pod leaves, or the soft
    taints move."""
    placed: list[tuple[int, PodShape]] = []
    chosen = []
    for pod in pods:
        if placed and rng.random() < 0.1:
            node, gone = placed.pop(int(rng.integers(len(placed))))
            scheduler.requests.add(node, gone, -1.0)
        if scheduler.soft_tainted is not None and rng.random() < 0.05:
            scheduler.soft_tainted[:] = rng.random(len(scheduler.soft_tainted)) < 0.2
        choice = scheduler.choose(pod)
        chosen.append(-1 if choice is None else choice)
        if choice is not None:
            scheduler.requests.add(choice, pod)
            placed.append((choice, pod))
    return chosen


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("tainted", [False, True])
def test_a_choice_from_the_kept_ranks_is_the_choice_made_afresh(seed: int, tainted: bool) -> None:
    """kube-scheduler's default profile (with soft taints that move now and then) on
    nodes of a few sizes, waves of pods of a few shapes until the nodes are full:
    choosing from the last pod's ranks, re-ranked where a binding, an eviction or a
    taint changed them, picks every node that choosing afresh over every node picks,
    with the same random draws."""
    rng = np.random.default_rng(seed)
    count = 40
    cpu = rng.choice([4.0, 8.0, 16.0], count)
    shapes = [PodShape(0.5, 1 * GiB), PodShape(1.0, 2 * GiB), PodShape(0.0, 0.0)]
    pods = [shapes[int(rng.integers(len(shapes)))] for _ in range(30) for _ in range(12)]

    def made(keeps: bool) -> Scheduler:
        requests = NodeRequests(cpu.copy(), cpu * 4 * GiB)
        taints = np.zeros(count, dtype=np.bool_) if tainted else None
        step = Scheduler(requests, None, 2, np.random.default_rng(seed), soft_tainted=taints)
        if not keeps:  # the reference: the ranks are never kept, every pod chosen afresh
            step._choose_from_kept = lambda *_: _AFRESH  # type: ignore[method-assign]
        return step

    kept, afresh = made(True), made(False)
    assert choices(kept, pods, np.random.default_rng(seed)) == choices(
        afresh, pods, np.random.default_rng(seed)
    )
    assert kept.draws.integers(1 << 30) == afresh.draws.integers(1 << 30)


@pytest.mark.parametrize(
    ("name", "policy"),
    [
        ("burst", "crane"),
        ("small-pods-hot-spot", "loadaware"),
        ("drifting-hot-spot", "loadaware+desched"),
        ("drifting-hot-spot", "default+taints+desched"),
    ],
)
def test_a_run_choosing_from_kept_ranks_is_the_run_choosing_afresh(
    name: str, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on built-ins, under the load filter and the extender's answer (plain
    where no node can be preferred, lifted where one can), a descheduler's evictions
    and soft taints: every placement alike. (Each scenario is one where ranking a
    changed node wrongly, as crane or as the extender's plain answer, shows.)"""
    scenario = load_scenario(name).model_copy(update={"seed": 2})
    kept = SimulatedCluster(scenario, plan_for(policy)).simulate()
    monkeypatch.setattr(Scheduler, "_choose_from_kept", lambda *_: _AFRESH)
    afresh = SimulatedCluster(scenario, plan_for(policy)).simulate()
    assert kept.placements == afresh.placements
    assert kept.evictions == afresh.evictions

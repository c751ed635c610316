"""Simulation runs made once per test session, whichever worker asks first.

The outcome tests (``test_no_harm``, ``test_soft_taint_outcomes``) ask for many of the
same runs: one scenario, seed and policy, in tests that xdist gives to different
workers. A run is a pure function of the scenario, the policy and the code, so each is
simulated once and kept, pickled, in a folder shared by the session's workers
(``tests/simulate/conftest.py`` names it: under the session's own temporary folder,
never reused by another session). A worker that asks for a run another worker is
making waits on the run's lock file and reads it when done.

The key is the scenario as validated (every field, the seed and horizon included), the
policy, and a hash of every file under ``app/``, so a run made by other code is never
read. Outside a session (no folder named) every run is simulated anew.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import operator
import pickle
from dataclasses import dataclass
from pathlib import Path

from app.simulate.cluster import Deletion, Eviction, Placement, Run, SimulatedCluster
from app.simulate.collector import fewer_collections
from app.simulate.policies import plan_for
from app.simulate.scenario import Scenario
from tests.support.locks import kept_once

APP = Path(__file__).resolve().parents[2] / "app"

_folder: Path | None = None


@dataclass(frozen=True)
class Outcome:
    """One run, and how many of its scheduling choices soft taints steered."""

    run: Run
    taint_steered: int


def share_runs_in(folder: Path | None) -> None:
    """Keep runs in ``folder`` (shared by the session's workers), or nowhere."""
    global _folder
    _folder = folder


@functools.cache
def code_hash() -> str:
    """Every file under app/ (sources, built-in scenarios, native helpers), hashed."""
    digest = hashlib.sha256()
    for path in sorted(APP.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(APP)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def run_key(scenario: Scenario, policy: str, by_workload: bool = False) -> str:
    document = scenario.model_dump_json(round_trip=True)
    measures = "\nby workload" if by_workload else ""
    return hashlib.sha256(f"{code_hash()}\n{policy}{measures}\n{document}".encode()).hexdigest()


def simulate_now(scenario: Scenario, policy: str, by_workload: bool = False) -> Outcome:
    # The collector's thresholds go back only once the cluster is gone, with the state
    # it freed (not a cycle: test_cluster): the young collection they set off then walks
    # the run alone, not everything the cluster still held.
    with fewer_collections():
        cluster = SimulatedCluster(scenario, plan_for(policy), by_workload=by_workload)
        outcome = Outcome(cluster.simulate(), cluster.scheduler.taint_steered)
        del cluster
    return outcome


def simulated(scenario: Scenario, policy: str, *, by_workload: bool = False) -> Outcome:
    """The run of ``scenario`` under ``policy``: made here, or read as another test made
    it; ``by_workload``: with each workload's own throttling measured
    (``SimulatedCluster``'s), a run of its own."""
    if _folder is None:
        return simulate_now(scenario, policy, by_workload)
    kept = _folder / f"{run_key(scenario, policy, by_workload)}.pickle"
    made = kept_once(kept, lambda: packed(simulate_now(scenario, policy, by_workload)))
    return unpacked(made)


# A run's records, one object each (10,000 placements on thousand-nodes), are kept as
# rows of their fields: pickle writes and reads plain tuples several times faster than
# dataclasses, and every test that asks for a run reads it.
_RECORDS = {"placements": Placement, "evictions": Eviction, "deletions": Deletion}


def packed(outcome: Outcome) -> bytes:
    """``outcome`` as bytes for ``unpacked``."""
    run = outcome.run
    rows = {}
    for name, record in _RECORDS.items():
        fields = operator.attrgetter(*(f.name for f in dataclasses.fields(record)))
        rows[name] = [fields(r) for r in getattr(run, name)]
    bare = dataclasses.replace(run, placements=[], evictions=[], deletions=[])
    return pickle.dumps(
        (dataclasses.replace(outcome, run=bare), rows), protocol=pickle.HIGHEST_PROTOCOL
    )


def unpacked(made: bytes) -> Outcome:
    """The outcome ``packed`` made these bytes of."""
    outcome, rows = pickle.loads(made)
    for name, record in _RECORDS.items():
        setattr(outcome.run, name, [record(*row) for row in rows[name]])
    assert isinstance(outcome, Outcome)
    return outcome

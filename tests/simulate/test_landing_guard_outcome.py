"""Issue 40, two-peaks-two-groups seed 9: beside a stock kube-scheduler, group b's pods
moved at its peak went, by requests, to group a's batch-pod nodes, which read under
the limits on their 5-minute means and spiked above them for the rest of the day:
1,060 node-minutes above the limits against ``loadaware+desched``'s 832 (1.27x). The
annotator's guard ahead of the replacements (app/load/landing_guard.py: while the
descheduler moves pods, a node the largest of them would warm is tainted too) takes it
under the issue's 1.25x bar. One seed, each run made once per session."""

from __future__ import annotations

from pathlib import Path

from app.simulate.summary import summarise
from tests.simulate.test_no_harm import simulate
from tests.support.scripts import load_script

FIXTURE = str(Path(__file__).parents[1] / "fixtures" / "simulate" / "two-peaks-two-groups.yaml")

script = load_script("managed_clusters")


def test_the_guard_keeps_the_replacements_off_nodes_they_would_warm() -> None:
    beside_extender = summarise(simulate(FIXTURE, "loadaware+desched", 9))
    beside_taints = summarise(simulate(FIXTURE, "default+taints+desched", 9))
    assert script.above(beside_taints) <= 1.25 * script.above(beside_extender)
    assert beside_taints.throttled_cpu_minutes + beside_taints.oom_events == 0
    assert beside_taints.evictions_bought_nothing == 0

"""Each workload's pod as placement sees it: its requests and, where the policy
estimates (the extender's estimate), its estimated usage, raised to the usage the
annotator last published for its workload (``SimulatedWorkloadUsage``)."""

from __future__ import annotations

from collections.abc import Sequence

from app.load import estimate_pod_usage, with_workload_usage
from app.objects import Resources
from app.policy import Policy
from app.simulate.scenario import Workload
from app.simulate.scheduling import PodShape
from app.simulate.workload_usage import SimulatedWorkloadUsage


class PodShapes:
    """One shape per workload (``shapes``, a list kept and changed in place), re-estimated
    when a publication changes its workload's usage."""

    def __init__(self, workloads: Sequence[Workload], policy: Policy, *, estimated: bool) -> None:
        self._workloads = workloads
        self._policy = policy
        self.shapes = [
            pod_shape(requests, limits, policy if estimated else None)
            for requests, limits in (w.pod_requests_and_limits for w in workloads)
        ]
        self._version = 0  # of the publication followed last
        # Per workload, the published usage its shape was last estimated from (none
        # before the first publication: the shapes above are estimated without it).
        self._observed: dict[int, Resources | None] = {}

    def follow(self, published: SimulatedWorkloadUsage) -> None:
        """A new publication changes the estimate of each workload's next pod."""
        if published.version == self._version:
            return
        self._version = published.version
        for index, workload in enumerate(self._workloads):
            observed = published.observed(index)
            if index in self._observed and _same_observed(self._observed[index], observed):
                continue  # the same estimate as from the last publication
            self._observed[index] = observed
            requests, limits = workload.pod_requests_and_limits
            self.shapes[index] = pod_shape(requests, limits, self._policy, observed)


def _same_observed(before: Resources | None, now: Resources | None) -> bool:
    """Whether two publications of a workload's usage are the same floats, bit for bit:
    both none, or equal and not zero (a zero may differ in its sign)."""
    if before is None or now is None:
        return before is now
    return before == now and before.cpu_cores != 0 and before.memory_bytes != 0


def pod_shape(
    requests: Resources,
    limits: Resources,
    policy: Policy | None,
    observed: Resources | None = None,
) -> PodShape:
    """A workload's pod as placement sees it; with ``policy``, with the extender's
    estimate of its usage (a policy without estimation estimates nothing), raised to
    its workload's ``observed`` per-pod usage where one is published."""
    if policy is None or not policy.spec.estimation.enabled:
        return PodShape(requests.cpu_cores, requests.memory_bytes)
    settings = policy.spec.estimation
    # Raised, never lowered: the extender lowers the estimates of pods bound, not of the
    # pod in hand (``app.extender.verbs``; ``app.load.estimate``, "Lowered to what is
    # measured").
    usage = estimate_pod_usage(requests, limits, settings)
    if settings.workload_usage:
        usage = with_workload_usage(usage, observed, limits)
    return PodShape(requests.cpu_cores, requests.memory_bytes, usage.cpu_cores, usage.memory_bytes)

"""Node pools: which nodes are judged by other limits, and by which (issue 45).

A policy may name pools in ``spec.nodePools`` (loadaware's addition to crane's format;
a policy without it behaves exactly as before). Each pool is a label selector over
node labels and a list of predicates. A node one pool selects is judged by the
policy's predicates with the pool's in their place, metric by metric: a metric the
pool names takes the pool's limit (0 turns the limit off in the pool), a metric it
does not name keeps the policy's own limit. Everything that follows from the limits
follows for the pool too: the extender's filter, the score's ceilings for metrics
without fresh data, the room under the limits, and the soft-taint rule. The rest of
the policy (what is synced, the weights, the hot value, the estimate) is the
policy's, for every pool. The descheduler's configuration has pools of its own, with
thresholds (``app/rebalance/config.py``), matched by the same rules.

A node in no pool is judged by the policy's own predicates (the defaults). A node two
or more pools select is an error of the policy. Where the file shows it, the policy
does not load: two pools with the same selector, or one whose selector asks for a
part of what another's asks (every node of the narrower is in both). Where only the
nodes' labels show it, the node is judged by the defaults, the components log it once
per node, and ``loadaware explain node`` says so: a node must never get the looser or
the stricter of two limits by the order of a list.

This module is the rule alone, generic in what a pool carries (the policy's
``Policy``, the configuration's thresholds): the schema builds on it
(``Policy.node_pools``), so it imports nothing of the policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from app.objects import LabelRequirement, LabelSelector

__all__ = ["NodePools", "PoolMatch", "duplicate_name", "label_selector", "overlap_problem"]

T = TypeVar("T")
Named = TypeVar("Named", bound="_HasName")


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


class _Requirement(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def operator(self) -> str: ...
    @property
    def values(self) -> tuple[str, ...]: ...


class Selector(Protocol):
    """A label selector as a file gives it (``PoolSelector`` in the schema)."""

    @property
    def match_labels(self) -> Mapping[str, str]: ...
    @property
    def match_expressions(self) -> tuple[_Requirement, ...]: ...


@dataclass(frozen=True, slots=True)
class PoolMatch(Generic[T]):
    """Which pool a node is in, and what it is judged by (``judged_by``)."""

    judged_by: T  # its pool's, or the defaults
    pool: str | None  # the pool it is in; None: in none, or in several (``overlap``)
    overlap: tuple[str, ...] = ()  # the pools that all select it (two or more)

    @property
    def described(self) -> str:
        """One line for ``explain`` and logs."""
        if self.overlap:
            return (
                f"none: pools {', '.join(self.overlap)} all select it, an error of the "
                f"configuration; judged by the defaults"
            )
        if self.pool is None:
            return "none: judged by the defaults"
        return self.pool


@dataclass(frozen=True, slots=True)
class NodePools(Generic[T]):
    """Pools, each with what its nodes are judged by, made once (``Policy.node_pools``)."""

    default: PoolMatch[T]  # a node in no pool
    pools: tuple[tuple[str, LabelSelector, PoolMatch[T]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pools)

    def match(self, labels: Mapping[str, str]) -> PoolMatch[T]:
        """The pool of a node with these labels (module doc: none, one, or an overlap)."""
        if not self.pools:
            return self.default
        found = [(name, match) for name, selector, match in self.pools if selector.matches(labels)]
        if not found:
            return self.default
        if len(found) == 1:
            return found[0][1]
        return replace(self.default, overlap=tuple(name for name, _ in found))

    def of(self, name: str) -> T:
        """What the pool ``name`` judges by (KeyError: no such pool)."""
        for pool, _, match in self.pools:
            if pool == name:
                return match.judged_by
        raise KeyError(name)


def merged(defaults: Iterable[Named], pool: Iterable[Named]) -> tuple[Named, ...]:
    """The defaults in their order, each replaced by the pool's entry of the same name;
    then the pool's entries whose name no default has, in the pool's order."""
    by_name = {entry.name: entry for entry in pool}
    kept = [by_name.pop(entry.name, entry) for entry in defaults]
    return (*kept, *by_name.values())


def label_selector(selector: Selector) -> LabelSelector:
    return LabelSelector(
        dict(selector.match_labels),
        tuple(
            LabelRequirement(e.key, e.operator, tuple(e.values))
            for e in selector.match_expressions
        ),
    )


def _requirements(selector: Selector) -> frozenset[tuple[str, str, frozenset[str]]]:
    """A selector's requirements in one comparable form (``key: value`` is key In value)."""
    labels = {(key, "In", frozenset((value,))) for key, value in selector.match_labels.items()}
    expressions = {(e.key, e.operator, frozenset(e.values)) for e in selector.match_expressions}
    return frozenset(labels | expressions)


def overlap_problem(pools: Iterable[tuple[str, Selector]]) -> str | None:
    """Two pools of which one selects every node the other does, as the file shows:
    the requirements of one selector are all among the other's."""
    requirements = [(name, _requirements(selector)) for name, selector in pools]
    for i, (first, first_needs) in enumerate(requirements):
        for second, second_needs in requirements[i + 1 :]:
            if first_needs == second_needs:
                return (
                    f"nodePools {first!r} and {second!r} have the same nodeSelector: every "
                    f"node either selects is in both; a node must be in one pool at most"
                )
            if first_needs < second_needs or second_needs < first_needs:
                wider, narrower = (
                    (first, second) if first_needs < second_needs else (second, first)
                )
                return (
                    f"nodePools {wider!r} selects every node that {narrower!r} selects (its "
                    f"nodeSelector asks for a part of what {narrower!r}'s asks): a node must "
                    f"be in one pool at most; narrow {wider!r}, for example with a NotIn or "
                    f"DoesNotExist on a label of {narrower!r}"
                )
    return None


def duplicate_name(names: Iterable[str]) -> str | None:
    """The first name given twice, or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None
